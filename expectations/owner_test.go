package expectations_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dto "github.com/prometheus/client_model/go"

	"github.com/racesafe/racesafe/expectations"
	"github.com/racesafe/racesafe/internal/metricstest"
	"github.com/racesafe/racesafe/requeue"
)

// fakeOwnedInformer is an informer whose events the test delivers by hand.
// Only the methods an OwnerTracker calls are implemented.
type fakeOwnedInformer struct {
	cache.Informer
	mu       sync.Mutex
	handlers []toolscache.ResourceEventHandler
	unsynced bool
}

func (f *fakeOwnedInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handlers = append(f.handlers, h)
	return nil, nil
}

func (f *fakeOwnedInformer) HasSynced() bool { return !f.unsynced }

func (f *fakeOwnedInformer) deliver(obj client.Object, deleted bool) {
	f.mu.Lock()
	hs := append([]toolscache.ResourceEventHandler(nil), f.handlers...)
	f.mu.Unlock()
	for _, h := range hs {
		if deleted {
			h.OnDelete(obj)
		} else {
			h.OnAdd(obj, false)
		}
	}
}

// storeInformer adds client-go's store, whose version the test sets.
type storeInformer struct {
	*fakeOwnedInformer
	store *fakeVersionStore
}

func (s storeInformer) GetStore() toolscache.Store { return s.store }

type fakeVersionStore struct {
	toolscache.Store
	mu sync.Mutex
	rv string
}

func (s *fakeVersionStore) LastStoreSyncResourceVersion() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rv
}

func (s *fakeVersionStore) set(rv string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv = rv
}

// fakeOwnerCache serves one informer for every kind, and Gets from objs.
type fakeOwnerCache struct {
	client.Reader
	inf  cache.Informer
	mu   sync.Mutex
	objs map[client.ObjectKey]client.Object
}

func (c *fakeOwnerCache) GetInformer(context.Context, client.Object, ...cache.InformerGetOption) (cache.Informer, error) {
	return c.inf, nil
}

func (c *fakeOwnerCache) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	got, ok := c.objs[key]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, key.Name)
	}
	obj.SetUID(got.GetUID())
	obj.SetDeletionTimestamp(got.GetDeletionTimestamp())
	return nil
}

func (c *fakeOwnerCache) put(obj client.Object) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.objs[client.ObjectKeyFromObject(obj)] = obj
}

func (c *fakeOwnerCache) remove(obj client.Object) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.objs, client.ObjectKeyFromObject(obj))
}

type ownerFixture struct {
	tr    *expectations.OwnerTracker
	inf   *fakeOwnedInformer
	store *fakeVersionStore // nil on the handler path
	cache *fakeOwnerCache
	clock interface{ Step(time.Duration) }
	name  string
	t     *testing.T
}

func newOwnerFixture(t *testing.T, withStore bool, mutate ...func(*expectations.OwnerOptions)) *ownerFixture {
	t.Helper()
	f := &ownerFixture{inf: &fakeOwnedInformer{}, name: "owner-" + t.Name(), t: t}
	var inf cache.Informer = f.inf
	if withStore {
		f.store = &fakeVersionStore{}
		inf = storeInformer{fakeOwnedInformer: f.inf, store: f.store}
	}
	f.cache = &fakeOwnerCache{inf: inf, objs: map[client.ObjectKey]client.Object{}}
	clk := newFakeClock()
	f.clock = clk
	opts := expectations.OwnerOptions{Name: f.name, For: &corev1.ConfigMap{}, Cache: f.cache, TTL: ttl, Clock: clk}
	for _, m := range mutate {
		m(&opts)
	}
	tr, err := expectations.NewOwnerTracker(opts)
	if err != nil {
		t.Fatal(err)
	}
	f.tr = tr
	return f
}

func ownerCM(uid string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "owner", UID: types.UID(uid)}}
}

func child(ns, name, uid, rv string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid), ResourceVersion: rv}}
}

func (f *ownerFixture) skips() float64 {
	return metricstest.CounterValue(f.t, "racesafe_owner_expectations_skips_total",
		map[string]string{"controller": f.name, "owner_kind": "ConfigMap", "owned_kind": "Secret"})
}

