package expectations_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/racesafe/racesafe/expectations"
	"github.com/racesafe/racesafe/internal/metricstest"
	"github.com/racesafe/racesafe/internal/testenv"
	"github.com/racesafe/racesafe/racetest"
	"github.com/racesafe/racesafe/requeue"
)

// TestOwnerIntegration runs the owner check on a real API server, with one
// control plane for all its cases, each in its own namespace.
func TestOwnerIntegration(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	direct := testenv.Client(t, env.Config, client.Options{})
	t.Run("StaleAfterChildCreateUntilCacheSeesIt/store version", func(t *testing.T) {
		testOwnerStaleUntilWatchDelivers(t, env.Config, direct, "store", false)
	})
	t.Run("StaleAfterChildCreateUntilCacheSeesIt/multi-namespace handler", func(t *testing.T) {
		testOwnerStaleUntilWatchDelivers(t, env.Config, direct, "handler", true)
	})
	t.Run("ClientRecordsOwnedWrites", func(t *testing.T) {
		testClientRecordsOwnedWrites(t, env.Config, direct)
	})
	t.Run("WakesOwnerOnCatchUp/cluster-wide", func(t *testing.T) {
		testOwnerWakesOnCatchUp(t, env.Config, direct, false)
	})
	t.Run("WakesOwnerOnCatchUp/multi-namespace", func(t *testing.T) {
		testOwnerWakesOnCatchUp(t, env.Config, direct, true)
	})
	for _, lc := range []listCase{
		{name: "100ms multi-namespace", lag: 100 * time.Millisecond, multiNamespace: true},
		{name: "400ms jitter cluster-wide", lag: 400 * time.Millisecond, jitter: 100 * time.Millisecond},
	} {
		for _, mode := range []listMode{listNaive, listGuarded, listClient} {
			lc.mode = mode
			t.Run("ListThenCreateUnderLag/"+lc.name+"/"+string(mode), func(t *testing.T) {
				testListThenCreate(t, env.Config, direct, lc)
			})
		}
	}
}

func createOwner(t *testing.T, c client.Client, ns string) *corev1.ConfigMap {
	t.Helper()
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"}}
	if err := c.Create(t.Context(), owner); err != nil {
		t.Fatal(err)
	}
	return owner
}

// newOwnedSecret returns a child of owner to create with generateName.
func newOwnedSecret(t *testing.T, owner *corev1.ConfigMap) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Namespace: owner.Namespace, GenerateName: "child-", Labels: map[string]string{"owner": owner.Name},
	}}
	if err := controllerutil.SetControllerReference(owner, s, clientgoscheme.Scheme); err != nil {
		t.Fatal(err)
	}
	return s
}

