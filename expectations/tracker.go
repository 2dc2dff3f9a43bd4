package expectations

import (
	"fmt"
	"hash/maphash"
	"math"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/racesafe/racesafe/internal/objcopy"
	"github.com/racesafe/racesafe/internal/schemes"
)

// DefaultTTL is how long an expectation waits for the cache when Options.TTL
// is zero: kube-controller-manager's ExpectationsTimeout. A watch that has not
// delivered a write in five minutes is broken, and the caller must be allowed
// to act on what it can read rather than requeue forever.
const DefaultTTL = 5 * time.Minute

// Options configure a Tracker. The zero value is ready to use.
type Options struct {
	// Name labels the tracker's metrics; "default" when empty. Use one name per
	// tracker: two trackers with the same name add into the same series.
	Name string
	// TTL bounds how long an expectation is waited for; DefaultTTL when zero or
	// negative.
	TTL time.Duration
	// Clock measures TTLs and catch-up time; clock.RealClock{} when nil.
	Clock clock.PassiveClock
	// Scheme names the kind of typed objects, by their Go type. When set, it
	// is the only answer: a Go type it does not know is ErrUnknownKind.
	//
	// When nil (the zero value), a typed object's kind is, in this order:
	// the one the scheme of a client the tracker was given has for its Go
	// type (NewReader, Prime, NewClient with the tracker in
	// ClientOptions.Tracker, statusupdate.New with it in
	// Options.Expectations: each gives the tracker its client's or reader's
	// Scheme(), normally the manager's); the one client-go's scheme.Scheme
	// has; the one the object's own TypeMeta names (a controller-runtime
	// cache sets it on every object it returns, and Reader.Get reads the
	// cache to learn it). A Go type named once keeps that kind. A typed
	// object that none of these can name is ErrUnknownKind, saying so.
	// Unstructured and metadata-only objects name their kind themselves.
	Scheme *runtime.Scheme
}

// Tracker remembers, per object (kind, namespace and name), the newest
// resourceVersion this controller wrote (or the incarnation it deleted), and
// tells whether a cached read has caught up with it. It is safe for
// concurrent use, and one Tracker serves any number of kinds.
type Tracker struct {
	name  string
	ttl   time.Duration
	clock clock.PassiveClock
	// scheme is Options.Scheme, nil when it was not set; given then holds
	// the schemes of the clients the tracker was given (takeScheme), in
	// the order given, without repeats.
	scheme *runtime.Scheme
	given  atomic.Pointer[[]*runtime.Scheme]
	m      trackerMetrics
	// typedKinds caches the kind of each typed Go type the scheme resolved,
	// so that the check path neither asks the scheme nor allocates; first is
	// the first one resolved, the usual answer for a tracker of one kind.
	typedKinds sync.Map // reflect.Type -> *typedKind
	first      atomic.Pointer[typedKind]
	// lastNamed is the last kind an unstructured or metadata-only object
	// named (namedKind).
	lastNamed atomic.Pointer[namedKind]
	// kindIDs numbers the kinds seen, so that a key holds a number rather
	// than two more strings to hash and compare.
	kindMu  sync.RWMutex
	kindIDs map[schema.GroupKind]kindID
	// ticker reads the clock; times below are its ticks.
	ticker ticker
	// nextSweep is the tick after which the next write may sweep expired
	// entries. A CompareAndSwap elects the one writer that pays for it.
	nextSweep atomic.Int64
	// seed hashes keys (hashKey); one per tracker.
	seed   maphash.Seed
	shards [shardCount]shard
}

// shardCount spreads keys so that concurrent checks of different objects
// rarely touch the same lock. A power of two, so a mask picks the shard.
const (
	shardBits  = 6
	shardCount = 1 << shardBits
)

type shardState struct {
	mu sync.RWMutex
	m  table
}

// shard pads shardState to its own cache lines: RLock writes the mutex, and
// neighbouring shards on one line would make readers of different keys
// contend anyway.
type shard struct {
	shardState
	_ [128 - unsafe.Sizeof(shardState{})%128]byte
}

