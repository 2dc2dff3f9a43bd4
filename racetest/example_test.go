package racetest_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/racesafe/racesafe/racetest"
)

// The same seed gives the same faults, so a failing run can be replayed.
func ExampleFaults() {
	faults, err := racetest.NewFaults(racetest.FaultOptions{
		Seed:       1,
		Conflict:   0.3,
		Operations: []racetest.Operation{racetest.OpStatusPatch},
	})
	if err != nil {
		panic(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}
	base := fake.NewClientBuilder().WithObjects(pod).WithStatusSubresource(pod).Build()
	c := interceptor.NewClient(base, faults.Funcs())

	var outcomes []string
	for range 8 {
		patch := client.MergeFrom(pod.DeepCopy())
		pod.Status.Message += "."
		switch err := c.Status().Patch(context.TODO(), pod, patch); {
		case apierrors.IsConflict(err):
			outcomes = append(outcomes, "409")
		case err != nil:
			panic(err)
		default:
			outcomes = append(outcomes, "ok")
		}
	}
	fmt.Println(strings.Join(outcomes, " "))
	counts := faults.Injected()
	fmt.Println(counts.Of(racetest.FaultConflict), "conflicts in", counts.Calls[racetest.OpStatusPatch], "status patches")
	// Output:
	// 409 ok 409 ok 409 ok ok ok
	// 3 conflicts in 8 status patches
}

// A 429 carries its Retry-After, as a real server's does.
func ExampleFaultOptions_tooManyRequests() {
	faults, err := racetest.NewFaults(racetest.FaultOptions{TooManyRequests: 1, RetryAfterSeconds: 5})
	if err != nil {
		panic(err)
	}
	c := interceptor.NewClient(fake.NewClientBuilder().Build(), faults.Funcs())
	err = c.Update(context.TODO(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "default"}})
	seconds, ok := apierrors.SuggestsClientDelay(err)
	fmt.Println(apierrors.IsTooManyRequests(err), seconds, ok)
	// Output:
	// true 5 true
}

// Rates out of [0, 1] are an error, not a panic.
func ExampleNewFaults_invalidRate() {
	_, err := racetest.NewFaults(racetest.FaultOptions{Conflict: 1.5})
	var optsErr *racetest.FaultOptionsError
	fmt.Println(errors.Is(err, racetest.ErrInvalidFaultOptions), errors.As(err, &optsErr) && optsErr.Field == "Conflict")
	fmt.Println(err)
	// Output:
	// true true
	// invalid fault options: FaultOptions.Conflict = 1.5: a rate must be in [0, 1]
}

// Classify names requests the way Kubernetes authorisation does.
func ExampleClassify() {
	for _, r := range []struct{ method, url string }{
		{"GET", "/apis/racesafe.io/v1alpha1/namespaces/ns/workitems/w"},
		{"GET", "/apis/racesafe.io/v1alpha1/namespaces/ns/workitems"},
		{"GET", "/apis/racesafe.io/v1alpha1/workitems?watch=true&sendInitialEvents=true"},
		{"PATCH", "/apis/racesafe.io/v1alpha1/namespaces/ns/workitems/w/status"},
		{"DELETE", "/api/v1/namespaces/ns/configmaps"},
		{"GET", "/apis/racesafe.io/v1alpha1"},
	} {
		u, err := url.Parse(r.url)
		if err != nil {
			panic(err)
		}
		req := racetest.Classify(r.method, u)
		fmt.Printf("%-6s %-16s %s%s\n", r.method, req.Verb, req.Resource, req.Path)
	}
	// Output:
	// GET    get              workitems
	// GET    list             workitems
	// GET    watch            workitems
	// PATCH  patch            workitems/status
	// DELETE deletecollection configmaps
	// GET    get              /apis/racesafe.io/v1alpha1
}

// A manager whose client writes at once and whose cache sees every write
// 300 ms late.
func ExampleLaggedCache() {
	var cfg *rest.Config // from envtest
	mgr, err := manager.New(cfg, manager.Options{
		NewCache: racetest.LaggedCache(racetest.LagOptions{Delay: 300 * time.Millisecond}),
	})
	_, _ = mgr, err
}

// A cache outside a manager takes the lagged config directly; here with up to
// 100 ms of jitter on top of the delay.
func ExampleWithWatchLag() {
	var cfg *rest.Config // from envtest
	c, err := cache.New(racetest.WithWatchLag(cfg, racetest.LagOptions{
		Delay:  300 * time.Millisecond,
		Jitter: func() time.Duration { return rand.N(100 * time.Millisecond) },
	}), cache.Options{})
	_, _ = c, err
}

