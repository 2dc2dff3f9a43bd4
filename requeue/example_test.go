package requeue_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/racesafe/racesafe/expectations"
	"github.com/racesafe/racesafe/requeue"
)

// settings stands in for a hot-reloaded configuration such as the incident's
// r.ConfigManager.Get().
type settings struct {
	syncStatusCheckInterval atomic.Int64
}

// The default branch of a switch on state requeues after the configured
// interval, read when the result is built: a reload applies to the next
// reconcile, and a reload to 0 cannot turn the requeue into "never".
func ExampleAfterInterval() {
	var cfg settings
	cfg.syncStatusCheckInterval.Store(int64(10 * time.Second))
	checkInterval := requeue.Interval(func() time.Duration {
		return time.Duration(cfg.syncStatusCheckInterval.Load())
	})

	res, _ := requeue.AfterInterval(checkInterval)
	fmt.Println(res.RequeueAfter)

	cfg.syncStatusCheckInterval.Store(int64(2 * time.Second))
	res, _ = requeue.AfterInterval(checkInterval)
	fmt.Println(res.RequeueAfter)

	cfg.syncStatusCheckInterval.Store(0)
	res, _ = requeue.AfterInterval(checkInterval)
	fmt.Println(res.RequeueAfter)
	// Output:
	// 10s
	// 2s
	// 30s
}

// A stale cache read comes back soon without an error; any other error is
// returned as it is.
func ExampleOnStale() {
	stale := fmt.Errorf("get workitem: %w", &expectations.StaleError{
		Key:  client.ObjectKey{Namespace: "default", Name: "item"},
		Want: "12",
		Seen: "9",
	})
	res, err := requeue.OnStale(stale, 500*time.Millisecond)
	fmt.Println(res.RequeueAfter, err)

	res, err = requeue.OnStale(errors.New("connection refused"), 500*time.Millisecond)
	fmt.Println(res.RequeueAfter, err)
	// Output:
	// 500ms <nil>
	// 0s connection refused
}

// Jitter spreads requeues of objects that failed together. Tests inject a
// seeded source; controllers leave the default.
func ExampleJitter() {
	src := rand.New(rand.NewPCG(1, 2))
	i := requeue.Jitter(requeue.Fixed(10*time.Second), 0.2, requeue.RandSource(src.Float64))
	for range 3 {
		d := i()
		fmt.Println(d >= 10*time.Second && d < 12*time.Second)
	}
	// Output:
	// true
	// true
	// true
}

// UntilSettled catches a branch that returns an empty result while the object still
// has work to do: here, a reconciler that forgot to requeue in Deleting.
func ExampleUntilSettled() {
	phases := map[string]string{"a": "Deleting", "b": "Deleted"}
	forgetful := reconcile.TypedFunc[string](func(context.Context, string) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	})
	r := requeue.UntilSettled(forgetful, requeue.UntilSettledOptions[string]{
		Name:     "workitem",
		Interval: requeue.Fixed(15 * time.Second),
		Settled: func(_ context.Context, name string) (bool, string, error) {
			p := phases[name]
			return p == "Deleted", p, nil
		},
	})
	for _, name := range []string{"a", "b"} {
		res, err := r.Reconcile(context.Background(), name)
		fmt.Println(name, res.RequeueAfter, err)
	}
	// Output:
	// a 15s <nil>
	// b 0s <nil>
}

// incidentConfig and configManager stand in for the incident's configuration,
// reloaded while the controller runs.
type incidentConfig struct{ SyncStatusCheckInterval time.Duration }

type configManager struct {
	cfg atomic.Pointer[incidentConfig]
}

func (m *configManager) Get() *incidentConfig { return m.cfg.Load() }

type incidentReconciler struct {
	ConfigManager *configManager
	checkInterval requeue.Interval
}

// naive is the incident's switch: its default branch ends the reconcile.
func (r *incidentReconciler) naive(phase string) (ctrl.Result, error) {
	switch phase {
	case "Deleted":
		return ctrl.Result{}, nil
	default:
		return ctrl.Result{}, nil
	}
}

// handFixed is the incident's hand fix, which a configuration of 0 undoes.
func (r *incidentReconciler) handFixed(phase string) (ctrl.Result, error) {
	switch phase {
	case "Deleted":
		return ctrl.Result{}, nil
	default:
		return ctrl.Result{RequeueAfter: r.ConfigManager.Get().SyncStatusCheckInterval}, nil
	}
}

// withRequeue says what every branch waits for.
func (r *incidentReconciler) withRequeue(phase string) (ctrl.Result, error) {
	switch phase {
	case "Deleted":
		return ctrl.Result{}, nil
	default:
		return requeue.AfterInterval(r.checkInterval)
	}
}

// The default branch of the incident's switch three ways: the naive one never
// comes back, the hand fix comes back unless the configuration says 0, and
// AfterInterval always comes back.
func Example_defaultBranch() {
	r := &incidentReconciler{ConfigManager: &configManager{}}
	r.checkInterval = func() time.Duration { return r.ConfigManager.Get().SyncStatusCheckInterval }
	for _, interval := range []time.Duration{time.Minute, 0} {
		r.ConfigManager.cfg.Store(&incidentConfig{SyncStatusCheckInterval: interval})
		naive, _ := r.naive("Deleting")
		handFixed, _ := r.handFixed("Deleting")
		withRequeue, _ := r.withRequeue("Deleting")
		fmt.Println(naive.RequeueAfter, handFixed.RequeueAfter, withRequeue.RequeueAfter)
	}
	// Output:
	// 0s 1m0s 1m0s
	// 0s 0s 30s
}