func (f *ownerFixture) expired() float64 {
	return metricstest.CounterValue(f.t, "racesafe_owner_expectations_expired_total",
		map[string]string{"controller": f.name, "owner_kind": "ConfigMap", "owned_kind": "Secret"})
}

// histogramCount reads the sample count of a histogram series labelled
// exactly as given; zero when never observed.
func histogramCount(t *testing.T, name string, labels map[string]string) uint64 {
	t.Helper()
	m := findSeries(t, name, labels)
	return m.GetHistogram().GetSampleCount()
}

// gaugeValue reads a gauge series labelled exactly as given.
func gaugeValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	return findSeries(t, name, labels).GetGauge().GetValue()
}

func findSeries(t *testing.T, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue series
				}
			}
			return m
		}
	}
	return nil
}

func TestOwnerCheckIsStaleUntilTheStoreVersionCatchesUp(t *testing.T) {
	f := newOwnerFixture(t, true)
	ctx := t.Context()
	owner := ownerCM("o1")
	f.store.set("99")
	if err := f.tr.Check(ctx, owner); err != nil {
		t.Fatalf("Check with nothing recorded = %v, want nil", err)
	}
	if err := f.tr.ExpectWrite(ctx, owner, child("default", "c-1", "c1", "100")); err != nil {
		t.Fatal(err)
	}
	// A late answer never lowers the record.
	if err := f.tr.ExpectWrite(ctx, owner, child("default", "c-0", "c0", "90")); err != nil {
		t.Fatal(err)
	}
	skips := f.skips()
	catchUp := map[string]string{"controller": f.name, "owned_kind": "Secret"}
	samples := histogramCount(t, "racesafe_owner_expectations_catch_up_seconds", catchUp)

	err := f.tr.Check(ctx, owner)
	var stale *expectations.OwnerStaleError
	if !errors.As(err, &stale) || !errors.Is(err, expectations.ErrStale) {
		t.Fatalf("Check behind the write = %v, want *OwnerStaleError matching ErrStale", err)
	}
	want := expectations.OwnerStaleError{Owner: client.ObjectKeyFromObject(owner), Kind: schema.GroupKind{Kind: "Secret"}, Namespace: "default", Want: "100", Seen: "99"}
	if *stale != want {
		t.Errorf("stale error = %+v, want %+v", *stale, want)
	}
	if res, rerr := requeue.OnStale(err, 0); rerr != nil || res.RequeueAfter != requeue.DefaultStaleAfter {
		t.Errorf("requeue.OnStale = %+v, %v; want a short requeue and no error (no rate-limiter backoff)", res, rerr)
	}
	if d := f.skips() - skips; d != 1 {
		t.Errorf("skips delta = %v, want 1", d)
	}
	if v := gaugeValue(t, "racesafe_owner_expectations_cache_resource_version", catchUp); v != 99 {
		t.Errorf("cache resourceVersion gauge = %v, want 99", v)
	}

	f.store.set("100")
	if err := f.tr.Check(ctx, owner); err != nil {
		t.Fatalf("Check after catch-up = %v, want nil", err)
	}
	if n := f.tr.Pending(); n != 0 {
		t.Errorf("Pending after catch-up = %d, want 0: satisfied records are dropped", n)
	}
	if d := histogramCount(t, "racesafe_owner_expectations_catch_up_seconds", catchUp) - samples; d != 1 {
		t.Errorf("catch-up samples delta = %d, want 1", d)
	}
}