// Every write of a manager's client may fail, so every reconciler the
// manager runs meets the faults.
func ExampleFaults_NewClient() {
	var (
		t    *testing.T   // the test's
		cfg  *rest.Config // from envtest
		seed = rand.Uint64()
	)
	faults, err := racetest.NewFaults(racetest.FaultOptions{Seed: seed, Conflict: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("faults seed %d", seed)
	mgr, err := manager.New(cfg, manager.Options{NewClient: faults.NewClient})
	_, _ = mgr, err
}

// An applied fault: the server has the write, the client an error, and the
// caller's object is as it was sent.
func ExampleFaultOptions_applied() {
	faults, err := racetest.NewFaults(racetest.FaultOptions{AppliedTimeout: 1})
	if err != nil {
		panic(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "default"}}
	base := fake.NewClientBuilder().WithObjects(cm).Build()
	c := interceptor.NewClient(base, faults.Funcs())

	sent := cm.DeepCopy()
	sent.Data = map[string]string{"step": "2"}
	err = c.Update(context.TODO(), sent)
	var live corev1.ConfigMap
	if err := base.Get(context.TODO(), client.ObjectKeyFromObject(cm), &live); err != nil {
		panic(err)
	}
	fmt.Println(errors.Is(err, context.DeadlineExceeded), live.Data["step"], sent.ResourceVersion == cm.ResourceVersion)
	fmt.Println(faults.Injected().Of(racetest.FaultAppliedTimeout))
	// Output:
	// true 2 true
	// 1
}

// A manager whose status patches are often applied and reported failed.
func ExampleFaultOptions_ambiguous() {
	var (
		t    *testing.T   // the test's
		cfg  *rest.Config // from envtest
		seed = rand.Uint64()
	)
	faults, err := racetest.NewFaults(racetest.FaultOptions{
		Seed:               seed,
		AppliedServerError: 0.2,
		AppliedTimeout:     0.2,
		Operations:         []racetest.Operation{racetest.OpStatusPatch},
	})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := manager.New(cfg, manager.Options{NewClient: faults.NewClient})
	_, _ = mgr, err
}

// A manager whose informers lose their watches, and the counts that show it.
func ExampleWatchFaults() {
	var (
		t    *testing.T   // the test's
		cfg  *rest.Config // from envtest
		seed = rand.Uint64()
	)
	watches, err := racetest.NewWatchFaults(racetest.WatchFaultOptions{Seed: seed, Break: 0.05, Gone: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := manager.New(cfg, manager.Options{NewCache: watches.NewCache})
	// ... drive a burst, then:
	counts := watches.Counts()
	t.Logf("%d streams broken, %d answered 410, %d lists", counts.Broken["workitems"], counts.Gone["workitems"], counts.Lists["workitems"])
	_, _ = mgr, err
}

// Broken watches behind a lag.
func ExampleLagOptions_watchFaults() {
	var (
		cfg     *rest.Config // from envtest
		watches *racetest.WatchFaults
	)
	mgr, err := manager.New(cfg, manager.Options{
		NewCache: racetest.LaggedCache(racetest.LagOptions{Delay: 300 * time.Millisecond, WatchFaults: watches}),
	})
	_, _ = mgr, err
}

// Outside a manager, Funcs wraps a client.WithWatch.
func ExampleFaults_Funcs() {
	var (
		t      *testing.T   // the test's
		cfg    *rest.Config // from envtest
		faults *racetest.Faults
	)
	base, err := client.NewWithWatch(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := interceptor.NewClient(base, faults.Funcs())
	_ = c
}

// API calls per transition: reset after setup, count after the transition.
func ExampleCountRequests() {
	var (
		t   *testing.T   // the test's
		cfg *rest.Config // from envtest
	)
	counted, counter := racetest.CountRequests(cfg)
	c, err := client.New(counted, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// ... set up, then:
	counter.Reset()
	// ... drive one transition, then:
	t.Logf("%d status patches in %d requests", counter.Count("patch", "workitems/status"), counter.Total())
	_ = c
}

// A manager whose clients are not paced by client-go's rate limiter.
func ExampleWithoutRateLimit() {
	var cfg *rest.Config // from envtest, or any other
	cfg = racetest.WithoutRateLimit(cfg)
	mgr, err := manager.New(cfg, manager.Options{})
	_, _ = mgr, err
}

// kube-apiserver restarted under a controller; the restarter is made before
// env.Start.
func ExampleAPIServerRestarter() {
	var (
		t   *testing.T           // the test's
		ctx = context.TODO()     // the test's
		env *envtest.Environment // not started yet
	)
	restarter, err := racetest.NewAPIServerRestarter(env, racetest.APIServerRestartOptions{CertDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := env.Start()
	// ... start the controller on cfg, then:
	restart, err := restarter.Restart(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("down %v (%v), killed %v", restart.Downtime, restart.DownErr, restart.Killed)
	_ = cfg
}

// Two replicas of a controller; the leader crashes and the other takes over.
func ExampleReplicas_Failover() {
	var (
		t     *testing.T // the test's
		ctx   = context.TODO()
		cfg   *rest.Config // from envtest
		ns    string       // the Lease's namespace
		setup func(mgr manager.Manager, name string) error
	)
	replicas, err := racetest.StartReplicas(ctx, 2, racetest.ReplicaOptions{
		Config:                  cfg,
		Setup:                   setup, // func(mgr manager.Manager, name string) error
		LeaderElectionID:        "workitems",
		LeaderElectionNamespace: ns,
		Replace:                 true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer replicas.Stop()
	f, err := replicas.Failover(ctx, racetest.Crash)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s crashed, %s leads %v later", f.Old, f.New, f.Gap)
}

// ExampleExplore points Explore at a controller: its setup, the work that
// drives it, and when the work is done. It needs a control plane (envtest),
// so it is compiled, not run; examples/workitem/explore runs it on the
// incident's controller.
func ExampleExplore() {
	var cfg *rest.Config // from envtest.Environment.Start
	report, err := racetest.Explore(context.Background(), cfg, racetest.ExploreOptions{
		Scheme: clientgoscheme.Scheme,
		Setup: func(mgr manager.Manager) error {
			return nil // register the controller, as its SetupWithManager does
		},
		Workload: func(ctx context.Context, c client.Client, ns string) error {
			return c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"}})
		},
		Settled: func(ctx context.Context, c client.Reader, ns string) (bool, error) {
			var children corev1.SecretList
			err := c.List(ctx, &children, client.InNamespace(ns))
			return len(children.Items) == 1, err
		},
		Kinds: []client.Object{&corev1.Secret{}},
		// What the controller does outside the API server, per namespace:
		// each count must equal the reference run's.
		SideEffects: func(ns string) map[string]int {
			return map[string]int{"messages sent": 0} // read from the fake the controller calls
		},
		TestName: "TestExplore",
	})
	if err != nil {
		return
	}
	for _, p := range report.Failed() {
		fmt.Println(p.Plan.Name, p.Failures, p.Replay)
	}
}

// ExploreReport.String is what a test logs: each failing plan with the
// perturbation in one sentence, the oracles it failed and the command that
// replays it alone; then each passing plan on one line.
func ExampleExploreReport_String() {
	report := &racetest.ExploreReport{
		Elapsed:   42 * time.Second,
		Reference: racetest.PlanResult{Elapsed: 600 * time.Millisecond},
		Plans: []racetest.PlanResult{{
			Plan:         racetest.Plan{Name: "stale-read-after-write/WorkItem/status-patch#4", Kind: racetest.StaleReadAfterWrite},
			Perturbation: "reconcile #4 of ns/item (controller naive) read WorkItem ns/item from its cache at resourceVersion 941, after the status-patch in reconcile #4 of ns/item (controller naive) of it had been answered resourceVersion 943",
			Failures:     []string{"liveness: the work did not settle within 6s"},
			Elapsed:      6 * time.Second,
			Replay:       "RACESAFE_EXPLORE_PLAN='stale-read-after-write/WorkItem/status-patch#4' go test -run '^TestExplore$' .",
		}, {
			Plan:         racetest.Plan{Name: "crash-after-write/WorkItem/patch#1", Kind: racetest.CrashAfterWrite},
			Perturbation: "the manager stopped right after the patch in reconcile #1 of ns/item (controller naive) of WorkItem ns/item was answered resourceVersion 737, and a new one (fresh memory and cache) took over",
			Elapsed:      time.Second,
		}},
	}
	fmt.Print(report)
	// Output:
	// explored 2 plans in 42s (reference 600ms)
	// FAIL stale-read-after-write/WorkItem/status-patch#4 (6s)
	//   perturbation: reconcile #4 of ns/item (controller naive) read WorkItem ns/item from its cache at resourceVersion 941, after the status-patch in reconcile #4 of ns/item (controller naive) of it had been answered resourceVersion 943
	//   oracle: liveness: the work did not settle within 6s
	//   replay: RACESAFE_EXPLORE_PLAN='stale-read-after-write/WorkItem/status-patch#4' go test -run '^TestExplore$' .
	// ok   crash-after-write/WorkItem/patch#1 (1s): the manager stopped right after the patch in reconcile #1 of ns/item (controller naive) of WorkItem ns/item was answered resourceVersion 737, and a new one (fresh memory and cache) took over
}
