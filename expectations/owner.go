package expectations

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/racesafe/racesafe/internal/objcopy"
)

// OwnerCache is what an OwnerTracker reads: controller-runtime's cache.Cache
// (a manager's GetCache()) satisfies it. Get is used only to confirm
// deletions.
type OwnerCache interface {
	client.Reader
	GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error)
}

// OwnerOptions configure an OwnerTracker. For and Cache are required.
type OwnerOptions struct {
	// Name labels the tracker's metrics; "default" when empty.
	Name string
	// For is an object of the owner kind, as given to the builder's For.
	// One tracker serves one owner kind.
	For client.Object
	// Cache is the cache the controller lists owned objects from.
	Cache OwnerCache
	// Scheme resolves the kinds of objects whose TypeMeta is empty;
	// client-go's kubernetes scheme when nil.
	Scheme *runtime.Scheme
	// TTL bounds how long an owner waits for an owned kind's cache;
	// DefaultTTL when zero or negative.
	TTL time.Duration
	// LiveReadOnExpiry makes Check return an *OwnerExpiredError, once, for an
	// owner whose wait outlived the TTL, instead of nil: the caller then
	// takes the reconcile's decision from the API reader.
	LiveReadOnExpiry bool
	// Clock measures TTLs and catch-up time; clock.RealClock{} when nil.
	Clock clock.PassiveClock
}

// OwnerTracker remembers, per owner, the newest resourceVersion this
// controller wrote for each owned kind (and the owned objects it deleted),
// and tells the owner's reconcile whether the cache of every such kind has
// caught up: one check that covers the Lists of owned objects the reconcile
// decides from. It is safe for concurrent use.
type OwnerTracker struct {
	name         string
	ttl          time.Duration
	clock        clock.PassiveClock
	scheme       *runtime.Scheme
	cache        OwnerCache
	liveOnExpiry bool
	ownerGK      schema.GroupKind
	// owner is an empty object of the owner kind, for reads of owners.
	owner      client.Object
	ownerLabel string

	nextSweep atomic.Int64

	kindsMu sync.Mutex
	kinds   map[schema.GroupKind]*ownerKind

	mu     sync.RWMutex
	owners map[client.ObjectKey]*ownerEntry
	queues map[*ownerQueue]struct{}
}

// ownerEntry holds one owner's records.
type ownerEntry struct {
	uid   types.UID
	waits map[ownedKey]*ownedWait
}

// ownedKey is what one record covers: an owned kind in one namespace, the
// unit whose cache version can be read (see ownerKind.version).
type ownedKey struct {
	gk        schema.GroupKind
	namespace string
}

type ownedWait struct {
	kind *ownerKind
	// rv is the highest resourceVersion written, well-formed; "" when only
	// deletions are awaited.
	rv string
	// gone holds the owned objects deleted and not yet seen gone, by UID.
	gone map[types.UID]*ownedDeletion
	// at is when the record was last raised: TTL and catch-up count from it.
	at time.Time
	// gen counts raises, so that a Check can tell whether a record changed
	// while it read the cache without holding the lock.
	gen uint64
	// woken: the wake source has enqueued the owner for this record.
	woken bool
}

type ownedDeletion struct {
	name string
	// seen: the informer delivered the deletion (or a deletionTimestamp).
	seen bool
}