// objectKey names an object across kinds. The version is left out: one
// object served at two versions is one object with one resourceVersion.
type objectKey struct {
	kind kindID
	client.ObjectKey
}

// kindID numbers a GroupKind within one Tracker.
type kindID uint32

type kind struct {
	gk schema.GroupKind
	id kindID
}

type namedKind struct {
	apiVersion, kindName string
	kind
}

type typedKind struct {
	typ reflect.Type
	kind
}

// form is the Go shape a cached object is read in. controller-runtime keeps
// one informer per kind and form, each with its own lag, so each form must
// catch up with an expectation on its own.
type form uint8

const (
	formTyped form = 1 << iota
	formMetadata
	formUnstructured

	allForms = formTyped | formMetadata | formUnstructured
)

// formOf returns the form obj is read in; obj is an object or a list.
func formOf(obj runtime.Object) form {
	switch obj.(type) {
	case *metav1.PartialObjectMetadata, *metav1.PartialObjectMetadataList:
		return formMetadata
	case runtime.Unstructured:
		return formUnstructured
	}
	return formTyped
}

// expectation is what a cached object must show to be as new as our write.
type expectation struct {
	uid types.UID
	// rv is well-formed: it was checked before it was stored.
	rv string
	// deletion: the incarnation uid must be gone from the cache.
	deletion bool
	// caught holds the forms whose cache has caught up; they answer fresh.
	// The expectation is pending while it is empty, and dropped when full.
	caught form
	// at is when the expectation was last raised; TTL and catch-up time
	// count from it.
	at ticks
}

func (e expectation) pending() bool { return e.caught == 0 }

// New returns a Tracker. It starts no goroutine: expired entries are dropped
// by the calls that meet them and by an occasional sweep inside ExpectWrite
// and ExpectDeletion.
func New(opts Options) *Tracker {
	opts.Name, opts.TTL, opts.Clock = withDefaults(opts.Name, opts.TTL, opts.Clock)
	t := &Tracker{
		name:    opts.Name,
		ttl:     opts.TTL,
		clock:   opts.Clock,
		scheme:  opts.Scheme,
		m:       newTrackerMetrics(opts.Name),
		kindIDs: make(map[schema.GroupKind]kindID),
		seed:    maphash.MakeSeed(),
	}
	for i := range t.shards {
		t.shards[i].m = newTable()
	}
	t.ticker = newTicker(opts.Clock)
	t.nextSweep.Store(addSaturated(0, t.ttl))
	return t
}

// withDefaults gives the Name, TTL and Clock every options struct of this
// package documents for their zero values: "default", DefaultTTL and the
// real clock.
func withDefaults(name string, ttl time.Duration, clk clock.PassiveClock) (string, time.Duration, clock.PassiveClock) {
	if name == "" {
		name = "default"
	}
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return name, ttl, clk
}

// String returns the tracker's name, as used in its metrics.
func (t *Tracker) String() string { return t.name }

// ExpectWrite records obj, as the API server returned it from a create,
// update or patch, as the state the cache must reach. Pass the returned
// object, never the one sent: only the response carries the new
// resourceVersion.
//
// The expectation only ever moves forward: a write with a lower
// resourceVersion than the one recorded (a late or reordered response) leaves
// it unchanged. An object with another UID is a new incarnation and replaces
// the expectation, when its resourceVersion is higher; a lower one belongs to
// an incarnation older than the one recorded and is ignored. A pending
// deletion of the same UID stays a deletion: writing to an object that is
// being deleted does not bring it back. A write that raises the expectation
// must be caught up with again by every form.
//
// An object that cannot be recorded is an error, and nothing is recorded:
// ErrNilObject, ErrNoName, ErrUnknownKind (its kind is not in
// Options.Scheme), or a *ResourceVersionError.
func (t *Tracker) ExpectWrite(obj client.Object) error {
	return t.expect(obj, false)
}

// ExpectDeletion records that obj, as last read or returned, is expected gone:
// the cache must show NotFound (see CheckAbsent) or an object with another
// UID and a higher resourceVersion, which is a later incarnation. Call it
// after a successful Delete, also when finalizers keep the object around:
// the cached object is then stale until it is really gone, or until the TTL.
func (t *Tracker) ExpectDeletion(obj client.Object) error {
	return t.expect(obj, true)
}