// testOwnerStaleUntilWatchDelivers holds the cache's watches after a child's
// Create: the owner's Check must be stale (and a cached List shows no child,
// the ReplicaSet problem's premise) until the watch delivers the child.
func testOwnerStaleUntilWatchDelivers(t *testing.T, cfg *rest.Config, direct client.Client, ns string, multiNamespace bool) {
	ctx := t.Context()
	testenv.Namespace(t, direct, ns)
	informers, gate := gatedCache(t, cfg, ns, multiNamespace)
	name := "owner-integration-" + ns
	tr, err := expectations.NewOwnerTracker(expectations.OwnerOptions{Name: name, For: &corev1.ConfigMap{}, Cache: informers})
	if err != nil {
		t.Fatal(err)
	}
	testenv.SyncInformers(ctx, t, informers, &corev1.Secret{})
	// The path under test: a cluster-wide informer exposes client-go's
	// store and its version (AtomicFIFO on); the multi-namespace wrapper
	// does not, and the tracker's handler stands in.
	inf, err := informers.GetInformer(ctx, &corev1.Secret{})
	if err != nil {
		t.Fatal(err)
	}
	// client-go before v0.36 has no store version: the handler path then
	// serves a cluster-wide informer too.
	type versioned interface{ LastStoreSyncResourceVersion() string }
	s, ok := inf.(interface{ GetStore() toolscache.Store })
	if ok == multiNamespace {
		t.Fatalf("informer %T: store exposed %v, want %v", inf, ok, !multiNamespace)
	}
	if ok {
		if v, versionedStore := s.GetStore().(versioned); versionedStore {
			if v.LastStoreSyncResourceVersion() == "" && os.Getenv("KUBE_FEATURE_AtomicFIFO") != "false" {
				t.Fatalf("informer %T: the store has no version after sync", inf)
			}
			t.Logf("client-go store version after sync: %q", v.LastStoreSyncResourceVersion())
		}
	}
	owner := createOwner(t, direct, ns)
	skipLabels := map[string]string{"controller": name, "owner_kind": "ConfigMap", "owned_kind": "Secret"}
	skips := metricCounter(t, "racesafe_owner_expectations_skips_total", skipLabels)

	gate.hold()
	c := newOwnedSecret(t, owner)
	if err := direct.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := tr.ExpectWrite(ctx, owner, c); err != nil {
		t.Fatal(err)
	}
	var children corev1.SecretList
	if err := informers.List(ctx, &children, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(children.Items) != 0 {
		t.Fatalf("cached List shows %d children while the watch is held; the test needs a stale cache", len(children.Items))
	}
	// The watch is held: a blocking Check would never return here.
	err = tr.Check(ctx, owner)
	var stale *expectations.OwnerStaleError
	if !errors.As(err, &stale) || stale.Want != c.ResourceVersion || stale.Kind != (schema.GroupKind{Kind: "Secret"}) {
		t.Fatalf("Check while the watch is held = %v, want *OwnerStaleError wanting %s", err, c.ResourceVersion)
	}
	if d := metricCounter(t, "racesafe_owner_expectations_skips_total", skipLabels) - skips; d != 1 {
		t.Errorf("skips delta = %v, want 1", d)
	}

	gate.release()
	waitFor(t, "the owner check to pass", func(ctx context.Context) (bool, error) {
		err := tr.Check(ctx, owner)
		if errors.Is(err, expectations.ErrStale) {
			return false, nil
		}
		return err == nil, err
	})
	if err := informers.List(ctx, &children, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(children.Items) != 1 {
		t.Errorf("after the check passed the cached List shows %d children, want 1", len(children.Items))
	}
	if n := tr.Pending(); n != 0 {
		t.Errorf("Pending = %d, want 0", n)
	}
}

// gatedCache starts a cache whose watches deliver nothing while gate is
// held; multiNamespace makes it a multi-namespace cache over ns and default.
func gatedCache(t *testing.T, cfg *rest.Config, ns string, multiNamespace bool) (cache.Cache, *watchGate) {
	t.Helper()
	gate := &watchGate{}
	cacheConfig := rest.CopyConfig(cfg)
	cacheConfig.Wrap(gate.wrap)
	opts := cache.Options{}
	if multiNamespace {
		opts.DefaultNamespaces = map[string]cache.Config{ns: {}, "default": {}}
	}
	informers, err := cache.New(cacheConfig, opts)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Run(t.Context(), t, informers)
	t.Cleanup(gate.release) // before the cache stops: a held watch would keep it from returning
	return informers, gate
}

func metricCounter(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	return metricstest.CounterValue(t, name, labels)
}

// ownerManagerIn starts a manager whose cache sees Secrets lag late
// (cluster-wide, or restricted to ns: the multi-namespace cache), with the
// controller setup adds; it stops with t.
func ownerManagerIn(t *testing.T, cfg *rest.Config, ns string, multiNamespace bool, lag time.Duration, jitter func() time.Duration, setup func(mgr ctrl.Manager) error) ctrl.Manager {
	t.Helper()
	cacheOpts := cache.Options{}
	if multiNamespace {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{ns: {}}
	}
	opts := testenv.ManagerOptions()
	opts.NewCache = racetest.LaggedCache(racetest.LagOptions{
		Delay:  lag,
		Jitter: jitter,
		Match:  func(r racetest.Request) bool { return r.Resource == "secrets" },
	})
	opts.Cache = cacheOpts
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := setup(mgr); err != nil {
		t.Fatal(err)
	}
	testenv.Run(t.Context(), t, mgr)
	return mgr
}

// testOwnerWakesOnCatchUp: the controller watches its owners and the
// tracker's Source, not the children, and never requeues. Its first
// reconcile creates a child; the only thing that can reconcile the owner
// again is the Source, once the lagging cache shows the child.
func testOwnerWakesOnCatchUp(t *testing.T, cfg *rest.Config, direct client.Client, multiNamespace bool) {
	ns := fmt.Sprintf("wake-%t", multiNamespace)
	testenv.Namespace(t, direct, ns)
	var (
		mu       sync.Mutex
		visits   []int // children seen in the cache, per reconcile
		checkErr []error
	)
	ownerManagerIn(t, cfg, ns, multiNamespace, 300*time.Millisecond, nil, func(mgr ctrl.Manager) error {
		tr, err := expectations.NewOwnerTracker(expectations.OwnerOptions{Name: "owner-" + ns, For: &corev1.ConfigMap{}, Cache: mgr.GetCache()})
		if err != nil {
			return err
		}
		c := mgr.GetClient()
		return ctrl.NewControllerManagedBy(mgr).Named("owner-" + ns).For(&corev1.ConfigMap{}).
			WatchesRawSource(tr.Source()).
			Complete(reconcileFunc(func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
				if req.Namespace != ns { // a cluster-wide cache sees every ConfigMap
					return ctrl.Result{}, nil
				}
				var owner corev1.ConfigMap
				if err := c.Get(ctx, req.NamespacedName, &owner); err != nil {
					return ctrl.Result{}, client.IgnoreNotFound(err)
				}
				cerr := tr.Check(ctx, &owner)
				var children corev1.SecretList
				if err := c.List(ctx, &children, client.InNamespace(ns), client.MatchingLabels{"owner": owner.Name}); err != nil {
					return ctrl.Result{}, err
				}
				mu.Lock()
				visits = append(visits, len(children.Items))
				checkErr = append(checkErr, cerr)
				mu.Unlock()
				if cerr != nil || len(children.Items) > 0 {
					return ctrl.Result{}, nil // no requeue: only an event may come back
				}
				s := newOwnedSecret(t, &owner)
				if err := c.Create(ctx, s); err != nil {
					return ctrl.Result{}, err
				}
				return ctrl.Result{}, tr.ExpectWrite(ctx, &owner, s)
			}))
	})
	createOwner(t, direct, ns)
	waitFor(t, "a second reconcile of the owner", func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(visits) >= 2, nil
	})
	mu.Lock()
	defer mu.Unlock()
	if visits[0] != 0 || checkErr[0] != nil {
		t.Fatalf("first reconcile saw %d children, check %v; want 0, nil", visits[0], checkErr[0])
	}
	if visits[1] != 1 || checkErr[1] != nil {
		t.Errorf("woken reconcile saw %d children, check %v; want the caught-up cache: 1 child, nil", visits[1], checkErr[1])
	}
}