// NewOwnerTracker returns an OwnerTracker. It starts no goroutine. The owned
// kinds' informers are fetched from the cache, and an event handler added to
// them, at the first record of each kind.
func NewOwnerTracker(opts OwnerOptions) (*OwnerTracker, error) {
	if objcopy.IsNil(opts.For) {
		return nil, fmt.Errorf("OwnerOptions.For is nil: %w", ErrOwnerOptions)
	}
	if opts.Cache == nil || objcopy.IsNil(opts.Cache) {
		return nil, fmt.Errorf("OwnerOptions.Cache is nil: %w", ErrOwnerOptions)
	}
	if opts.Name == "" {
		opts.Name = "default"
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Scheme == nil {
		opts.Scheme = scheme.Scheme
	}
	t := &OwnerTracker{
		name:         opts.Name,
		ttl:          opts.TTL,
		clock:        opts.Clock,
		scheme:       opts.Scheme,
		cache:        opts.Cache,
		liveOnExpiry: opts.LiveReadOnExpiry,
		kinds:        make(map[schema.GroupKind]*ownerKind),
		owners:       make(map[client.ObjectKey]*ownerEntry),
		queues:       make(map[*ownerQueue]struct{}),
	}
	gvk, err := t.gvkOf(opts.For)
	if err != nil {
		return nil, fmt.Errorf("OwnerOptions.For: %w: %w", ErrOwnerOptions, err)
	}
	t.ownerGK = gvk.GroupKind()
	if t.owner, err = objcopy.EmptyLike(opts.For); err != nil {
		return nil, fmt.Errorf("OwnerOptions.For: %w: %w", ErrOwnerOptions, err)
	}
	t.ownerLabel = t.ownerGK.String()
	t.nextSweep.Store(addSaturated(t.clock.Now().UnixNano(), t.ttl))
	return t, nil
}

// String returns the tracker's name, as used in its metrics.
func (t *OwnerTracker) String() string { return t.name }

// Wrote records that this controller created, updated or patched owned on
// behalf of owner. Pass owned as the API server returned it: only the answer
// carries the new resourceVersion. The record keeps, per owner, owned kind
// and namespace, the highest resourceVersion written; a lower one (a late
// answer) never lowers it. A record for another UID of the owner's key
// belongs to an earlier incarnation and is replaced.
//
// owned's resourceVersion must be well-formed (*OwnerResourceVersionError
// otherwise); its kind is taken from its TypeMeta or, when empty, from the
// scheme. ctx bounds the informer lookup of the first record of a kind.
func (t *OwnerTracker) Wrote(ctx context.Context, owner, owned client.Object) error {
	key, uid, err := t.ownerOf(owner)
	if err != nil {
		return err
	}
	return t.record(ctx, key, uid, owned, false)
}

// Deleted records that this controller deleted owned on behalf of owner.
// The owner's Check is stale until the cache no longer shows owned's
// incarnation (gone, replaced by another UID, or marked for deletion: a
// List then shows it terminating, which is what the Delete did).
// controller-runtime's Delete returns no resourceVersion, so none is needed:
// owned needs a name and, to tell incarnations apart, a UID.
func (t *OwnerTracker) Deleted(ctx context.Context, owner, owned client.Object) error {
	key, uid, err := t.ownerOf(owner)
	if err != nil {
		return err
	}
	return t.record(ctx, key, uid, owned, true)
}

// WroteOwned is Wrote with the owner found from owned's controller reference,
// which must point to the tracker's owner kind (ErrNotOwned otherwise). The
// owner is taken to live in owned's namespace, as owner references allow;
// record writes under a cluster-scoped owner with Wrote.
func (t *OwnerTracker) WroteOwned(ctx context.Context, owned client.Object) error {
	key, uid, err := t.controllerOf(owned)
	if err != nil {
		return err
	}
	return t.record(ctx, key, uid, owned, false)
}

// DeletedOwned is Deleted with the owner found as in WroteOwned.
func (t *OwnerTracker) DeletedOwned(ctx context.Context, owned client.Object) error {
	key, uid, err := t.controllerOf(owned)
	if err != nil {
		return err
	}
	return t.record(ctx, key, uid, owned, true)
}

func (t *OwnerTracker) ownerOf(owner client.Object) (client.ObjectKey, types.UID, error) {
	key, err := nameOf(owner)
	if err != nil {
		return key, "", fmt.Errorf("owner: %w", err)
	}
	gvk, err := t.gvkOf(owner)
	if err != nil {
		return key, "", fmt.Errorf("owner %s: %w", key, err)
	}
	if gvk.GroupKind() != t.ownerGK {
		return key, "", fmt.Errorf("owner %s is a %s, the tracker's owners are %s: %w", key, gvk.GroupKind(), t.ownerGK, ErrOwnerKind)
	}
	return key, owner.GetUID(), nil
}

func (t *OwnerTracker) controllerOf(owned client.Object) (client.ObjectKey, types.UID, error) {
	okey, err := nameOf(owned)
	if err != nil {
		return okey, "", fmt.Errorf("owned: %w", err)
	}
	ref := metav1.GetControllerOfNoCopy(owned)
	if ref == nil {
		return okey, "", fmt.Errorf("%s has no controller reference: %w", okey, ErrNotOwned)
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || (schema.GroupKind{Group: gv.Group, Kind: ref.Kind}) != t.ownerGK {
		return okey, "", fmt.Errorf("%s is controlled by %s %s, not a %s: %w", okey, ref.APIVersion, ref.Kind, t.ownerGK, ErrNotOwned)
	}
	return client.ObjectKey{Namespace: owned.GetNamespace(), Name: ref.Name}, ref.UID, nil
}

func (t *OwnerTracker) gvkOf(obj client.Object) (schema.GroupVersionKind, error) {
	if gvk := obj.GetObjectKind().GroupVersionKind(); gvk.Kind != "" && gvk.Version != "" {
		return gvk, nil
	}
	return apiutil.GVKForObject(obj, t.scheme)
}

func (t *OwnerTracker) record(ctx context.Context, owner client.ObjectKey, ownerUID types.UID, owned client.Object, deletion bool) error {
	okey, err := nameOf(owned)
	if err != nil {
		return fmt.Errorf("owned object of %s: %w", owner, err)
	}
	gvk, err := t.gvkOf(owned)
	if err != nil {
		return fmt.Errorf("owned object %s of %s: %w", okey, owner, err)
	}
	rv := owned.GetResourceVersion()
	if !deletion {
		if _, err := resourceversion.CompareResourceVersion(rv, rv); err != nil {
			return &OwnerResourceVersionError{Owner: owner, Kind: gvk.GroupKind(), ResourceVersion: rv, Err: err}
		}
	}
	kind, err := t.kindFor(ctx, gvk, owned)
	if err != nil {
		return fmt.Errorf("owned kind %s of %s: %w", gvk.GroupKind(), owner, err)
	}

	now := t.clock.Now()
	ok := ownedKey{gk: kind.gk, namespace: okey.Namespace}
	t.mu.Lock()
	e := t.owners[owner]
	if e != nil && !sameUID(e.uid, ownerUID) {
		// A new incarnation of the owner: what its predecessor waited for
		// is no longer anybody's decision.
		t.dropEntryLocked(owner, e)
		e = nil
	}
	if e == nil {
		e = &ownerEntry{uid: ownerUID, waits: make(map[ownedKey]*ownedWait, 1)}
		t.owners[owner] = e
	} else if e.uid == "" {
		e.uid = ownerUID
	}
	w := e.waits[ok]
	if w == nil {
		w = &ownedWait{kind: kind}
		e.waits[ok] = w
		kind.waiting.Add(1)
	}
	raised := false
	if deletion {
		if w.gone == nil {
			w.gone = make(map[types.UID]*ownedDeletion, 1)
		}
		if _, found := w.gone[owned.GetUID()]; !found {
			w.gone[owned.GetUID()] = &ownedDeletion{name: okey.Name}
			raised = true
		}
	} else if cmp, _ := resourceversion.CompareResourceVersion(rv, w.rv); w.rv == "" || cmp > 0 {
		w.rv = rv
		raised = true
	}
	if raised {
		w.at, w.woken = now, false
		w.gen++
	}
	t.mu.Unlock()
	t.maybeSweep(now)
	return nil
}

// Check tells owner's reconcile whether it may decide from the cache: for
// every owned kind and namespace recorded for owner, the cache must be at
// least at the highest resourceVersion written, and must no longer show the
// owned objects deleted. It never blocks and returns
//
//   - nil when nothing is recorded for owner's key (no allocation), or when
//     every record is satisfied; satisfied records are dropped;
//   - nil, dropping the records, when they belong to another UID of the
//     owner's key (an earlier incarnation);
//   - *OwnerStaleError (errors.Is(err, ErrStale)) when a kind's cache is
//     behind; the caller should requeue (requeue.OnStale) and will be woken
//     by Source when the cache catches up;
//   - *OwnerResourceVersionError when the cache's version cannot be ordered;
//     never nil in that case;
//   - nil for a record older than the TTL, dropped and counted expired; or,
//     with LiveReadOnExpiry, an *OwnerExpiredError once.
func (t *OwnerTracker) Check(ctx context.Context, owner client.Object) error {
	key, err := nameOf(owner)
	if err != nil {
		return fmt.Errorf("owner: %w", err)
	}
	t.mu.RLock()
	e := t.owners[key]
	t.mu.RUnlock()
	if e == nil {
		return nil
	}
	return t.check(ctx, key, owner.GetUID())
}

// pendingCheck is a record as Check read it, judged without the lock.
type pendingCheck struct {
	ok    ownedKey
	w     *ownedWait
	gen   uint64
	rv    string
	at    time.Time
	gone  map[types.UID]string // unseen deletions: UID to name
	state ownedState
	err   error
	seen  string
	// deleted names the deleted object the cache still shows, when that is
	// why the record is stale.
	deleted string
}

type ownedState uint8

const (
	ownedStale ownedState = iota
	ownedSatisfied
	ownedExpired
)

func (t *OwnerTracker) check(ctx context.Context, key client.ObjectKey, uid types.UID) error {
	now := t.clock.Now()
	t.mu.Lock()
	e := t.owners[key]
	if e == nil {
		t.mu.Unlock()
		return nil
	}
	if !sameUID(e.uid, uid) {
		t.dropEntryLocked(key, e)
		t.mu.Unlock()
		return nil
	}
	checks := make([]pendingCheck, 0, len(e.waits))
	for ok, w := range e.waits {
		pc := pendingCheck{ok: ok, w: w, gen: w.gen, rv: w.rv, at: w.at}
		for u, d := range w.gone {
			if !d.seen {
				if pc.gone == nil {
					pc.gone = make(map[types.UID]string, len(w.gone))
				}
				pc.gone[u] = d.name
			}
		}
		checks = append(checks, pc)
	}
	t.mu.Unlock()

	// Judge outside the lock: confirming a deletion reads the cache.
	for i := range checks {
		pc := &checks[i]
		if now.Sub(pc.at) >= t.ttl {
			pc.state = ownedExpired
			pc.seen = pc.w.kind.version(pc.ok.namespace)
			continue
		}
		pc.state, pc.seen, pc.err = t.judgeOwned(ctx, key, pc)
	}

	var firstErr error
	t.mu.Lock()
	e = t.owners[key]
	for i := range checks {
		pc := &checks[i]
		switch pc.state {
		case ownedStale:
			if firstErr == nil {
				firstErr = pc.err
				if firstErr == nil {
					firstErr = pc.staleError(key)
				}
			}
			if pc.err == nil {
				pc.w.kind.m.skips.Inc()
			}
			continue
		}
		// Drop only what was judged: a write recorded meanwhile raised gen
		// and must be judged by the next Check.
		if e == nil || e.waits[pc.ok] != pc.w || pc.w.gen != pc.gen {
			continue
		}
		delete(e.waits, pc.ok)
		pc.w.kind.waiting.Add(-1)
		if pc.state == ownedExpired {
			pc.w.kind.m.expired.Inc()
			if t.liveOnExpiry && firstErr == nil {
				firstErr = &OwnerExpiredError{Owner: key, Kind: pc.ok.gk, Namespace: pc.ok.namespace,
					Want: pc.rv, Seen: pc.seen, Age: now.Sub(pc.at)}
			}
			continue
		}
		pc.w.kind.m.catchUp.Observe(now.Sub(pc.at).Seconds())
	}
	if e != nil && len(e.waits) == 0 {
		delete(t.owners, key)
	}
	t.mu.Unlock()
	return firstErr
}

func (pc *pendingCheck) staleError(owner client.ObjectKey) error {
	return &OwnerStaleError{Owner: owner, Kind: pc.ok.gk, Namespace: pc.ok.namespace, Want: pc.rv, Seen: pc.seen, Deleted: pc.deleted}
}

// judgeOwned decides one record: satisfied, stale, or stale with the error
// of a cache version that cannot be ordered.
func (t *OwnerTracker) judgeOwned(ctx context.Context, owner client.ObjectKey, pc *pendingCheck) (ownedState, string, error) {
	k := pc.w.kind
	seen := k.version(pc.ok.namespace)
	if pc.rv != "" {
		if seen == "" {
			return ownedStale, seen, nil
		}
		cmp, err := resourceversion.CompareResourceVersion(seen, pc.rv)
		if err != nil {
			return ownedStale, seen, &OwnerResourceVersionError{Owner: owner, Kind: pc.ok.gk, ResourceVersion: seen, Cache: true, Err: err}
		}
		if cmp < 0 {
			return ownedStale, seen, nil
		}
	}
	for uid, name := range pc.gone {
		shown, err := k.shows(ctx, t.cache, client.ObjectKey{Namespace: pc.ok.namespace, Name: name}, uid)
		if err != nil {
			return ownedStale, seen, fmt.Errorf("confirm deletion of %s %s/%s: %w", pc.ok.gk, pc.ok.namespace, name, err)
		}
		if shown {
			pc.deleted = name
			return ownedStale, seen, nil
		}
	}
	return ownedSatisfied, seen, nil
}

// Forget drops owner's records without counting them, when owner's UID is
// the one recorded or either is empty: call it when the owner is gone (a
// NotFound at the reconcile's entry; an object with only the key will do),
// so that its records do not wait for the TTL sweep.
func (t *OwnerTracker) Forget(owner client.Object) {
	key, err := nameOf(owner)
	if err != nil {
		return
	}
	t.mu.Lock()
	if e := t.owners[key]; e != nil && sameUID(e.uid, owner.GetUID()) {
		t.dropEntryLocked(key, e)
	}
	t.mu.Unlock()
}

// Pending returns the number of records (owner, owned kind, namespace) held.
func (t *OwnerTracker) Pending() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	n := 0
	for _, e := range t.owners {
		n += len(e.waits)
	}
	return n
}

func (t *OwnerTracker) dropEntryLocked(key client.ObjectKey, e *ownerEntry) {
	for _, w := range e.waits {
		w.kind.waiting.Add(-1)
	}
	delete(t.owners, key)
}

// maybeSweep drops records older than the TTL at most once per TTL, on the
// write path, so that owners never checked again do not hold memory.
func (t *OwnerTracker) maybeSweep(now time.Time) {
	next := t.nextSweep.Load()
	if now.UnixNano() < next || !t.nextSweep.CompareAndSwap(next, addSaturated(now.UnixNano(), t.ttl)) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for key, e := range t.owners {
		for ok, w := range e.waits {
			if now.Sub(w.at) >= t.ttl {
				delete(e.waits, ok)
				w.kind.waiting.Add(-1)
				w.kind.m.expired.Inc()
			}
		}
		if len(e.waits) == 0 {
			delete(t.owners, key)
		}
	}
}

// nameOf returns obj's namespace and name, refusing a nil object and one
// without a name.
func nameOf(obj client.Object) (client.ObjectKey, error) {
	if objcopy.IsNil(obj) {
		return client.ObjectKey{}, fmt.Errorf("%T: %w", obj, ErrNilObject)
	}
	key := client.ObjectKey{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if key.Name == "" {
		return key, fmt.Errorf("%T in namespace %q: %w", obj, key.Namespace, ErrNoName)
	}
	return key, nil
}

// ownerQueue is a controller's queue that Source feeds.
type ownerQueue struct {
	q workqueue.TypedRateLimitingInterface[reconcile.Request]
}
