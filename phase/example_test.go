package phase_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/racesafe/racesafe/phase"
	"github.com/racesafe/racesafe/requeue"
	"github.com/racesafe/racesafe/statusupdate"
)

// WorkPhase is the phase type of the example; a Pod's status.phase holds it.
type WorkPhase string

const (
	WorkFailed   WorkPhase = "Failed"
	WorkDeleting WorkPhase = "Deleting"
	WorkDeleted  WorkPhase = "Deleted"
)

// The incident's dispatch: a switch on the phase of an object that a helper
// has just re-read from a lagging cache into the same pointer.
func Example_incident() {
	item := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPhase(WorkFailed)}} // the stale re-read
	executeUninstall := func(context.Context, *corev1.Pod) (reconcile.Result, error) {
		return reconcile.Result{RequeueAfter: time.Minute}, nil
	}
	dispatch := func(ctx context.Context, item *corev1.Pod) (reconcile.Result, error) {
		switch WorkPhase(item.Status.Phase) {
		case WorkDeleting:
			return executeUninstall(ctx, item)
		default:
			return reconcile.Result{}, nil
		}
	}
	res, err := dispatch(context.Background(), item)
	fmt.Println("requeue:", !res.IsZero(), "error:", err)
	// Output:
	// requeue: false error: <nil>
}

// The incident's delete flow as a machine: Failed moves to Deleting, and the
// Deleting handler runs in the same reconcile on the written object. The
// helper's re-read into the same pointer cannot send it back to Failed.
func ExampleMachine_Reconcile() {
	ctx := context.Background()
	c := fake.NewClientBuilder().
		WithStatusSubresource(&corev1.Pod{}).
		WithObjects(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "item"},
			Status:     corev1.PodStatus{Phase: corev1.PodPhase(WorkFailed)},
		}).
		Build()
	stale := &corev1.Pod{} // what a lagging cache would return
	_ = c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "item"}, stale)

	m, err := phase.New(phase.Options[*corev1.Pod, WorkPhase]{
		Name:   "workitem",
		Get:    func(p *corev1.Pod) WorkPhase { return WorkPhase(p.Status.Phase) },
		Set:    func(p *corev1.Pod, ph WorkPhase) { p.Status.Phase = corev1.PodPhase(ph) },
		Writer: statusupdate.New[*corev1.Pod](c, c, statusupdate.Options{}),
		Handlers: map[WorkPhase]phase.Handler[*corev1.Pod, WorkPhase]{
			WorkFailed: func(_ context.Context, s *phase.Step[*corev1.Pod, WorkPhase]) (phase.Decision, error) {
				fmt.Println("in", s.Phase(), "-> start deleting")
				return phase.Transition(WorkDeleting), nil
			},
			WorkDeleting: func(_ context.Context, s *phase.Step[*corev1.Pod, WorkPhase]) (phase.Decision, error) {
				stale.DeepCopyInto(s.Object()) // the incident's r.Get into the same pointer
				fmt.Println("in", s.Phase(), "although the object reads", s.Object().Status.Phase)
				return phase.WaitForEvent("uninstall job finishes"), nil
			},
		},
		Transitions: map[WorkPhase][]WorkPhase{
			WorkFailed:   {WorkDeleting},
			WorkDeleting: {WorkDeleted},
		},
		Terminal: []WorkPhase{WorkDeleted},
		Interval: requeue.Fixed(30 * time.Second),
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	item := &corev1.Pod{}
	_ = c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "item"}, item)
	res, err := m.Reconcile(ctx, item)
	fmt.Println("requeue after:", res.RequeueAfter, "error:", err)

	_ = c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "item"}, item)
	fmt.Println("server:", item.Status.Phase)
	// Output:
	// in Failed -> start deleting
	// in Deleting although the object reads Failed
	// requeue after: 0s error: <nil>
	// server: Deleting
}

