package racetest_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/racesafe/racesafe/internal/testenv"
	"github.com/racesafe/racesafe/racetest"
)

// TestEnvtest shares one API server between the tests that need one: each
// start costs seconds on a small machine.
func TestEnvtest(t *testing.T) {
	env := testenv.Start(t, testenv.Options{CRDs: []*apiextensionsv1.CustomResourceDefinition{testenv.OpenCRD(itemGVK, "items", true)}})
	t.Run("LaggedCacheServesStaleReadsForTheDelay", func(t *testing.T) {
		testStaleWindow(t, env.Config, 300*time.Millisecond)
	})
	t.Run("NoLagSeesTheWrite", func(t *testing.T) {
		testStaleWindow(t, env.Config, 0)
	})
	t.Run("StoppedCacheLeavesNoLagGoroutine", func(t *testing.T) {
		testBodyClose(t, env.Config)
	})
	t.Run("CounterCountsAKnownSequence", func(t *testing.T) {
		testCounter(t, env.Config)
	})
	t.Run("FaultsReachEveryWriteOfTheManagersClient", func(t *testing.T) {
		testManagerFaults(t, env.Config)
	})
	t.Run("AppliedFaultsReachTheServer", func(t *testing.T) {
		testAppliedFaultsReachTheServer(t, env.Config)
	})
	t.Run("PrimitivesConvergeUnderAppliedFaults", func(t *testing.T) {
		testPrimitivesConvergeUnderAppliedFaults(t, env.Config)
	})
	t.Run("BrokenWatchesResume", func(t *testing.T) {
		testBrokenWatchesResume(t, env.Config)
	})
	t.Run("ExpectationsHoldAcrossARelist", func(t *testing.T) {
		testExpectationsAcrossARelist(t, env.Config)
	})
	t.Run("ControllerSurvivesAmbiguousWritesAndBrokenWatches", func(t *testing.T) {
		testControllerSurvivesAmbiguousWritesAndBrokenWatches(t, env.Config)
	})
	t.Run("FailoverCrashAndHandover", func(t *testing.T) {
		testFailover(t, env.Config)
	})
	t.Run("FailoverNeedsAStandby", func(t *testing.T) {
		testFailoverNeedsAStandby(t, env.Config)
	})
	t.Run("FailoverExpireKeepsTheLease", func(t *testing.T) {
		testFailoverExpire(t, env.Config)
	})
	t.Run("ReapReplacesAnExitedReplica", func(t *testing.T) {
		testReap(t, env.Config)
	})
}

// directClient writes straight to the server, as a controller's client does.
func directClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	hc := httpClient(t, cfg)
	c := testenv.Client(t, cfg, client.Options{HTTPClient: hc})
	return c
}

// httpClient closes its idle connections when t ends, so their goroutines end
// before goleak looks.
func httpClient(t *testing.T, cfg *rest.Config) *http.Client {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { utilnet.CloseIdleConnectionsFor(hc.Transport) })
	return hc
}

func createConfigMap(t *testing.T, c client.Client) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())),
			Namespace: "default",
		},
		Data: map[string]string{"step": "1"},
	}
	if err := c.Create(t.Context(), cm); err != nil {
		t.Fatalf("create: %v", err)
	}
	return cm
}

// waitForRV polls the cache until it serves obj at resourceVersion rv.
func waitForRV(t *testing.T, r client.Reader, obj *corev1.ConfigMap, rv string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true,
		func(ctx context.Context) (bool, error) {
			var got corev1.ConfigMap
			if err := r.Get(ctx, client.ObjectKeyFromObject(obj), &got); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			return got.ResourceVersion == rv, nil
		})
	if err != nil {
		t.Fatalf("cache never served %s at resourceVersion %s: %v", obj.Name, rv, err)
	}
}

// testStaleWindow writes through a direct client and reads through a cache
// whose watch lags by lag. The cache is built the way a manager builds it,
// with the manager's unlagged HTTP client passed in, which LaggedCache must
// replace for the lag to exist at all.
func testStaleWindow(t *testing.T, cfg *rest.Config, lag time.Duration) {
	direct := directClient(t, cfg)
	cm := createConfigMap(t, direct)

	newCache := racetest.LaggedCache(racetest.LagOptions{Delay: lag})
	lagging, err := newCache(cfg, cache.Options{HTTPClient: httpClient(t, cfg)})
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunCache(t.Context(), t, lagging)
	oldRV := cm.ResourceVersion
	waitForRV(t, lagging, cm, oldRV)

	cm.Data["step"] = "2"
	// The event of this update is sent after the update starts, so the lag
	// holds it until at least start+lag.
	start := time.Now()
	if err := direct.Update(t.Context(), cm); err != nil {
		t.Fatalf("update: %v", err)
	}
	newRV := cm.ResourceVersion

	var got corev1.ConfigMap
	if err := lagging.Get(t.Context(), client.ObjectKeyFromObject(cm), &got); err != nil {
		t.Fatalf("cached get: %v", err)
	}
	readAt := time.Since(start)
	switch {
	case lag == 0:
	case readAt < lag && got.ResourceVersion != oldRV:
		t.Fatalf("%v after the update, within the lag of %v, the cache served resourceVersion %s, want the old %s",
			readAt, lag, got.ResourceVersion, oldRV)
	case readAt >= lag:
		t.Logf("the update took %v, longer than the lag: the stale read could not be checked", readAt)
	}

	waitForRV(t, lagging, cm, newRV)
	elapsed := time.Since(start)
	if elapsed < lag {
		t.Fatalf("the cache served the update %v after it started, before the lag of %v", elapsed, lag)
	}
	t.Logf("lag %v: first read served resourceVersion %s, update %s visible after %v", lag, got.ResourceVersion, newRV, elapsed)
}

