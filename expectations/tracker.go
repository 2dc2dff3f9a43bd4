package expectations

import (
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
}

// Tracker remembers, per object key, the newest resourceVersion this
// controller wrote (or the incarnation it deleted), and tells whether a cached
// read has caught up with it. It is safe for concurrent use. A Tracker tracks
// one kind of object, since its keys are namespace/name: use one per kind.
type Tracker struct {
	name  string
	ttl   time.Duration
	clock clock.PassiveClock
	m     trackerMetrics
	// nextSweep is the UnixNano after which the next write may sweep expired
	// entries. A CompareAndSwap elects the one writer that pays for it.
	nextSweep atomic.Int64
	shards    [shardCount]shard
}

// shardCount spreads keys so that concurrent checks of different objects
// rarely touch the same lock. A power of two, so a mask picks the shard.
const shardCount = 64

type shardState struct {
	mu sync.RWMutex
	m  map[client.ObjectKey]expectation
}

// shard pads shardState to its own cache lines: RLock writes the mutex, and
// neighbouring shards on one line would make readers of different keys
// contend anyway.
type shard struct {
	shardState
	_ [128 - unsafe.Sizeof(shardState{})%128]byte
}

// expectation is what a cached object must show to be as new as our write.
type expectation struct {
	uid types.UID
	// rv is well-formed: it was checked before it was stored.
	rv string
	// deletion: the incarnation uid must be gone from the cache.
	deletion bool
	// at is when the expectation was last raised; TTL and catch-up time
	// count from it.
	at time.Time
}