func TestOwnerCheckFallsBackToEventsPerStream(t *testing.T) {
	for _, tc := range []struct {
		name      string
		withStore bool // with a store whose version is "": AtomicFIFO off
	}{{"no store (multi-namespace informer)", false}, {"empty store version", true}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newOwnerFixture(t, tc.withStore)
			ctx := t.Context()
			owner := ownerCM("o1")
			if err := f.tr.ExpectWrite(ctx, owner, child("default", "c-1", "c1", "100")); err != nil {
				t.Fatal(err)
			}
			var stale *expectations.OwnerStaleError
			if err := f.tr.Check(ctx, owner); !errors.As(err, &stale) || stale.Seen != "" {
				t.Fatalf("Check before any event = %v, want stale with nothing seen", err)
			}
			// Another namespace's stream being ahead proves nothing for a
			// multi-namespace informer; one informer is one stream, whose
			// events of every namespace come in order.
			f.inf.deliver(child("other", "x", "x", "500"), false)
			switch err := f.tr.Check(ctx, owner); {
			case !tc.withStore && !errors.Is(err, expectations.ErrStale):
				t.Fatalf("Check after an event in another namespace's stream = %v, want stale", err)
			case tc.withStore && err != nil:
				t.Fatalf("Check after a later event of the one stream, in another namespace = %v, want nil", err)
			}
			if err := f.tr.ExpectWrite(ctx, owner, child("default", "c-2", "c2", "600")); err != nil {
				t.Fatal(err)
			}
			f.inf.deliver(child("default", "c-1", "c1", "100"), false)
			if err := f.tr.Check(ctx, owner); !errors.Is(err, expectations.ErrStale) {
				t.Fatalf("Check after an event older than the write = %v, want stale", err)
			}
			f.inf.deliver(child("default", "c-2", "c2", "600"), false)
			if err := f.tr.Check(ctx, owner); err != nil {
				t.Fatalf("Check after the child's own event = %v, want nil", err)
			}
		})
	}
}

func TestOwnerCheckRefusesAnUnorderableCacheVersion(t *testing.T) {
	f := newOwnerFixture(t, true)
	ctx := t.Context()
	owner := ownerCM("o1")
	if err := f.tr.ExpectWrite(ctx, owner, child("default", "c-1", "c1", "100")); err != nil {
		t.Fatal(err)
	}
	f.store.set("not-a-version")
	err := f.tr.Check(ctx, owner)
	var rvErr *expectations.OwnerResourceVersionError
	if !errors.As(err, &rvErr) || !errors.Is(err, expectations.ErrInvalidResourceVersion) || !rvErr.Cache || rvErr.ResourceVersion != "not-a-version" {
		t.Fatalf("Check with a malformed cache version = %v, want a cache *OwnerResourceVersionError", err)
	}
	if f.tr.Pending() != 1 {
		t.Errorf("the record was dropped on a malformed cache version")
	}
}

func TestOwnerWroteRefusesAnUnorderableResourceVersion(t *testing.T) {
	f := newOwnerFixture(t, true)
	for _, rv := range []string{"", "0123", "abc"} {
		err := f.tr.ExpectWrite(t.Context(), ownerCM("o1"), child("default", "c", "c", rv))
		var rvErr *expectations.OwnerResourceVersionError
		if !errors.As(err, &rvErr) || rvErr.Cache || rvErr.ResourceVersion != rv {
			t.Errorf("ExpectWrite(rv %q) = %v, want a written *OwnerResourceVersionError", rv, err)
		}
	}
	if n := f.tr.Pending(); n != 0 {
		t.Errorf("Pending = %d after malformed writes, want 0", n)
	}
}

// TestOwnerIncarnationsAreKeptApart: UIDs are not ordered, and a controller
// may write for an old incarnation (deleting its child) after a new one
// (creating its own): neither may judge or drop the other's records.
func TestOwnerIncarnationsAreKeptApart(t *testing.T) {
	f := newOwnerFixture(t, false)
	ctx := t.Context()
	if err := f.tr.ExpectWrite(ctx, ownerCM("new"), child("default", "c-2", "c2", "100")); err != nil {
		t.Fatal(err)
	}
	// Cleanup of the old incarnation's child, after the new one's write.
	if err := f.tr.ExpectDeletion(ctx, ownerCM("old"), child("default", "c-1", "c1", "90")); err != nil {
		t.Fatal(err)
	}
	if n := f.tr.Pending(); n != 2 {
		t.Fatalf("Pending = %d, want 2: each incarnation keeps its record", n)
	}
	var stale *expectations.OwnerStaleError
	if err := f.tr.Check(ctx, ownerCM("new")); !errors.As(err, &stale) || stale.Want != "100" {
		t.Fatalf("Check of the new incarnation = %v, want stale wanting 100: the old one's write must not drop its record", err)
	}
	// The old incarnation's Check judges its own deletion only.
	f.inf.deliver(child("default", "c-2", "c2", "100"), false)
	if err := f.tr.Check(ctx, ownerCM("new")); err != nil {
		t.Fatalf("Check of the new incarnation after its child was delivered = %v, want nil", err)
	}
	if n := f.tr.Pending(); n != 1 {
		t.Fatalf("Pending = %d, want 1: the new incarnation's Check dropped the old one's record", n)
	}
	f.tr.Forget(ownerCM("")) // the key alone: every incarnation
	if n := f.tr.Pending(); n != 0 {
		t.Fatalf("Pending after Forget by key = %d, want 0", n)
	}
}

