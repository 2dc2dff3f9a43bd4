package expectations

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
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
	// Owns lists the owned kinds in the forms the controller reads them
	// (as given to the builder's Owns: &corev1.Secret{}, or a
	// *metav1.PartialObjectMetadata with its kind set for OnlyMetadata).
	// When set, a record of an owned kind waits until every declared form
	// of it has caught up, whatever form was written, and the tracker reads
	// only these informers, never starting one of its own; writes of a kind
	// not declared are not tracked. When nil, a kind is read in the form of
	// its first record, whose informer is started if the cache has none:
	// a controller that writes typed objects and Lists them metadata-only
	// must declare Owns.
	Owns []client.Object
	// AwaitPrime makes Check refuse every owner, with an *OwnerStaleError
	// whose Unprimed is set, until Prime has returned once: a new leader
	// then acts on no owner before it knows what its predecessor's writes
	// its cache lags. Set it only where Prime runs (wire does, at leader
	// election); false means Check never waits for Prime.
	AwaitPrime bool
	// RESTMapper tells whether the owner kind is namespaced, so that
	// WroteOwned and DeletedOwned record a cluster-scoped owner's children
	// under the owner's own key. When nil, a Client with these Owners asks
	// its wrapped client; otherwise the owner kind is taken as namespaced.
	RESTMapper meta.RESTMapper
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

	// declared holds OwnerOptions.Owns by kind; nil when not set.
	declared map[schema.GroupKind][]client.Object
	mapper   meta.RESTMapper
	// scope is the owner kind's scope: scopeUnknown until the RESTMapper
	// or a Client has told.
	scope atomic.Int32
	// awaiting: AwaitPrime, and Prime has not returned yet.
	awaiting atomic.Bool

	kindsMu sync.Mutex
	kinds   map[schema.GroupKind]*ownerKind

	mu     sync.RWMutex
	owners map[client.ObjectKey]*ownerEntry
	queues map[*ownerQueue]struct{}
}

// ownerEntry holds the records of one owner key, per incarnation: by the
// owner's UID, "" for records made without it, which every incarnation's
// Check judges. The records of one incarnation are never judged or dropped
// by another's Check or writes: UIDs are not ordered, and a controller may
// write for an old incarnation (cleaning up its children) after a new one.
type ownerEntry struct {
	incs map[types.UID]map[ownedKey]*ownedWait
}

const (
	scopeUnknown int32 = iota
	scopeNamespaced
	scopeCluster
)

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
	// gone holds the owned objects deleted and not yet seen gone, by UID
	// and name: two deletions recorded without a UID are two.
	gone map[deletedName]*ownedDeletion
	// at is when the record was last raised: TTL and catch-up count from it.
	at time.Time
	// gen counts raises, so that a Check can tell whether a record changed
	// while it read the cache without holding the lock.
	gen uint64
	// woken: the wake source has enqueued the owner for this record.
	woken bool
}

// deletedName is one owned deletion: the object's UID ("" when the write
// did not say) and its name.
type deletedName struct {
	uid  types.UID
	name string
}