// New returns a Tracker. It starts no goroutine: expired entries are dropped
// by the calls that meet them and by an occasional sweep inside ExpectWrite
// and ExpectDeletion.
func New(opts Options) *Tracker {
	if opts.Name == "" {
		opts.Name = "default"
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	t := &Tracker{
		name:  opts.Name,
		ttl:   opts.TTL,
		clock: opts.Clock,
		m:     newTrackerMetrics(opts.Name),
	}
	for i := range t.shards {
		t.shards[i].m = make(map[client.ObjectKey]expectation)
	}
	t.nextSweep.Store(t.clock.Now().Add(t.ttl).UnixNano())
	return t
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
// being deleted does not bring it back.
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
	key, err := keyOf(obj)
	if err != nil {
		return err
	}
	rv := obj.GetResourceVersion()
	if err := validRV(key, rv); err != nil {
		return err
	}
	now := t.clock.Now()
	next := expectation{uid: obj.GetUID(), rv: rv, deletion: deletion, at: now}

	s := t.shardFor(key)
	s.mu.Lock()
	prev, found := s.m[key]
	if found {
		next = merge(prev, next)
	}
	s.m[key] = next
	s.mu.Unlock()
	if !found {
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
		merged.rv, merged.at = next.rv, next.at
	}
	if next.deletion && !prev.deletion {
		merged.deletion, merged.at = true, next.at
	}
	return merged
}

// Check tells whether obj, read from the cache, is at least as new as what
// this controller wrote:
//
//   - nil when no expectation is recorded for its key; the resourceVersion is
//     then not looked at;
//   - nil when obj satisfies the expectation, which is dropped at once;
//   - *StaleError (errors.Is(err, ErrStale)) when obj is older than the
//     recorded write, or is still the incarnation expected deleted, or an
//     earlier incarnation (another UID with a lower resourceVersion);
//   - nil for another UID with a higher resourceVersion: the object was
//     replaced after our write, the expectation belonged to its predecessor
//     and is dropped;
//   - nil when the expectation outlived the TTL; it is dropped and counted as
//     expired;
//   - *ResourceVersionError when obj's resourceVersion cannot be ordered; the
//     expectation is kept.
//
// On a *StaleError the caller must not act on obj: requeue and read again.
func (t *Tracker) Check(obj client.Object) error {
	key, err := keyOf(obj)
	if err != nil {
		return err
	}
	s := t.shardFor(key)
	// Misses and stale reads are decided under the read lock, so that checks
	// of many objects, and repeated stale checks of one, proceed in parallel.
	// Only dropping an expectation takes the write lock.
	s.mu.RLock()
	e, found := s.m[key]
	s.mu.RUnlock()
	if !found {
		return nil
	}
	uid, seen := obj.GetUID(), obj.GetResourceVersion()
	now := t.clock.Now()
	v, err := t.judge(e, now, uid, seen)
	if v == verdictKeep {
		return t.refuse(key, e, seen, err)
	}

	s.mu.Lock()
	cur, found := s.m[key]
	if found && cur != e {
		// A write raised the expectation since the read lock: judge again,
		// or a read older than that write would pass as fresh.
		e = cur
		v, err = t.judge(e, now, uid, seen)
	}
	if !found || v == verdictKeep {
		s.mu.Unlock()
		if !found { // dropped by another check meanwhile
			return nil
		}
		return t.refuse(key, e, seen, err)
	}
	delete(s.m, key)
	s.mu.Unlock()
	t.m.pending.Dec()
	if v == verdictExpired {
		t.m.expired.Inc()
		return nil
	}
	t.m.satisfied.Inc()
	t.m.catchUp.Observe(now.Sub(e.at).Seconds())
	return nil
}

type verdict uint8

const (
	verdictKeep      verdict = iota // stale or malformed: the expectation stays
	verdictSatisfied                // the cache has caught up
	verdictExpired                  // waited longer than the TTL
)

// judge applies the rules of Check to e at time now. With verdictKeep, a nil
// error means stale and a non-nil one a malformed resourceVersion.
func (t *Tracker) judge(e expectation, now time.Time, uid types.UID, seen string) (verdict, error) {
	if now.Sub(e.at) >= t.ttl {
		return verdictExpired, nil
	}
	ok, err := e.satisfiedBy(uid, seen)
	switch {
	case err != nil:
		return verdictKeep, err
	case ok:
		return verdictSatisfied, nil
	}
	return verdictKeep, nil
}

// refuse returns the error of a check that keeps its expectation.
func (t *Tracker) refuse(key client.ObjectKey, e expectation, seen string, rvErr error) error {
	if rvErr != nil {
		return &ResourceVersionError{Key: key, ResourceVersion: seen, Err: rvErr}
	}
	t.m.stale.Inc()
	return &StaleError{Key: key, Want: e.rv, Seen: seen, Deletion: e.deletion}
}

// satisfiedBy reports whether a cached object with uid at resourceVersion
// seen is as new as e. It is the single rule behind Check and Satisfied.
func (e expectation) satisfiedBy(uid types.UID, seen string) (bool, error) {
	cmp, err := resourceversion.CompareResourceVersion(seen, e.rv)
	if err != nil {
		return false, err
	}
	if sameUID(e.uid, uid) {
		return !e.deletion && cmp >= 0, nil
	}
	// Another incarnation. A higher resourceVersion is a successor, created
	// after our write or deletion; a lower one is a predecessor the cache has
	// not yet seen deleted, which is as stale as an old copy of ours.
	return cmp > 0, nil
}

// CheckAbsent tells whether a NotFound for key, read from the cache, may be
// acted on. It always may: a recorded deletion is satisfied, and a recorded
// write is dropped, because the object was deleted after it. Waiting for a
// write to an object that no longer exists would stall until the TTL, and
// liveness wins. The one stale NotFound this lets through, right after our
// own Create, is caught by the API server: a second Create fails with
// AlreadyExists.
//
// It returns an error only for a key without a name.
func (t *Tracker) CheckAbsent(key client.ObjectKey) error {
	if key.Name == "" {
		return fmt.Errorf("check absence of %q: %w", key.String(), ErrNoName)
	}
	s := t.shardFor(key)
	s.mu.RLock()
	_, found := s.m[key]
	s.mu.RUnlock()
	if !found {
		return nil
	}
	s.mu.Lock()
	e, found := s.m[key]
	if found {
		delete(s.m, key)
	}
	s.mu.Unlock()
	if !found {
		return nil
	}
	t.m.pending.Dec()
	age := t.clock.Since(e.at)
	switch {
	case age >= t.ttl:
		t.m.expired.Inc()
	case e.deletion:
		t.m.satisfied.Inc()
		t.m.catchUp.Observe(age.Seconds())
	}
	return nil
}

// Satisfied reports whether obj satisfies an expectation recorded for its
// key, by the rules of Check, without dropping it and without looking at the
// clock. It is false when nothing is recorded, when obj is stale or malformed.
// It is meant for event filters, which must not change state: the reconcile
// that follows calls Check.
func (t *Tracker) Satisfied(obj client.Object) bool {
	key, err := keyOf(obj)
	if err != nil {
		return false
	}
	s := t.shardFor(key)
	s.mu.RLock()
	e, found := s.m[key]
	s.mu.RUnlock()
	if !found {
		return false
	}
	ok, err := e.satisfiedBy(obj.GetUID(), obj.GetResourceVersion())
	return err == nil && ok
}

// has reports whether an expectation is recorded for key.
func (t *Tracker) has(key client.ObjectKey) bool {
	s := t.shardFor(key)
	s.mu.RLock()
	_, found := s.m[key]
	s.mu.RUnlock()
	return found
}

// Forget drops the expectation for key, if any, without counting it as
// satisfied or expired. Call it when the controller stops caring about the
// object, e.g. after it removed its own finalizer for good.
func (t *Tracker) Forget(key client.ObjectKey) {
	s := t.shardFor(key)
	s.mu.Lock()
	_, found := s.m[key]
	delete(s.m, key)
	s.mu.Unlock()
	if found {
		t.m.pending.Dec()
	}
}

// Pending returns the number of expectations recorded. Expired ones count
// until a check or a sweep drops them, as in the pending gauge.
func (t *Tracker) Pending() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.RLock()
		n += len(s.m)
		s.mu.RUnlock()
	}
	return n
}