func TestOwnerCheckActsAfterTheTTL(t *testing.T) {
	f := newOwnerFixture(t, true)
	ctx := t.Context()
	owner := ownerCM("o1")
	if err := f.tr.ExpectWrite(ctx, owner, child("default", "c-1", "c1", "100")); err != nil {
		t.Fatal(err)
	}
	expired := f.expired()
	f.clock.Step(ttl - time.Nanosecond)
	if err := f.tr.Check(ctx, owner); !errors.Is(err, expectations.ErrStale) {
		t.Fatalf("Check before the TTL = %v, want stale", err)
	}
	f.clock.Step(time.Nanosecond)
	if err := f.tr.Check(ctx, owner); err != nil {
		t.Fatalf("Check at the TTL = %v, want nil", err)
	}
	if d := f.expired() - expired; d != 1 {
		t.Errorf("expired delta = %v, want 1", d)
	}
	if n := f.tr.Pending(); n != 0 {
		t.Errorf("Pending = %d, want 0", n)
	}
}

func TestOwnerCheckAsksForALiveReadAfterTheTTL(t *testing.T) {
	f := newOwnerFixture(t, true, func(o *expectations.OwnerOptions) { o.LiveReadOnExpiry = true })
	ctx := t.Context()
	owner := ownerCM("o1")
	f.store.set("50")
	if err := f.tr.ExpectWrite(ctx, owner, child("default", "c-1", "c1", "100")); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(ttl)
	err := f.tr.Check(ctx, owner)
	var exp *expectations.OwnerExpiredError
	if !errors.As(err, &exp) || errors.Is(err, expectations.ErrStale) || exp.Want != "100" || exp.Seen != "50" || exp.Age != ttl {
		t.Fatalf("Check at the TTL = %v, want an *OwnerExpiredError (not ErrStale) wanting 100, seen 50, age %s", err, ttl)
	}
	if err := f.tr.Check(ctx, owner); err != nil {
		t.Fatalf("second Check = %v, want nil: the escalation happens once", err)
	}
}

func TestOwnerCheckWaitsForDeletions(t *testing.T) {
	for _, byEvent := range []bool{false, true} {
		t.Run(map[bool]string{false: "cache read", true: "delete event"}[byEvent], func(t *testing.T) {
			f := newOwnerFixture(t, false)
			ctx := t.Context()
			owner := ownerCM("o1")
			c := child("default", "c-1", "c1", "100")
			f.cache.put(c)
			if err := f.tr.ExpectDeletion(ctx, owner, c); err != nil {
				t.Fatal(err)
			}
			var stale *expectations.OwnerStaleError
			if err := f.tr.Check(ctx, owner); !errors.As(err, &stale) || stale.Deleted != "c-1" {
				t.Fatalf("Check while the cache shows the deleted child = %v, want stale on c-1", err)
			}
			if byEvent {
				f.inf.deliver(c, true) // the cache still answers Get: the event is what counts
			} else {
				f.cache.remove(c)
			}
			if err := f.tr.Check(ctx, owner); err != nil {
				t.Fatalf("Check after the deletion was seen = %v, want nil", err)
			}
		})
	}
}

