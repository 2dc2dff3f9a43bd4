package testenv

import (
	"context"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Starter is what a test runs until it ends: a cache.Cache or a
// manager.Manager.
type Starter interface {
	Start(ctx context.Context) error
}

// Run starts s on a context derived from ctx and returns stop, which
// cancels it, waits for Start to return and fails tb if it returned an
// error. stop runs when tb ends if the test has not called it; calling it
// again does nothing. Waiting for Start to return is what keeps the
// informers' goroutines from outliving the test (goleak checks) and from
// reaching a control plane that Start's cleanup already stopped.
func Run(ctx context.Context, tb testing.TB, s Starter) (stop func()) {
	tb.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("%T stopped with %v", s, err)
		}
	})
	tb.Cleanup(stop)
	return stop
}

// RunCache runs c as [Run] does, then [SyncInformers].
func RunCache(ctx context.Context, tb testing.TB, c cache.Cache, objs ...client.Object) (stop func()) {
	tb.Helper()
	stop = Run(ctx, tb, c)
	SyncInformers(ctx, tb, c, objs...)
	return stop
}

// SyncInformers starts an informer of the running cache c for each of objs
// (a typed, unstructured or metadata-only object: each form is an informer
// of its own) and waits for all of c's informers to sync; tb fails if one
// cannot start or ctx ends first.
func SyncInformers(ctx context.Context, tb testing.TB, c cache.Cache, objs ...client.Object) {
	tb.Helper()
	for _, obj := range objs {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			tb.Fatalf("informer for %T: %v", obj, err)
		}
	}
	if !c.WaitForCacheSync(ctx) {
		tb.Fatal("cache did not sync")
	}
}

// ManagerOptions returns the manager.Options every test's manager starts
// from: no metrics or health listener, which would clash on their ports
// between tests and packages run at once, and controller names not
// checked for uniqueness, since the check is process-wide and a package's
// tests start a manager each.
func ManagerOptions() manager.Options {
	return manager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	}
}

// Client returns a client of cfg built with opts, failing tb if there is
// none: a client that writes straight to the API server, as a controller's
// client does, and reads the live objects.
func Client(tb testing.TB, cfg *rest.Config, opts client.Options) client.Client {
	tb.Helper()
	c, err := client.New(cfg, opts)
	if err != nil {
		tb.Fatalf("client: %v", err)
	}
	return c
}

// Namespace creates the namespace name through c, so that a test's
// objects do not meet another test's on the shared control plane.
func Namespace(tb testing.TB, c client.Client, name string) {
	tb.Helper()
	if err := c.Create(tb.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		tb.Fatalf("create namespace %s: %v", name, err)
	}
}