// maybeSweep drops expired entries at most once per TTL, on a write path. An
// expectation that is never checked again (its object was never read, or its
// controller stopped) would otherwise stay forever; with the sweep, memory is
// bounded by the writes of the last two TTLs.
func (t *Tracker) maybeSweep(now time.Time) {
	next := t.nextSweep.Load()
	if now.UnixNano() < next || !t.nextSweep.CompareAndSwap(next, now.Add(t.ttl).UnixNano()) {
		return
	}
	dropped := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for key, e := range s.m {
			if now.Sub(e.at) >= t.ttl {
				delete(s.m, key)
				dropped++
			}
		}
		s.mu.Unlock()
	}
	if dropped > 0 {
		t.m.pending.Sub(float64(dropped))
		t.m.expired.Add(float64(dropped))
	}
}

func (t *Tracker) shardFor(key client.ObjectKey) *shard {
	// FNV-1a over namespace "/" name, inline: hash/fnv would allocate a
	// hasher and a []byte copy of the strings on every check.
	const offset32, prime32 = 2166136261, 16777619
	h := uint32(offset32)
	for i := 0; i < len(key.Namespace); i++ {
		h = (h ^ uint32(key.Namespace[i])) * prime32
	}
	h = (h ^ '/') * prime32
	for i := 0; i < len(key.Name); i++ {
		h = (h ^ uint32(key.Name[i])) * prime32
	}
	return &t.shards[h&(shardCount-1)]
}

// keyOf returns obj's key, or ErrNilObject or ErrNoName.
func keyOf(obj client.Object) (client.ObjectKey, error) {
	if obj == nil {
		return client.ObjectKey{}, ErrNilObject
	}
	// A typed nil pointer is a non-nil interface whose accessor methods
	// panic: GetName on (*corev1.ConfigMap)(nil) dereferences nil.
	if v := reflect.ValueOf(obj); v.Kind() == reflect.Pointer && v.IsNil() {
		return client.ObjectKey{}, fmt.Errorf("%T: %w", obj, ErrNilObject)
	}
	key := client.ObjectKey{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if key.Name == "" {
		return key, fmt.Errorf("%T in namespace %q: %w", obj, key.Namespace, ErrNoName)
	}
	return key, nil
}

func validRV(key client.ObjectKey, rv string) error {
	// Comparing rv with itself is how CompareResourceVersion validates.
	if _, err := resourceversion.CompareResourceVersion(rv, rv); err != nil {
		return &ResourceVersionError{Key: key, ResourceVersion: rv, Err: err}
	}
	return nil
}

// sameUID treats an empty UID as unknown, matching any: objects built by
// hand or by some fakes carry none, and a real API server always sets one.
func sameUID(a, b types.UID) bool {
	return a == "" || b == "" || a == b
}