func TestOwnerCheckTreatsTerminatingChildAsDeleted(t *testing.T) {
	f := newOwnerFixture(t, false)
	ctx := t.Context()
	c := child("default", "c-1", "c1", "100")
	f.cache.put(c)
	if err := f.tr.ExpectDeletion(ctx, ownerCM("o1"), c); err != nil {
		t.Fatal(err)
	}
	terminating := c.DeepCopy()
	terminating.DeletionTimestamp = ptr.To(metav1.Now())
	f.cache.put(terminating)
	if err := f.tr.Check(ctx, ownerCM("o1")); err != nil {
		t.Fatalf("Check with the child terminating = %v, want nil", err)
	}
}

func TestOwnerWroteOwnedFindsTheControllerReference(t *testing.T) {
	f := newOwnerFixture(t, true)
	ctx := t.Context()
	c := child("default", "c-1", "c1", "100")
	if err := f.tr.ExpectOwnedWrite(ctx, c); !errors.Is(err, expectations.ErrNotOwned) {
		t.Errorf("ExpectOwnedWrite without owner references = %v, want ErrNotOwned", err)
	}
	c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "owner", UID: "d", Controller: ptr.To(true)}}
	if err := f.tr.ExpectOwnedWrite(ctx, c); !errors.Is(err, expectations.ErrNotOwned) {
		t.Errorf("ExpectOwnedWrite controlled by another kind = %v, want ErrNotOwned", err)
	}
	c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "o1", Controller: ptr.To(true)}}
	if err := f.tr.ExpectOwnedWrite(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := f.tr.Check(ctx, ownerCM("o1")); !errors.Is(err, expectations.ErrStale) {
		t.Errorf("Check of the controller = %v, want stale", err)
	}
	if err := f.tr.ExpectWrite(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "owner"}}, c); !errors.Is(err, expectations.ErrOwnerKind) {
		t.Errorf("ExpectWrite with an owner of another kind = %v, want ErrOwnerKind", err)
	}
}

func TestOwnerSourceEnqueuesTheOwnerOnCatchUp(t *testing.T) {
	f := newOwnerFixture(t, false)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	if err := f.tr.Source().Start(ctx, q); err != nil {
		t.Fatal(err)
	}
	owner := ownerCM("o1")
	if err := f.tr.ExpectWrite(ctx, owner, child("default", "c-1", "c1", "100")); err != nil {
		t.Fatal(err)
	}
	f.inf.deliver(child("default", "older", "x", "99"), false)
	if n := q.Len(); n != 0 {
		t.Fatalf("queue length after an older event = %d, want 0", n)
	}
	f.inf.deliver(child("default", "c-1", "c1", "100"), false)
	if n := q.Len(); n != 1 {
		t.Fatalf("queue length after catch-up = %d, want 1", n)
	}
	req, _ := q.Get()
	q.Done(req)
	if req.NamespacedName != client.ObjectKeyFromObject(owner) {
		t.Errorf("enqueued %v, want the owner", req)
	}
	f.inf.deliver(child("default", "c-2", "c2", "101"), false)
	if n := q.Len(); n != 0 {
		t.Errorf("queue length after a later event = %d, want 0: one wake per raise", n)
	}
}

func TestOwnerForgetIsUIDGuarded(t *testing.T) {
	f := newOwnerFixture(t, true)
	ctx := t.Context()
	if err := f.tr.ExpectWrite(ctx, ownerCM("o1"), child("default", "c-1", "c1", "100")); err != nil {
		t.Fatal(err)
	}
	f.tr.Forget(ownerCM("o2"))
	if n := f.tr.Pending(); n != 1 {
		t.Fatalf("Forget of another UID dropped the record: Pending = %d", n)
	}
	f.tr.Forget(ownerCM("")) // only the key: a NotFound owner
	if n := f.tr.Pending(); n != 0 {
		t.Fatalf("Forget by key kept the record: Pending = %d", n)
	}
}

func TestOwnerSweepDropsExpiredRecords(t *testing.T) {
	f := newOwnerFixture(t, true)
	ctx := t.Context()
	if err := f.tr.ExpectWrite(ctx, ownerCM("o1"), child("default", "c-1", "c1", "100")); err != nil {
		t.Fatal(err)
	}
	expired := f.expired()
	f.clock.Step(ttl)
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "other", UID: "o9"}}
	if err := f.tr.ExpectWrite(ctx, other, child("default", "c-2", "c2", "101")); err != nil {
		t.Fatal(err)
	}
	if n := f.tr.Pending(); n != 1 {
		t.Errorf("Pending after the sweep = %d, want 1 (the fresh record only)", n)
	}
	if d := f.expired() - expired; d != 1 {
		t.Errorf("expired delta = %v, want 1", d)
	}
}

