package phase_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/racesafe/racesafe/internal/metricstest"
	"github.com/racesafe/racesafe/phase"
	"github.com/racesafe/racesafe/statusupdate"
)

// Phase is the test's phase type. A Pod stands for the incident's WorkItem:
// its status.phase is a string type behind the fake client's status
// subresource, which is all the machine needs.
type Phase string

const (
	Pending  Phase = "Pending"
	Running  Phase = "Running"
	Failed   Phase = "Failed"
	Deleting Phase = "Deleting"
	Deleted  Phase = "Deleted"
)

func getPhase(p *corev1.Pod) Phase     { return Phase(p.Status.Phase) }
func setPhase(p *corev1.Pod, ph Phase) { p.Status.Phase = corev1.PodPhase(ph) }

var key = client.ObjectKey{Namespace: "default", Name: "item"}

func newPod(ph Phase, conditions ...corev1.PodCondition) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Status:     corev1.PodStatus{Phase: corev1.PodPhase(ph), Conditions: conditions},
	}
}

// env is an API server (the fake client) and a manager-style client in front
// of it whose reads come from a cache that lags: once frozen, Get returns the
// object as it was at that moment, however often it was written since.
type env struct {
	// server reads and writes the API server directly.
	server client.WithWatch
	// mgrClient writes to the server and reads through the lagging cache,
	// like the manager's client during a burst.
	mgrClient client.WithWatch
	// writer is a real *statusupdate.Patcher that writes through the server
	// and re-reads it after a conflict.
	writer *statusupdate.Patcher[*corev1.Pod]
	// statusPatches counts the status patches that reached the server.
	statusPatches atomic.Int32
	// objectPatches counts the patches of the object itself.
	objectPatches atomic.Int32

	mu       sync.Mutex
	snapshot *corev1.Pod // nil: the cache is in sync
}

func newEnv(t *testing.T, pod *corev1.Pod) *env {
	t.Helper()
	e := &env{}
	e.server = fake.NewClientBuilder().
		WithStatusSubresource(&corev1.Pod{}).
		WithObjects(pod).
		WithInterceptorFuncs(interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				e.objectPatches.Add(1)
				return c.Patch(ctx, obj, patch, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				e.statusPatches.Add(1)
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).
		Build()
	e.mgrClient = interceptor.NewClient(e.server, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			e.mu.Lock()
			snap := e.snapshot
			e.mu.Unlock()
			if snap == nil || k != key {
				return c.Get(ctx, k, obj, opts...)
			}
			snap.DeepCopyInto(obj.(*corev1.Pod))
			return nil
		},
	})
	e.writer = statusupdate.New[*corev1.Pod](e.server, e.server, statusupdate.Options{
		Backoff: wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 5},
	})
	return e
}

// freezeCache makes the cache stop seeing writes: from now on mgrClient.Get
// returns the object as the server holds it now.
func (e *env) freezeCache(t *testing.T) {
	t.Helper()
	snap := e.live(t)
	e.mu.Lock()
	e.snapshot = snap
	e.mu.Unlock()
}

// live reads the object from the server.
func (e *env) live(t *testing.T) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	if err := e.server.Get(t.Context(), key, &p); err != nil {
		t.Fatalf("read the server: %v", err)
	}
	return &p
}

func podOptions(w phase.Writer[*corev1.Pod], handlers map[Phase]phase.Handler[*corev1.Pod, Phase]) phase.Options[*corev1.Pod, Phase] {
	return phase.Options[*corev1.Pod, Phase]{
		Name:     "test",
		Get:      getPhase,
		Set:      setPhase,
		Writer:   w,
		Handlers: handlers,
		Interval: func() time.Duration { return 7 * time.Second },
	}
}

func mustNew(t *testing.T, opts phase.Options[*corev1.Pod, Phase]) *phase.Machine[*corev1.Pod, Phase] {
	t.Helper()
	m, err := phase.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

// writerFunc is a Writer for tests that need to fail or misbehave.
type writerFunc func(ctx context.Context, obj *corev1.Pod, mutate func(*corev1.Pod) error) (*corev1.Pod, error)

func (f writerFunc) Patch(ctx context.Context, obj *corev1.Pod, mutate func(*corev1.Pod) error) (*corev1.Pod, error) {
	return f(ctx, obj, mutate)
}

// PatchObject is the same function: the tests using writerFunc do not tell
// status from the object.
func (f writerFunc) PatchObject(ctx context.Context, obj *corev1.Pod, mutate func(*corev1.Pod) error) (*corev1.Pod, error) {
	return f(ctx, obj, mutate)
}

// counterDelta reads a counter now and returns a function that reports how
// much it has grown since: tests assert deltas, so they pass with -count=2.
func counterDelta(t *testing.T, name string, labels map[string]string) func() float64 {
	t.Helper()
	before := metricstest.CounterValue(t, name, labels)
	return func() float64 {
		t.Helper()
		return metricstest.CounterValue(t, name, labels) - before
	}
}
