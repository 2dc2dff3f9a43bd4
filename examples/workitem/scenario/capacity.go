package scenario

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/racesafe/racesafe/examples/workitem/api/v1alpha1"
)

// CalibrateOptions shape a capacity calibration.
type CalibrateOptions struct {
	Writers int // concurrent writers; default 4, the controllers' MaxConcurrentReconciles
	Items   int // pre-created WorkItems each pass writes once; default 1000
}

// Capacity is what the API server accepted for the delete flow's two kinds
// of write, each sent by Writers concurrent writers as fast as it answered,
// with no client-side rate limit.
type Capacity struct {
	Writers, Items int
	// Status is status merge patches (phase and DryRun condition, with a
	// resourceVersion precondition) of pre-created items, per second.
	Status float64
	// Release is finalizer removals (object merge patches, with a
	// resourceVersion precondition) of pre-created deleting items, per second;
	// each removes the item.
	Release                       float64
	StatusElapsed, ReleaseElapsed time.Duration
}

// Fraction is the share of elapsed the API server would have needed, at the
// calibrated rates, for the given status and object writes: the controller's
// write rate as a fraction of capacity for its own mix of writes. Zero when
// nothing was calibrated or nothing elapsed.
func (c Capacity) Fraction(status, object int, elapsed time.Duration) float64 {
	if c.Status <= 0 || c.Release <= 0 || elapsed <= 0 {
		return 0
	}
	return (float64(status)/c.Status + float64(object)/c.Release) / elapsed.Seconds()
}

// MinimalFlowItems is items per second at capacity for a delete flow of
// the minimum two writes: one status write and one release per item.
func (c Capacity) MinimalFlowItems() float64 {
	if c.Status <= 0 || c.Release <= 0 {
		return 0
	}
	return 1 / (1/c.Status + 1/c.Release)
}

// Calibrate measures Capacity against the API server cfg reaches, in a
// namespace of its own: it creates the items with the finalizer (not timed),
// patches each one's status once (timed), deletes them (not timed) and
// releases each one (timed).
func Calibrate(ctx context.Context, cfg *rest.Config, o CalibrateOptions) (Capacity, error) {
	orDefault(&o.Writers, 4)
	orDefault(&o.Items, 1000)
	c := Capacity{Writers: o.Writers, Items: o.Items}
	cl, err := newCluster(ctx, cfg, "calibrate")
	if err != nil {
		return c, err
	}
	defer cl.close(ctx)
	direct, ns := cl.direct, cl.ns

	items := make([]*v1.WorkItem, o.Items)
	if _, err := parallel(o.Writers, o.Items, func(i int) error {
		items[i] = &v1.WorkItem{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("item-%04d", i), Namespace: ns, Finalizers: []string{v1.Finalizer},
		}, Spec: v1.WorkItemSpec{Payload: fmt.Sprintf("payload-%d", i)}}
		return direct.Create(ctx, items[i])
	}); err != nil {
		return c, fmt.Errorf("create: %w", err)
	}
	if c.StatusElapsed, err = parallel(o.Writers, o.Items, func(i int) error {
		it := items[i]
		before := it.DeepCopy()
		it.Status.Phase = v1.PhaseDeleting
		meta.SetStatusCondition(&it.Status.Conditions, metav1.Condition{
			Type: v1.ConditionDryRun, Status: metav1.ConditionFalse, Reason: "Calibration",
		})
		return direct.Status().Patch(ctx, it, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	}); err != nil {
		return c, fmt.Errorf("status patch: %w", err)
	}
	if _, err := parallel(o.Writers, o.Items, func(i int) error { return direct.Delete(ctx, items[i]) }); err != nil {
		return c, fmt.Errorf("delete: %w", err)
	}
	var list v1.WorkItemList
	if err := direct.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return c, err
	}
	if len(list.Items) != o.Items {
		return c, fmt.Errorf("%d of %d deleting items listed", len(list.Items), o.Items)
	}
	if c.ReleaseElapsed, err = parallel(o.Writers, o.Items, func(i int) error {
		it := &list.Items[i]
		before := it.DeepCopy()
		controllerutil.RemoveFinalizer(it, v1.Finalizer)
		return direct.Patch(ctx, it, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	}); err != nil {
		return c, fmt.Errorf("release: %w", err)
	}
	c.Status = float64(o.Items) / c.StatusElapsed.Seconds()
	c.Release = float64(o.Items) / c.ReleaseElapsed.Seconds()
	return c, nil
}

// parallel runs do(0..n-1) on writers goroutines, each taking the next index,
// and returns how long they took and the first error.
func parallel(writers, n int, do func(i int) error) (time.Duration, error) {
	var (
		mu    sync.Mutex
		next  int
		first error
		g     sync.WaitGroup
	)
	take := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if next >= n || first != nil {
			return 0, false
		}
		next++
		return next - 1, true
	}
	t0 := time.Now()
	for range writers {
		g.Go(func() {
			for i, ok := take(); ok; i, ok = take() {
				if err := do(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	g.Wait()
	return time.Since(t0), first
}