type listCase struct {
	name           string
	lag, jitter    time.Duration
	multiNamespace bool
	mode           listMode
}

// listMode is how the list-then-create controller is protected.
type listMode string

const (
	listNaive   listMode = "naive"   // not at all
	listGuarded listMode = "guarded" // OwnerTracker.Check at entry, ExpectWrite after Create
	listClient  listMode = "client"  // the drop-in Client, wrapped in requeue.UntilSettled
)

// testListThenCreate is the ReplicaSet problem: "list my children from the
// cache, create one if there is none", requeued every 20 ms, under a watch
// lag (with jitter up to lc.jitter). Naive, it creates duplicates; with the
// owner Check in front (and requeue.OnStale), or through the drop-in Client
// (whose Get of the owner refuses while its children's cache lags, and a
// requeue.UntilSettled that turns that refusal into a short requeue), exactly one
// child.
func testListThenCreate(t *testing.T, cfg *rest.Config, direct client.Client, lc listCase) {
	guarded := lc.mode == listGuarded
	ns := fmt.Sprintf("list-%d-%t-%s", lc.lag.Milliseconds(), lc.multiNamespace, lc.mode)
	testenv.Namespace(t, direct, ns)
	var seenChild atomic.Int64 // reconciles that saw the child in the cache
	var jitter func() time.Duration
	if lc.jitter > 0 {
		jitter = func() time.Duration { return rand.N(lc.jitter) }
	}
	ownerManagerIn(t, cfg, ns, lc.multiNamespace, lc.lag, jitter, func(mgr ctrl.Manager) error {
		tr, err := expectations.NewOwnerTracker(expectations.OwnerOptions{Name: "owner-" + ns, For: &corev1.ConfigMap{}, Cache: mgr.GetCache()})
		if err != nil {
			return err
		}
		var c client.Client = mgr.GetClient()
		wrap := func(r reconcile.Reconciler) reconcile.Reconciler { return r }
		if lc.mode == listClient {
			tracker := expectations.New(expectations.Options{Name: "client-" + ns})
			if c, err = expectations.NewClient(mgr.GetClient(), expectations.ClientOptions{Tracker: tracker, Owners: tr, APIReader: mgr.GetAPIReader()}); err != nil {
				return err
			}
			guarded := c.(*expectations.Client)
			wrap = func(r reconcile.Reconciler) reconcile.Reconciler {
				return requeue.UntilSettled(guarded.Guard(r), requeue.UntilSettledOptions[reconcile.Request]{Name: "client-" + ns, StaleAfter: 20 * time.Millisecond})
			}
		}
		return ctrl.NewControllerManagedBy(mgr).Named("owner-" + ns).For(&corev1.ConfigMap{}).Owns(&corev1.Secret{}).
			WatchesRawSource(tr.Source()).
			Complete(wrap(reconcileFunc(func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
				if req.Namespace != ns { // a cluster-wide cache sees every ConfigMap
					return ctrl.Result{}, nil
				}
				var owner corev1.ConfigMap
				if err := c.Get(ctx, req.NamespacedName, &owner); err != nil {
					return ctrl.Result{}, client.IgnoreNotFound(err)
				}
				if guarded {
					if err := tr.Check(ctx, &owner); err != nil {
						return requeue.OnStale(err, 20*time.Millisecond)
					}
				}
				var children corev1.SecretList
				if err := c.List(ctx, &children, client.InNamespace(ns), client.MatchingLabels{"owner": owner.Name}); err != nil {
					return ctrl.Result{}, err
				}
				if len(children.Items) > 0 {
					seenChild.Add(1)
					return ctrl.Result{RequeueAfter: 20 * time.Millisecond}, nil
				}
				s := newOwnedSecret(t, &owner)
				if err := c.Create(ctx, s); err != nil {
					return ctrl.Result{}, err
				}
				if guarded {
					if err := tr.ExpectWrite(ctx, &owner, s); err != nil {
						return ctrl.Result{}, err
					}
				}
				return ctrl.Result{RequeueAfter: 20 * time.Millisecond}, nil
			})))
	})
	createOwner(t, direct, ns)
	// Run until the cache has shown the children for a while, then count
	// them on the server.
	waitFor(t, "reconciles that see a child in the cache", func(context.Context) (bool, error) {
		return seenChild.Load() >= 5, nil
	})
	var onServer corev1.SecretList
	if err := direct.List(t.Context(), &onServer, client.InNamespace(ns), client.MatchingLabels{"owner": "owner"}); err != nil {
		t.Fatal(err)
	}
	got := len(onServer.Items)
	t.Logf("%s controller: %d children on the server", lc.mode, got)
	if lc.mode != listNaive && got != 1 {
		t.Errorf("%s controller created %d children, want exactly 1", lc.mode, got)
	}
	if lc.mode == listNaive && got < 2 {
		t.Errorf("naive controller created %d children; under a %s lag it must duplicate, or this test proves nothing", got, lc.lag)
	}
}

type reconcileFunc func(context.Context, ctrl.Request) (ctrl.Result, error)

func (f reconcileFunc) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return f(ctx, req)
}