func (t *Tracker) expect(obj client.Object, deletion bool) error {
	key, _, rv, err := t.keyOf(obj)
	if err != nil {
		return err
	}
	if err := t.validRV(obj, key, rv); err != nil {
		return err
	}
	now := t.ticker.now()
	next := expectation{uid: obj.GetUID(), rv: rv, deletion: deletion, at: now}

	h := hashKey(t.seed, key)
	s := t.shardFor(h)
	s.mu.Lock()
	prev, found := s.m.get(h, key)
	if found {
		next = merge(prev, next)
	}
	s.m.put(h, key, next)
	s.mu.Unlock()
	if next.pending() && (!found || !prev.pending()) {
		t.m.pending.Inc()
	}
	t.maybeSweep(now)
	return nil
}

// merge combines a recorded expectation with a new one for the same key.
// Both resourceVersions are well-formed.
func merge(prev, next expectation) expectation {
	newer, err := resourceversion.CompareResourceVersion(next.rv, prev.rv)
	if err != nil {
		// Unreachable: both were validated. Keeping prev is the safe side,
		// since it never hides a write already recorded.
		return prev
	}
	if !sameUID(prev.uid, next.uid) {
		// resourceVersions are one sequence per resource, across
		// incarnations: the higher one is the later object.
		if newer > 0 {
			return next
		}
		return prev
	}
	merged := prev
	if prev.uid == "" {
		merged.uid = next.uid
	}
	if newer > 0 {
		merged.rv, merged.at, merged.caught = next.rv, next.at, 0
	}
	if next.deletion && !prev.deletion {
		merged.deletion, merged.at, merged.caught = true, next.at, 0
	}
	return merged
}

// Check tells whether obj, read from the cache, is at least as new as what
// this controller wrote to the object of its kind, namespace and name:
//
//   - ErrNilObject, ErrNoName or ErrUnknownKind (wrapped) for an object that
//     is nil, has no name, or whose kind cannot be told;
//   - *ResourceVersionError (errors.Is(err, ErrInvalidResourceVersion)) when
//     obj's resourceVersion cannot be ordered, whatever is recorded, expired
//     or not; the expectation is kept;
//   - nil when no expectation is recorded for the object;
//   - nil when obj's form (typed, metadata-only or unstructured) has caught
//     up with the expectation before;
//   - nil when obj satisfies the expectation; its form has then caught up;
//   - *StaleError (errors.Is(err, ErrStale)) when obj is older than the
//     recorded write, or is still the incarnation expected deleted, or another
//     incarnation (another UID) whose resourceVersion is not higher;
//   - nil for another UID with a higher resourceVersion: the object was
//     replaced after our write, the expectation belonged to its predecessor,
//     and obj's form has caught up;
//   - nil when the expectation outlived the TTL; it is dropped and counted as
//     expired unless a form had caught up with it.
//
// On a *StaleError the caller must not act on obj: requeue and read again.
// A repeated stale check of the same copy (same resourceVersion, same
// expectation) returns the same *StaleError value, allocating nothing; do not
// modify it.
func (t *Tracker) Check(obj client.Object) error {
	key, f, seen, err := t.keyOf(obj)
	if err != nil {
		return err
	}
	if err := t.validRV(obj, key, seen); err != nil {
		return err
	}
	h := hashKey(t.seed, key)
	s := t.shardFor(h)
	// Misses and stale reads are decided under the read lock, so that checks
	// of many objects, and repeated stale checks of one, proceed in parallel.
	// Only a form catching up, or dropping an expectation, takes the write
	// lock.
	s.mu.RLock()
	p := s.m.find(h, key)
	if p == nil || p.e.caught&f != 0 {
		s.mu.RUnlock()
		return nil
	}
	e := p.e
	s.mu.RUnlock()
	uid := obj.GetUID()
	now := t.ticker.now()
	v := t.judge(e, now, uid, seen)
	if v == verdictKeep {
		s.mu.RLock()
		if p := s.m.find(h, key); p != nil && p.e == e {
			err := t.staleError(p, obj, key, seen)
			s.mu.RUnlock()
			t.m.stale.Inc()
			return err
		}
		s.mu.RUnlock()
		// Changed since it was judged: judged again under the write lock.
	}

	s.mu.Lock()
	cur, found := s.m.get(h, key)
	if found && cur != e {
		// A write raised the expectation, or a check caught up, since the
		// read lock: judge again, or a read older than that write would
		// pass as fresh.
		e = cur
		if e.caught&f != 0 {
			s.mu.Unlock()
			return nil
		}
		v = t.judge(e, now, uid, seen)
	}
	if !found || v == verdictKeep {
		s.mu.Unlock()
		if !found { // dropped by another call meanwhile
			return nil
		}
		return t.refuse(obj, key, e, seen)
	}
	t.settle(s, h, key, e, f, v, now)
	s.mu.Unlock()
	return nil
}