func TestOwnerHugeTTLDoesNotOverflow(t *testing.T) {
	f := newOwnerFixture(t, true, func(o *expectations.OwnerOptions) { o.TTL = math.MaxInt64 })
	ctx := t.Context()
	if err := f.tr.ExpectWrite(ctx, ownerCM("o1"), child("default", "c-1", "c1", "100")); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(100 * 365 * 24 * time.Hour)
	if err := f.tr.Check(ctx, ownerCM("o1")); !errors.Is(err, expectations.ErrStale) {
		t.Fatalf("Check a century later with an unbounded TTL = %v, want stale", err)
	}
}

func TestOwnerBadInputIsAnError(t *testing.T) {
	if _, err := expectations.NewOwnerTracker(expectations.OwnerOptions{Cache: &fakeOwnerCache{}}); !errors.Is(err, expectations.ErrOwnerOptions) {
		t.Errorf("no For = %v, want ErrOwnerOptions", err)
	}
	if _, err := expectations.NewOwnerTracker(expectations.OwnerOptions{For: &corev1.ConfigMap{}}); !errors.Is(err, expectations.ErrOwnerOptions) {
		t.Errorf("no Cache = %v, want ErrOwnerOptions", err)
	}
	f := newOwnerFixture(t, true)
	ctx := t.Context()
	if err := f.tr.Check(ctx, (*corev1.ConfigMap)(nil)); !errors.Is(err, expectations.ErrNilObject) {
		t.Errorf("Check(nil) = %v, want ErrNilObject", err)
	}
	if err := f.tr.ExpectWrite(ctx, ownerCM("o1"), nil); !errors.Is(err, expectations.ErrNilObject) {
		t.Errorf("ExpectWrite(owned nil) = %v, want ErrNilObject", err)
	}
	if err := f.tr.ExpectWrite(ctx, &corev1.ConfigMap{}, child("default", "c", "c", "1")); !errors.Is(err, expectations.ErrNoName) {
		t.Errorf("ExpectWrite(owner without name) = %v, want ErrNoName", err)
	}
}

// TestOwnerTrackerIsSafeForConcurrentUse runs writes, checks, events and a
// wake source at once (under -race), then proves no write was lost: the
// check is stale until the cache reaches the highest one, then passes.
func TestOwnerTrackerIsSafeForConcurrentUse(t *testing.T) {
	f := newOwnerFixture(t, true)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	if err := f.tr.Source().Start(ctx, q); err != nil {
		t.Fatal(err)
	}
	owners := []*corev1.ConfigMap{ownerCM("o1"), {ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "o2", UID: "o2"}}}
	const writes = 200
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range writes {
				rv := strconv.Itoa(1000 + i*4 + w)
				owner := owners[i%len(owners)]
				if err := f.tr.ExpectWrite(ctx, owner, child("default", "c-"+rv, "c"+rv, rv)); err != nil {
					t.Error(err)
					return
				}
				if err := f.tr.Check(ctx, owner); err != nil && !errors.Is(err, expectations.ErrStale) {
					t.Error(err)
					return
				}
				f.inf.deliver(child("default", "c-"+rv, "c"+rv, strconv.Itoa(500+i)), false)
			}
		})
	}
	wg.Wait()
	// o2 got the odd i, so the highest write (i 199, w 3); o1's highest is
	// i 198, w 3.
	highest := strconv.Itoa(1000 + (writes-1)*4 + 3)
	f.store.set(strconv.Itoa(1000 + (writes-1)*4 + 2))
	if err := f.tr.Check(ctx, owners[1]); !errors.Is(err, expectations.ErrStale) {
		t.Fatalf("Check of o2 one below its highest write = %v, want stale", err)
	}
	if err := f.tr.Check(ctx, owners[0]); err != nil {
		t.Fatalf("Check of o1 above its highest write = %v, want nil", err)
	}
	f.store.set(highest)
	for _, owner := range owners {
		if err := f.tr.Check(ctx, owner); err != nil {
			t.Fatalf("Check of %s at the highest write = %v, want nil", owner.Name, err)
		}
	}
	if n := f.tr.Pending(); n != 0 {
		t.Errorf("Pending = %d, want 0", n)
	}
}