// testBodyClose stops a lagging cache and checks that no goroutine it started,
// the lag's pumps above all, outlives it.
func testBodyClose(t *testing.T, cfg *rest.Config) {
	direct := directClient(t, cfg)
	cm := createConfigMap(t, direct)
	before := goleak.IgnoreCurrent()

	lagged := racetest.WithWatchLag(cfg, racetest.LagOptions{Delay: 50 * time.Millisecond})
	hc, err := rest.HTTPClientFor(lagged)
	if err != nil {
		t.Fatal(err)
	}
	lagging, err := cache.New(lagged, cache.Options{HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	stop := testenv.RunCache(t.Context(), t, lagging)
	waitForRV(t, lagging, cm, cm.ResourceVersion)

	// Not vacuous: the lag is in the watch path while the cache runs.
	if err := goleak.Find(before); err == nil || !strings.Contains(err.Error(), "(*lagBody).pump") {
		t.Fatalf("no lag goroutine while the cache runs; goleak found: %v", err)
	}
	stop()
	utilnet.CloseIdleConnectionsFor(hc.Transport)
	if err := goleak.Find(before); err != nil {
		t.Fatalf("goroutines outlived the stopped cache: %v", err)
	}
}

// testCounter sends a known sequence of requests and expects exactly it.
func testCounter(t *testing.T, cfg *rest.Config) {
	counted, counter := racetest.CountRequests(cfg)
	c := directClient(t, counted)

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "counted", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/c"}}},
	}
	counter.Reset()
	if err := c.Create(t.Context(), pod); err != nil {
		t.Fatalf("create: %v", err)
	}
	for range 2 {
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(pod), pod); err != nil {
			t.Fatalf("get: %v", err)
		}
	}
	base := pod.DeepCopy()
	pod.Status.Message = "counted"
	if err := c.Status().Patch(t.Context(), pod, client.MergeFrom(base)); err != nil {
		t.Fatalf("status patch: %v", err)
	}
	if err := c.List(t.Context(), &corev1.PodList{}, client.InNamespace("default")); err != nil {
		t.Fatalf("list: %v", err)
	}

	resources := map[racetest.Request]int{}
	for r, n := range counter.Snapshot() {
		if r.Resource != "" { // discovery requests depend on the mapper's cache
			resources[r] = n
		}
	}
	want := map[racetest.Request]int{
		{Verb: "create", Resource: "pods"}:       1,
		{Verb: "get", Resource: "pods"}:          2,
		{Verb: "patch", Resource: "pods/status"}: 1,
		{Verb: "list", Resource: "pods"}:         1,
	}
	if diff := cmp.Diff(want, resources); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if got := counter.Count("patch", "pods/status"); got != 1 {
		t.Errorf(`Count("patch", "pods/status") = %d, want 1`, got)
	}
	if total := counter.Total(); total < 5 {
		t.Errorf("Total() = %d, want at least the 5 resource requests", total)
	}
}

// testManagerFaults wires Faults into a manager as the doc shows: the
// manager's own client fails the write, which never reaches the server.
func testManagerFaults(t *testing.T, cfg *rest.Config) {
	direct := directClient(t, cfg)
	cm := createConfigMap(t, direct)
	faults, err := racetest.NewFaults(racetest.FaultOptions{Seed: 1, Conflict: 1})
	if err != nil {
		t.Fatal(err)
	}
	opts := testenv.ManagerOptions()
	opts.NewClient = faults.NewClient
	mgr, err := manager.New(cfg, opts)
	if err != nil {
		t.Fatalf("manager.New: %v", err)
	}
	t.Cleanup(func() { utilnet.CloseIdleConnectionsFor(mgr.GetHTTPClient().Transport) })

	changed := cm.DeepCopy()
	changed.Data["step"] = "2"
	if err := mgr.GetClient().Update(t.Context(), changed); !apierrors.IsConflict(err) {
		t.Fatalf("Update through the manager's client: %v, want a 409 Conflict", err)
	}
	if got := faults.Injected().Of(racetest.FaultConflict); got != 1 {
		t.Errorf("conflicts injected = %d, want 1", got)
	}
	var live corev1.ConfigMap
	if err := direct.Get(t.Context(), client.ObjectKeyFromObject(cm), &live); err != nil {
		t.Fatal(err)
	}
	if live.Data["step"] != "1" || live.ResourceVersion != cm.ResourceVersion {
		t.Errorf("server has step %q at resourceVersion %s, want the untouched %q at %s",
			live.Data["step"], live.ResourceVersion, "1", cm.ResourceVersion)
	}
}