type verdict uint8

const (
	verdictKeep      verdict = iota // stale: the expectation stays as it is
	verdictSatisfied                // the form has caught up
	verdictExpired                  // waited longer than the TTL
	verdictAbsent                   // the form shows the object gone
)

// judge applies the rules of Check to e at time now. seen is well-formed.
func (t *Tracker) judge(e expectation, now ticks, uid types.UID, seen string) verdict {
	if now.sub(e.at) >= t.ttl {
		return verdictExpired
	}
	if e.satisfiedBy(uid, seen) {
		return verdictSatisfied
	}
	return verdictKeep
}

// settle applies verdict v of form f to e, recorded under key in s, whose
// write lock the caller holds; it updates the metrics.
func (t *Tracker) settle(s *shard, h keyHash, key objectKey, e expectation, f form, v verdict, now ticks) {
	wasPending := e.pending()
	if v == verdictExpired {
		s.m.del(h, key)
		if wasPending {
			t.m.pending.Dec()
			t.m.expired.Inc()
		}
		return
	}
	e.caught |= f
	if e.caught == allForms {
		s.m.del(h, key)
	} else {
		s.m.put(h, key, e)
	}
	if !wasPending {
		return
	}
	t.m.pending.Dec()
	// A NotFound settles a write only for liveness: the cache never showed
	// it, so it is neither satisfied nor a catch-up time.
	if v == verdictSatisfied || e.deletion {
		t.m.satisfied.Inc()
		t.m.catchUp.Observe(now.sub(e.at).Seconds())
	}
}

// refuse returns the error of a check that keeps its expectation.
func (t *Tracker) refuse(obj client.Object, key objectKey, e expectation, seen string) error {
	t.m.stale.Inc()
	return t.newStaleError(obj, key, e, seen)
}

func (t *Tracker) newStaleError(obj client.Object, key objectKey, e expectation, seen string) *StaleError {
	k, _ := t.kindOf(obj, formOf(obj)) // cached by the keyOf before
	return &StaleError{Kind: k.gk, Key: key.ObjectKey, Want: e.rv, Seen: seen, Deletion: e.deletion}
}

// staleError returns the error for a stale check against slot p, whose
// shard's read lock the caller holds. A controller requeues and checks the
// same cached copy again until its cache catches up, so the slot keeps the
// last error it returned and returns it again while the copy's version and
// the expectation are the same: those checks allocate nothing. Errors are
// not modified after they are returned, so one may be shared.
func (t *Tracker) staleError(p *slot, obj client.Object, key objectKey, seen string) *StaleError {
	if last := p.stale.Load(); last != nil && last.Seen == seen && last.Want == p.e.rv &&
		last.Deletion == p.e.deletion && last.Key == key.ObjectKey {
		return last
	}
	err := t.newStaleError(obj, key, p.e, seen)
	p.stale.Store(err)
	return err
}