type ownedDeletion struct {
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
	opts.Name, opts.TTL, opts.Clock = withDefaults(opts.Name, opts.TTL, opts.Clock)
	if opts.Scheme == nil {
		opts.Scheme = scheme.Scheme
	}
	if objcopy.IsNil(opts.RESTMapper) {
		opts.RESTMapper = nil
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
		mapper:       opts.RESTMapper,
	}
	t.awaiting.Store(opts.AwaitPrime)
	if opts.Owns != nil {
		t.declared = make(map[schema.GroupKind][]client.Object, len(opts.Owns))
	}
	for i, o := range opts.Owns {
		if objcopy.IsNil(o) {
			return nil, fmt.Errorf("OwnerOptions.Owns[%d] is nil: %w", i, ErrOwnerOptions)
		}
		ogvk, err := t.gvkOf(o)
		if err != nil {
			return nil, fmt.Errorf("OwnerOptions.Owns[%d]: %w: %w", i, ErrOwnerOptions, err)
		}
		proto, err := objcopy.EmptyLike(o)
		if err != nil {
			return nil, fmt.Errorf("OwnerOptions.Owns[%d]: %w: %w", i, ErrOwnerOptions, err)
		}
		proto.GetObjectKind().SetGroupVersionKind(ogvk)
		gk := ogvk.GroupKind()
		dup := false
		for _, p := range t.declared[gk] {
			dup = dup || formOf(p) == formOf(proto)
		}
		if !dup {
			t.declared[gk] = append(t.declared[gk], proto)
		}
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

// ExpectWrite records that this controller created, updated or patched owned on
// behalf of owner. Pass owned as the API server returned it: only the answer
// carries the new resourceVersion. The record keeps, per owner, owned kind
// and namespace, the highest resourceVersion written; a lower one (a late
// answer) never lowers it. A record for another UID of the owner's key
// is another incarnation's and stays apart (see Check).
//
// owned's resourceVersion must be well-formed (*OwnerResourceVersionError
// otherwise); its kind is taken from its TypeMeta or, when empty, from the
// scheme. ctx bounds the informer lookup of the first record of a kind.
func (t *OwnerTracker) ExpectWrite(ctx context.Context, owner, owned client.Object) error {
	key, uid, err := t.ownerOf(owner)
	if err != nil {
		return err
	}
	return t.record(ctx, key, uid, owned, false)
}

// ExpectDeletion records that this controller deleted owned on behalf of owner.
// The owner's Check is stale until the cache no longer shows owned's
// incarnation (gone, replaced by another UID, or marked for deletion: a
// List then shows it terminating, which is what the Delete did).
// controller-runtime's Delete returns no resourceVersion, so none is needed:
// owned needs a name and, to tell incarnations apart, a UID.
func (t *OwnerTracker) ExpectDeletion(ctx context.Context, owner, owned client.Object) error {
	key, uid, err := t.ownerOf(owner)
	if err != nil {
		return err
	}
	return t.record(ctx, key, uid, owned, true)
}

// ExpectOwnedWrite is ExpectWrite with the owner found from owned's controller reference,
// which must point to the tracker's owner kind (ErrNotOwned otherwise). The
// owner lives in owned's namespace, as owner references allow, unless the
// owner kind is cluster-scoped (OwnerOptions.RESTMapper says so, or a Client
// with these Owners has told): its key is then its name alone.
func (t *OwnerTracker) ExpectOwnedWrite(ctx context.Context, owned client.Object) error {
	key, uid, err := t.controllerOf(owned)
	if err != nil {
		return err
	}
	return t.record(ctx, key, uid, owned, false)
}

// ExpectOwnedDeletion is ExpectDeletion with the owner found as in ExpectOwnedWrite.
func (t *OwnerTracker) ExpectOwnedDeletion(ctx context.Context, owned client.Object) error {
	key, uid, err := t.controllerOf(owned)
	if err != nil {
		return err
	}
	return t.record(ctx, key, uid, owned, true)
}

// Wrote is ExpectWrite, under the name it was published with.
//
// Deprecated: use ExpectWrite, named as [Tracker.ExpectWrite] is. Wrote goes
// in the release after next.
func (t *OwnerTracker) Wrote(ctx context.Context, owner, owned client.Object) error {
	return t.ExpectWrite(ctx, owner, owned)
}

// Deleted is ExpectDeletion, under the name it was published with.
//
// Deprecated: use ExpectDeletion, named as [Tracker.ExpectDeletion] is.
func (t *OwnerTracker) Deleted(ctx context.Context, owner, owned client.Object) error {
	return t.ExpectDeletion(ctx, owner, owned)
}

// WroteOwned is ExpectOwnedWrite, under the name it was published with.
//
// Deprecated: use ExpectOwnedWrite.
func (t *OwnerTracker) WroteOwned(ctx context.Context, owned client.Object) error {
	return t.ExpectOwnedWrite(ctx, owned)
}

// DeletedOwned is ExpectOwnedDeletion, under the name it was published with.
//
// Deprecated: use ExpectOwnedDeletion.
func (t *OwnerTracker) DeletedOwned(ctx context.Context, owned client.Object) error {
	return t.ExpectOwnedDeletion(ctx, owned)
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
	return t.controllerRef(owned, okey)
}

// controllerRef returns the owner key and UID of owned's controller
// reference; okey names owned in errors.
func (t *OwnerTracker) controllerRef(owned client.Object, okey client.ObjectKey) (client.ObjectKey, types.UID, error) {
	if objcopy.IsNil(owned) {
		return okey, "", fmt.Errorf("owned %T: %w", owned, ErrNilObject)
	}
	ref := metav1.GetControllerOfNoCopy(owned)
	if ref == nil {
		return okey, "", fmt.Errorf("%s has no controller reference: %w", okey, ErrNotOwned)
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || (schema.GroupKind{Group: gv.Group, Kind: ref.Kind}) != t.ownerGK {
		return okey, "", fmt.Errorf("%s is controlled by %s %s, not a %s: %w", okey, ref.APIVersion, ref.Kind, t.ownerGK, ErrNotOwned)
	}
	key := client.ObjectKey{Namespace: owned.GetNamespace(), Name: ref.Name}
	if t.clusterScoped() {
		key.Namespace = ""
	}
	return key, ref.UID, nil
}

// clusterScoped reports whether the owner kind is known to be
// cluster-scoped, asking the RESTMapper once it answers.
func (t *OwnerTracker) clusterScoped() bool {
	switch t.scope.Load() {
	case scopeCluster:
		return true
	case scopeNamespaced:
		return false
	}
	if t.mapper == nil {
		return false
	}
	gvk, err := t.gvkOf(t.owner)
	if err != nil {
		return false
	}
	m, err := t.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return false
	}
	t.setScope(m.Scope.Name() != meta.RESTScopeNameNamespace)
	return m.Scope.Name() != meta.RESTScopeNameNamespace
}

// setScope records whether the owner kind is cluster-scoped.
func (t *OwnerTracker) setScope(cluster bool) {
	if cluster {
		t.scope.Store(scopeCluster)
	} else {
		t.scope.Store(scopeNamespaced)
	}
}

// scopeKnown reports whether the owner kind's scope has been told.
func (t *OwnerTracker) scopeKnown() bool { return t.scope.Load() != scopeUnknown || t.mapper != nil }

func (t *OwnerTracker) gvkOf(obj client.Object) (schema.GroupVersionKind, error) {
	if gvk := obj.GetObjectKind().GroupVersionKind(); gvk.Kind != "" && gvk.Version != "" {
		return gvk, nil
	}
	return apiutil.GVKForObject(obj, t.scheme)
}

// wroteUnnamed records, for the owner of owned's controller reference, that
// the cache of owned's kind in its namespace must reach rv: a write of owned
// (a Create with generateName) ended ambiguously, and rv is a version the
// server read live after it, so a cache at rv shows the object if the write
// was applied.
func (t *OwnerTracker) wroteUnnamed(ctx context.Context, owned client.Object, rv string) error {
	key, uid, err := t.controllerRef(owned, client.ObjectKey{Namespace: owned.GetNamespace(), Name: owned.GetGenerateName() + "*"})
	if err != nil {
		return err
	}
	return t.recordAt(ctx, key, uid, owned, client.ObjectKey{Namespace: owned.GetNamespace()}, rv, false)
}

// cacheAt reports whether every form of gk's cache this tracker reads has
// reached rv in namespace ns; false for a kind it does not read.
func (t *OwnerTracker) cacheAt(gk schema.GroupKind, ns, rv string) bool {
	t.kindsMu.Lock()
	k := t.kinds[gk]
	t.kindsMu.Unlock()
	if k == nil {
		return false
	}
	cmp, err := resourceversion.CompareResourceVersion(k.version(ns), rv)
	return err == nil && cmp >= 0
}

func (t *OwnerTracker) record(ctx context.Context, owner client.ObjectKey, ownerUID types.UID, owned client.Object, deletion bool) error {
	okey, err := nameOf(owned)
	if err != nil {
		return fmt.Errorf("owned object of %s: %w", owner, err)
	}
	return t.recordAt(ctx, owner, ownerUID, owned, okey, owned.GetResourceVersion(), deletion)
}

// recordAt records a write at rv (or the deletion) of owned, named okey,
// for the owner's incarnation.
func (t *OwnerTracker) recordAt(ctx context.Context, owner client.ObjectKey, ownerUID types.UID, owned client.Object, okey client.ObjectKey, rv string, deletion bool) error {
	gvk, err := t.gvkOf(owned)
	if err != nil {
		return fmt.Errorf("owned object %s of %s: %w", okey, owner, err)
	}
	if !deletion {
		if _, err := resourceversion.CompareResourceVersion(rv, rv); err != nil {
			return &OwnerResourceVersionError{Owner: owner, Kind: gvk.GroupKind(), ResourceVersion: rv, Err: err}
		}
	}
	kind, err := t.kindFor(ctx, gvk, owned)
	if err != nil {
		return fmt.Errorf("owned kind %s of %s: %w", gvk.GroupKind(), owner, err)
	}
	if kind == nil {
		return fmt.Errorf("%s is not in OwnerOptions.Owns: %w", gvk.GroupKind(), ErrNotOwned)
	}

	now := t.clock.Now()
	ok := ownedKey{gk: kind.gk, namespace: okey.Namespace}
	t.mu.Lock()
	e := t.owners[owner]
	if e == nil {
		e = &ownerEntry{incs: make(map[types.UID]map[ownedKey]*ownedWait, 1)}
		t.owners[owner] = e
	}
	waits := e.incs[ownerUID]
	if waits == nil {
		waits = make(map[ownedKey]*ownedWait, 1)
		e.incs[ownerUID] = waits
	}
	w := waits[ok]
	if w == nil {
		w = &ownedWait{kind: kind}
		waits[ok] = w
		kind.waiting.Add(1)
	}
	raised := false
	if deletion {
		if w.gone == nil {
			w.gone = make(map[deletedName]*ownedDeletion, 1)
		}
		if d := (deletedName{uid: owned.GetUID(), name: okey.Name}); w.gone[d] == nil {
			w.gone[d] = &ownedDeletion{}
			raised = true
		}
	} else if cmp, _ := resourceversion.CompareResourceVersion(rv, w.rv); w.rv == "" || cmp > 0 {
		w.rv = rv
		raised = true
	}
	var queues []*ownerQueue
	if raised {
		w.at, w.woken = now, false
		w.gen++
		// The watch may have delivered the write before its answer was
		// recorded: no later event would wake the owner, so wake it now.
		if len(t.queues) > 0 && w.caughtUp(okey.Namespace) {
			w.woken = true
			queues = t.queueList()
		}
	}
	t.mu.Unlock()
	for _, q := range queues {
		q.q.Add(reconcile.Request{NamespacedName: owner})
	}
	t.maybeSweep(now)
	return nil
}

// queueList returns the Source queues; t.mu must be held.
func (t *OwnerTracker) queueList() []*ownerQueue {
	queues := make([]*ownerQueue, 0, len(t.queues))
	for q := range t.queues {
		queues = append(queues, q)
	}
	return queues
}

// Check tells owner's reconcile whether it may decide from the cache: for
// every owned kind and namespace recorded for owner, the cache must be at
// least at the highest resourceVersion written, and must no longer show the
// owned objects deleted. It never blocks and returns
//
//   - nil when nothing is recorded for owner's key (no allocation), or when
//     every record is satisfied; satisfied records are dropped;
//   - nil when the records belong to another UID of the owner's key
//     (another incarnation): they are neither judged nor dropped, and go
//     with Forget or the TTL;
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
	if t.awaiting.Load() {
		return &OwnerStaleError{Owner: key, Unprimed: true}
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
	inc   types.UID // the owner incarnation the record is for
	ok    ownedKey
	w     *ownedWait
	gen   uint64
	rv    string
	at    time.Time
	gone  []deletedName // unseen deletions
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
	var checks []pendingCheck
	for inc, waits := range e.incs {
		if !sameUID(inc, uid) {
			continue
		}
		for ok, w := range waits {
			checks = append(checks, t.pendingOf(inc, ok, w))
		}
	}
	t.mu.Unlock()
	if len(checks) == 0 {
		return nil
	}
	return t.judge(ctx, key, now, checks)
}

// pendingOf copies a record for judging without the lock; t.mu is held.
func (t *OwnerTracker) pendingOf(inc types.UID, ok ownedKey, w *ownedWait) pendingCheck {
	pc := pendingCheck{inc: inc, ok: ok, w: w, gen: w.gen, rv: w.rv, at: w.at}
	for dn, d := range w.gone {
		if !d.seen {
			pc.gone = append(pc.gone, dn)
		}
	}
	return pc
}

// judge decides the records Check copied and drops the satisfied and
// expired ones that did not change meanwhile.
func (t *OwnerTracker) judge(ctx context.Context, key client.ObjectKey, now time.Time, checks []pendingCheck) error {
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
	e := t.owners[key]
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
		waits := t.waitsOf(e, pc.inc)
		if waits == nil || waits[pc.ok] != pc.w || pc.w.gen != pc.gen {
			continue
		}
		delete(waits, pc.ok)
		if len(waits) == 0 {
			delete(e.incs, pc.inc)
		}
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
	if e != nil && len(e.incs) == 0 {
		delete(t.owners, key)
	}
	t.mu.Unlock()
	return firstErr
}

func (t *OwnerTracker) waitsOf(e *ownerEntry, inc types.UID) map[ownedKey]*ownedWait {
	if e == nil {
		return nil
	}
	return e.incs[inc]
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
	for _, dn := range pc.gone {
		name := dn.name
		shown, err := k.shows(ctx, t.cache, client.ObjectKey{Namespace: pc.ok.namespace, Name: name}, dn.uid)
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

// Forget drops, without counting them, the records of owner's incarnation
// and those recorded without a UID; an owner without a UID (an object with
// only the key will do) drops every incarnation's. Call it when the owner is
// gone (a NotFound at the reconcile's entry), so that its records do not
// wait for the TTL sweep.
func (t *OwnerTracker) Forget(owner client.Object) {
	key, err := nameOf(owner)
	if err != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.owners[key]
	if e == nil {
		return
	}
	for inc, waits := range e.incs {
		if sameUID(inc, owner.GetUID()) {
			for _, w := range waits {
				w.kind.waiting.Add(-1)
			}
			delete(e.incs, inc)
		}
	}
	if len(e.incs) == 0 {
		delete(t.owners, key)
	}
}

// Pending returns the number of records (owner, owned kind, namespace) held.
func (t *OwnerTracker) Pending() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	n := 0
	for _, e := range t.owners {
		for _, waits := range e.incs {
			n += len(waits)
		}
	}
	return n
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
		for inc, waits := range e.incs {
			for ok, w := range waits {
				if now.Sub(w.at) >= t.ttl {
					delete(waits, ok)
					w.kind.waiting.Add(-1)
					w.kind.m.expired.Inc()
				}
			}
			if len(waits) == 0 {
				delete(e.incs, inc)
			}
		}
		if len(e.incs) == 0 {
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