// A handler in a non-terminal phase that returns Done has forgotten to
// requeue; the machine requeues after the configured interval instead of
// ending the reconcile for good.
func ExampleDone() {
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "item"},
		Status:     corev1.PodStatus{Phase: corev1.PodPhase(WorkDeleting)},
	}
	c := fake.NewClientBuilder().WithStatusSubresource(&corev1.Pod{}).WithObjects(pod).Build()
	m, err := phase.New(phase.Options[*corev1.Pod, WorkPhase]{
		Name:   "forgetful",
		Get:    func(p *corev1.Pod) WorkPhase { return WorkPhase(p.Status.Phase) },
		Set:    func(p *corev1.Pod, ph WorkPhase) { p.Status.Phase = corev1.PodPhase(ph) },
		Writer: statusupdate.New[*corev1.Pod](c, c, statusupdate.Options{}),
		Handlers: map[WorkPhase]phase.Handler[*corev1.Pod, WorkPhase]{
			WorkDeleting: func(context.Context, *phase.Step[*corev1.Pod, WorkPhase]) (phase.Decision, error) {
				return phase.Done(), nil
			},
		},
		Terminal: []WorkPhase{WorkDeleted},
		Interval: requeue.Fixed(15 * time.Second),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := m.Reconcile(ctx, pod)
	fmt.Println("requeue after:", res.RequeueAfter, "error:", err)
	// Output:
	// requeue after: 15s error: <nil>
}

// The delete flow in two writes: the transition to Deleting carries the
// condition it sets, and the flow ends by removing the finalizer instead of
// writing a terminal phase nobody sees once the object is gone. Both are
// compare-and-swap on the pinned phase.
func ExampleRelease() {
	ctx := context.Background()
	key := client.ObjectKey{Namespace: "default", Name: "item"}
	writes := 0
	count := func() { writes++ }
	c := fake.NewClientBuilder().
		WithStatusSubresource(&corev1.Pod{}).
		WithObjects(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "item", Finalizers: []string{"example.com/uninstall"}},
			Status:     corev1.PodStatus{Phase: corev1.PodPhase(WorkFailed)},
		}).
		WithInterceptorFuncs(interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
				count()
				return c.Patch(ctx, obj, p, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
				count()
				return c.SubResource(sub).Patch(ctx, obj, p, opts...)
			},
		}).
		Build()
	item := &corev1.Pod{}
	_ = c.Get(ctx, key, item)
	_ = c.Delete(ctx, item) // the finalizer keeps it
	_ = c.Get(ctx, key, item)

	m, err := phase.New(phase.Options[*corev1.Pod, WorkPhase]{
		Name:   "workitem-release",
		Get:    func(p *corev1.Pod) WorkPhase { return WorkPhase(p.Status.Phase) },
		Set:    func(p *corev1.Pod, ph WorkPhase) { p.Status.Phase = corev1.PodPhase(ph) },
		Writer: statusupdate.New[*corev1.Pod](c, c, statusupdate.Options{}),
		Handlers: map[WorkPhase]phase.Handler[*corev1.Pod, WorkPhase]{
			WorkFailed: func(context.Context, *phase.Step[*corev1.Pod, WorkPhase]) (phase.Decision, error) {
				return phase.TransitionWith(WorkDeleting, func(p *corev1.Pod) error {
					p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
						Type: "Uninstalling", Status: corev1.ConditionTrue,
					})
					return nil
				}), nil
			},
			WorkDeleting: func(context.Context, *phase.Step[*corev1.Pod, WorkPhase]) (phase.Decision, error) {
				// executeUninstall has finished.
				return phase.Release(func(p *corev1.Pod) error {
					controllerutil.RemoveFinalizer(p, "example.com/uninstall")
					return nil
				}), nil
			},
		},
		Transitions: map[WorkPhase][]WorkPhase{WorkFailed: {WorkDeleting}},
		Interval:    requeue.Fixed(30 * time.Second),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := m.Reconcile(ctx, item)
	fmt.Println("requeue:", !res.IsZero(), "error:", err)
	fmt.Println("writes:", writes)
	fmt.Println("gone:", apierrors.IsNotFound(c.Get(ctx, key, &corev1.Pod{})))
	// Output:
	// requeue: false error: <nil>
	// writes: 2
	// gone: true
}