// satisfiedBy reports whether a cached object with uid at the well-formed
// resourceVersion seen is as new as e. It is the single rule behind Check
// and Satisfied.
func (e expectation) satisfiedBy(uid types.UID, seen string) bool {
	cmp, err := resourceversion.CompareResourceVersion(seen, e.rv)
	if err != nil {
		return false
	}
	if sameUID(e.uid, uid) {
		return !e.deletion && cmp >= 0
	}
	// Another incarnation. A higher resourceVersion is a successor, created
	// after our write or deletion; a lower one is a predecessor the cache has
	// not yet seen deleted, which is as stale as an old copy of ours. An
	// equal one cannot be: one resourceVersion is one write, and it was
	// ours, so the cache holds something other than what we wrote.
	return cmp > 0
}

// CheckAbsent tells whether a NotFound for key, read from the cache into
// obj, may be acted on. obj names the kind and form, as the object passed to
// the Get that returned NotFound; its own namespace and name are not looked
// at. A NotFound always may be acted on: a recorded deletion is satisfied,
// and a recorded write is settled, because the object was deleted after it.
// Waiting for a write to an object that no longer exists would stall until
// the TTL, and liveness wins. Either way obj's form has caught up; the other
// forms of the kind are still judged. The one stale NotFound this lets
// through, right after our own Create, is caught by the API server: a second
// Create fails with AlreadyExists.
//
// It returns an error for a key without a name, a nil obj, or an obj whose
// kind is unknown (ErrUnknownKind).
func (t *Tracker) CheckAbsent(key client.ObjectKey, obj client.Object) error {
	if key.Name == "" {
		return fmt.Errorf("check absence of %q: %w", key.String(), ErrNoName)
	}
	if objcopy.IsNil(obj) {
		return fmt.Errorf("check absence of %s: %T: %w", key, obj, ErrNilObject)
	}
	f := formOf(obj)
	kind, err := t.kindOf(obj, f)
	if err != nil {
		return fmt.Errorf("check absence of %s: %w", key, err)
	}
	k := objectKey{kind: kind.id, ObjectKey: key}
	h := hashKey(t.seed, k)
	s := t.shardFor(h)
	s.mu.RLock()
	e, found := s.m.get(h, k)
	s.mu.RUnlock()
	if !found || e.caught&f != 0 {
		return nil
	}
	s.mu.Lock()
	if e, found = s.m.get(h, k); found && e.caught&f == 0 {
		now := t.ticker.now()
		v := verdictAbsent
		if now.sub(e.at) >= t.ttl {
			v = verdictExpired
		}
		t.settle(s, h, k, e, f, v, now)
	}
	s.mu.Unlock()
	return nil
}

// Satisfied reports whether obj catches its form up with an expectation
// recorded for its object, by the rules of Check, without recording it and
// without looking at the clock. It is false when nothing is recorded, when
// obj's form has caught up already, and when obj is stale or malformed. It is
// meant for event filters, which must not change state: the reconcile that
// follows calls Check.
func (t *Tracker) Satisfied(obj client.Object) bool {
	e, found := t.awaited(obj)
	return found && e.satisfiedBy(obj.GetUID(), obj.GetResourceVersion())
}

// awaits reports whether an expectation is recorded for obj's object that
// obj's form has not caught up with.
func (t *Tracker) awaits(obj client.Object) bool {
	_, found := t.awaited(obj)
	return found
}

// awaited returns the expectation recorded for obj's object, when obj's form
// has not caught up with it; found is false otherwise, and for an object
// that cannot be keyed.
func (t *Tracker) awaited(obj client.Object) (e expectation, found bool) {
	key, f, _, err := t.keyOf(obj)
	if err != nil {
		return expectation{}, false
	}
	h := hashKey(t.seed, key)
	s := t.shardFor(h)
	s.mu.RLock()
	e, found = s.m.get(h, key)
	s.mu.RUnlock()
	return e, found && e.caught&f == 0
}

// Forget drops the expectation for obj's kind, namespace and name, if any,
// for every form, without counting it as satisfied or expired. Call it when
// the controller stops caring about the object, e.g. after it removed its
// own finalizer for good. Only obj's kind and key are looked at.
func (t *Tracker) Forget(obj client.Object) error {
	key, _, _, err := t.keyOf(obj)
	if err != nil {
		return err
	}
	h := hashKey(t.seed, key)
	s := t.shardFor(h)
	s.mu.Lock()
	e, found := s.m.get(h, key)
	s.m.del(h, key)
	s.mu.Unlock()
	if found && e.pending() {
		t.m.pending.Dec()
	}
	return nil
}

