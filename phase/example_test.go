package phase_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

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