// TestOwnerDeprecatedNamesStillRecord: Wrote, Deleted, WroteOwned and
// DeletedOwned, the names published before ExpectWrite and its kin, still
// record what they recorded, so code written against them keeps its guard
// for one release: a write until the cache reaches its version, a deletion
// until the cache stops showing the child.
func TestOwnerDeprecatedNamesStillRecord(t *testing.T) {
	owned := func() *corev1.Secret {
		c := child("default", "c-1", "c1", "100")
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "o1", Controller: ptr.To(true)}}
		return c
	}
	type recorder func(context.Context, *expectations.OwnerTracker) error
	for name, tc := range map[string]struct {
		record   recorder
		deletion bool
	}{
		"Wrote": {func(ctx context.Context, tr *expectations.OwnerTracker) error {
			return tr.Wrote(ctx, ownerCM("o1"), owned())
		}, false},
		"Deleted": {func(ctx context.Context, tr *expectations.OwnerTracker) error {
			return tr.Deleted(ctx, ownerCM("o1"), owned())
		}, true},
		"WroteOwned":   {func(ctx context.Context, tr *expectations.OwnerTracker) error { return tr.WroteOwned(ctx, owned()) }, false},
		"DeletedOwned": {func(ctx context.Context, tr *expectations.OwnerTracker) error { return tr.DeletedOwned(ctx, owned()) }, true},
	} {
		t.Run(name, func(t *testing.T) {
			f := newOwnerFixture(t, true)
			ctx := t.Context()
			f.cache.put(owned())
			if err := tc.record(ctx, f.tr); err != nil {
				t.Fatal(err)
			}
			if err := f.tr.Check(ctx, ownerCM("o1")); !errors.Is(err, expectations.ErrStale) {
				t.Fatalf("Check after %s = %v, want stale", name, err)
			}
			f.store.set("200") // the cache is past the write's version, and still shows the child
			err := f.tr.Check(ctx, ownerCM("o1"))
			if tc.deletion && !errors.Is(err, expectations.ErrStale) {
				t.Errorf("Check after %s with the child still cached = %v, want stale", name, err)
			}
			if !tc.deletion && err != nil {
				t.Errorf("Check after %s with the cache past it = %v, want nil", name, err)
			}
		})
	}
}

// TestOwnerDeletionsWithoutAUIDAreKeptApart (issue 35, 10): two children
// deleted by key, without a UID (a Delete of an object given by name), are
// two deletions: the Check waits for both, whichever the cache drops first,
// and a delete event, which carries the UID, satisfies the record of its
// name. Keyed by UID alone, the second deletion replaced nothing and was
// lost: the Check passed while the cache still showed it.
func TestOwnerDeletionsWithoutAUIDAreKeptApart(t *testing.T) {
	f := newOwnerFixture(t, false)
	ctx := t.Context()
	owner := ownerCM("o1")
	a, b := child("default", "c-a", "ca", "100"), child("default", "c-b", "cb", "101")
	f.cache.put(a)
	f.cache.put(b)
	for _, c := range []*corev1.Secret{a, b} {
		byKey := c.DeepCopy()
		byKey.UID = ""
		if err := f.tr.ExpectDeletion(ctx, owner, byKey); err != nil {
			t.Fatal(err)
		}
	}
	var stale *expectations.OwnerStaleError
	f.cache.remove(a)
	if err := f.tr.Check(ctx, owner); !errors.As(err, &stale) || stale.Deleted != "c-b" {
		t.Fatalf("Check with c-b still cached = %v, want stale on c-b", err)
	}
	f.inf.deliver(b, true)
	if err := f.tr.Check(ctx, owner); err != nil {
		t.Fatalf("Check after c-b's delete event = %v, want nil", err)
	}
}