// Pending returns the number of expectations that no form has caught up
// with. Expired ones count until a check or a sweep drops them, as in the
// pending gauge.
func (t *Tracker) Pending() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.RLock()
		s.m.each(func(_ objectKey, e expectation) bool {
			if e.pending() {
				n++
			}
			return true
		})
		s.mu.RUnlock()
	}
	return n
}

// maybeSweep drops expired entries at most once per TTL, on a write path. An
// expectation that is never checked again (its object was never read, or its
// controller stopped, or only some of its forms are read) would otherwise
// stay forever; with the sweep, memory is bounded by the writes of the last
// two TTLs.
func (t *Tracker) maybeSweep(now ticks) {
	next, at := t.nextSweep.Load(), int64(now)
	if at < next || !t.nextSweep.CompareAndSwap(next, addSaturated(at, t.ttl)) {
		return
	}
	t.m.sweeps.Inc()
	dropped := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		s.m.each(func(_ objectKey, e expectation) bool {
			if now.sub(e.at) < t.ttl {
				return true
			}
			if e.pending() {
				dropped++
			}
			return false
		})
		s.mu.Unlock()
	}
	if dropped > 0 {
		t.m.pending.Sub(float64(dropped))
		t.m.expired.Add(float64(dropped))
	}
}

// addSaturated returns nanos+d, or math.MaxInt64 where that would overflow:
// a TTL of centuries puts the next sweep at the end of time, not before now.
func addSaturated(nanos int64, d time.Duration) int64 {
	if d > 0 && nanos > math.MaxInt64-int64(d) {
		return math.MaxInt64
	}
	return nanos + int64(d)
}

// shardFor picks the shard of a key by its hash's top bits; the map inside
// uses all of them.
func (t *Tracker) shardFor(h keyHash) *shard {
	return &t.shards[h>>(64-shardBits)]
}

// keyOf returns obj's key and form, or ErrNilObject, ErrNoName or
// ErrUnknownKind.
func (t *Tracker) keyOf(obj client.Object) (objectKey, form, string, error) {
	if obj == nil {
		return objectKey{}, 0, "", ErrNilObject
	}
	// A typed nil pointer is a non-nil interface whose accessor methods
	// panic: GetName on (*corev1.ConfigMap)(nil) dereferences nil.
	if nilPointer(obj) {
		return objectKey{}, 0, "", fmt.Errorf("%T: %w", obj, ErrNilObject)
	}
	var key client.ObjectKey
	var rv string
	if u, ok := obj.(*unstructured.Unstructured); ok {
		key.Namespace, key.Name, rv = unstructuredMeta(u)
	} else {
		key.Namespace, key.Name, rv = obj.GetNamespace(), obj.GetName(), obj.GetResourceVersion()
	}
	if key.Name == "" {
		return objectKey{}, 0, "", fmt.Errorf("%T in namespace %q: %w", obj, key.Namespace, ErrNoName)
	}
	// The usual answer first: the tracker's first typed kind, known by the
	// Go type alone, before the type switch of formOf.
	if first := t.first.Load(); first != nil && first.typ == reflect.TypeOf(obj) {
		return objectKey{kind: first.id, ObjectKey: key}, formTyped, rv, nil
	}
	f := formOf(obj)
	k, err := t.kindOf(obj, f)
	if err != nil {
		return objectKey{}, 0, "", fmt.Errorf("%s: %w", key, err)
	}
	return objectKey{kind: k.id, ObjectKey: key}, f, rv, nil
}

// unstructuredMeta returns u's namespace, name and resourceVersion as its
// accessors do (a field that is absent or not a string reads ""), with one
// lookup of metadata rather than one per field: each accessor walks
// u.Object from the top.
func unstructuredMeta(u *unstructured.Unstructured) (namespace, name, rv string) {
	m, _ := u.Object["metadata"].(map[string]any)
	namespace, _ = m["namespace"].(string)
	name, _ = m["name"].(string)
	rv, _ = m["resourceVersion"].(string)
	return namespace, name, rv
}

// kindOf returns the kind of obj, which is not nil and of form f.
// Unstructured and metadata-only objects carry it in apiVersion and kind; a
// typed object's comes from the scheme, by Go type, and is cached.
func (t *Tracker) kindOf(obj client.Object, f form) (kind, error) {
	if f != formTyped {
		return t.namedKind(obj)
	}
	typ := reflect.TypeOf(obj)
	if first := t.first.Load(); first != nil && first.typ == typ {
		return first.kind, nil
	}
	if v, ok := t.typedKinds.Load(typ); ok {
		return v.(*typedKind).kind, nil
	}
	gk, err := t.schemeKind(obj)
	if err != nil {
		return kind{}, err
	}
	tk := &typedKind{typ: typ, kind: kind{gk: gk, id: t.kindID(gk)}}
	t.typedKinds.Store(typ, tk)
	// The first type stays in front: rewriting it as kinds alternate would
	// make every check write a line that all checks read.
	t.first.CompareAndSwap(nil, tk)
	return tk.kind, nil
}

// namedKind returns the kind an unstructured or metadata-only object names
// in its apiVersion and kind. The last pair seen is kept with its answer, so
// that a tracker reading one kind in these forms compares two short strings
// rather than parse the apiVersion and look the kind up on every check.
func (t *Tracker) namedKind(obj client.Object) (kind, error) {
	var apiVersion, kindName string
	switch o := obj.(type) {
	case *metav1.PartialObjectMetadata:
		apiVersion, kindName = o.APIVersion, o.Kind
	case *unstructured.Unstructured:
		// What GetAPIVersion and GetKind read, without their walk.
		apiVersion, _ = o.Object["apiVersion"].(string)
		kindName, _ = o.Object["kind"].(string)
	default:
		gvk := obj.GetObjectKind().GroupVersionKind()
		apiVersion, kindName = gvk.GroupVersion().String(), gvk.Kind
	}
	if last := t.lastNamed.Load(); last != nil && last.apiVersion == apiVersion && last.kindName == kindName {
		return last.kind, nil
	}
	gk := schema.FromAPIVersionAndKind(apiVersion, kindName).GroupKind()
	if gk.Kind == "" {
		return kind{}, fmt.Errorf("%T without apiVersion and kind: %w", obj, ErrUnknownKind)
	}
	k := kind{gk: gk, id: t.kindID(gk)}
	t.lastNamed.Store(&namedKind{apiVersion: apiVersion, kindName: kindName, kind: k})
	return k, nil
}

// schemeKind tells the kind of a typed object: from Options.Scheme when it
// was set; otherwise from the schemes of the clients the tracker was given,
// client-go's scheme, and the object's TypeMeta, in that order (see
// Options.Scheme). A type a scheme registers as several kinds is refused:
// which one an object is would depend on its TypeMeta, which typed clients
// leave empty.
func (t *Tracker) schemeKind(obj client.Object) (schema.GroupKind, error) {
	if t.scheme != nil {
		gk, _, err := kindInScheme(t.scheme, obj)
		return gk, err
	}
	var schemes []*runtime.Scheme
	if given := t.given.Load(); given != nil {
		schemes = *given
	}
	for _, s := range append(schemes[:len(schemes):len(schemes)], clientgoscheme.Scheme) {
		if gk, known, err := kindInScheme(s, obj); known {
			return gk, err
		}
	}
	if gvk := obj.GetObjectKind().GroupVersionKind(); gvk.Kind != "" && gvk.Version != "" {
		return gvk.GroupKind(), nil
	}
	return schema.GroupKind{}, fmt.Errorf("%T is in no scheme the tracker has (client-go's, and the %d of clients it was given) and its TypeMeta is empty: "+
		"set Options.Scheme (mgr.GetScheme()), or give the tracker the manager's client (NewReader(mgr.GetClient(), tracker)): %w",
		obj, len(schemes), ErrUnknownKind)
}

// kindInScheme returns the kind s has for obj's Go type; known is false
// when s does not know the type at all.
func kindInScheme(s *runtime.Scheme, obj client.Object) (gk schema.GroupKind, known bool, err error) {
	gvks, unversioned, err := s.ObjectKinds(obj)
	if err != nil {
		return schema.GroupKind{}, false, fmt.Errorf("%T: %w: %w", obj, ErrUnknownKind, err)
	}
	if unversioned {
		return schema.GroupKind{}, true, fmt.Errorf("%T is unversioned: %w", obj, ErrUnknownKind)
	}
	gk = gvks[0].GroupKind()
	for _, gvk := range gvks[1:] {
		if gvk.GroupKind() != gk {
			return schema.GroupKind{}, true, fmt.Errorf("%T is registered as several kinds %v: %w", obj, gvks, ErrUnknownKind)
		}
	}
	return gk, true, nil
}

// learnKind names the Go type of obj, a typed object that no scheme of the
// tracker knows, by the kind obj's TypeMeta carries, as a controller-runtime
// cache sets it on the objects it returns; it is an error when obj carries
// none.
func (t *Tracker) learnKind(obj client.Object) error {
	_, err := t.kindOf(obj, formTyped)
	return err
}

// takeScheme gives the tracker the scheme of from (a client.Client, or a
// reader built on one, such as a manager's GetAPIReader()), when it has one
// and Options.Scheme was not set. A scheme given twice is kept once.
func (t *Tracker) takeScheme(from any) {
	if t == nil || t.scheme != nil {
		return
	}
	t.addScheme(schemes.Of(from))
}

func (t *Tracker) addScheme(s *runtime.Scheme) {
	if s == nil || t.scheme != nil {
		return
	}
	for {
		old := t.given.Load()
		var cur []*runtime.Scheme
		if old != nil {
			cur = *old
		}
		if slices.Contains(cur, s) {
			return
		}
		next := append(slices.Clip(cur), s)
		if t.given.CompareAndSwap(old, &next) {
			return
		}
	}
}

func init() {
	schemes.Register(func(recipient any, s *runtime.Scheme) {
		if t, ok := recipient.(*Tracker); ok {
			t.addScheme(s)
		}
	})
}

// kindID returns the number of gk, numbering it if it is new.
func (t *Tracker) kindID(gk schema.GroupKind) kindID {
	t.kindMu.RLock()
	id, ok := t.kindIDs[gk]
	t.kindMu.RUnlock()
	if ok {
		return id
	}
	t.kindMu.Lock()
	defer t.kindMu.Unlock()
	if id, ok := t.kindIDs[gk]; ok {
		return id
	}
	id = kindID(len(t.kindIDs) + 1)
	t.kindIDs[gk] = id
	return id
}

// validRV returns a *ResourceVersionError unless rv, of obj under key, is
// well-formed.
func (t *Tracker) validRV(obj client.Object, key objectKey, rv string) error {
	if wellFormed(rv) {
		return nil
	}
	// Comparing rv with itself is how CompareResourceVersion validates; its
	// error is the cause the caller may look for.
	_, err := resourceversion.CompareResourceVersion(rv, rv)
	if err == nil { // unreachable while the two agree, as FuzzCheck proves
		err = fmt.Errorf("not a positive decimal integer")
	}
	k, _ := t.kindOf(obj, formOf(obj)) // cached by the keyOf before
	return &ResourceVersionError{Kind: k.gk, Key: key.ObjectKey, ResourceVersion: rv, Err: err}
}

// wellFormed reports whether rv is a positive decimal integer without
// leading zeros: the form the API server emits and CompareResourceVersion
// orders. It is that function's test, inlined for the check path.
func wellFormed(rv string) bool {
	if rv == "" || rv[0] == '0' {
		return false
	}
	for i := 0; i < len(rv); i++ {
		if rv[i] < '0' || rv[i] > '9' {
			return false
		}
	}
	return true
}

// sameUID treats an empty UID as unknown, matching any: objects built by
// hand or by some fakes carry none, and a real API server always sets one.
func sameUID(a, b types.UID) bool {
	return a == "" || b == "" || a == b
}
