package statusupdate_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/racesafe/racesafe/statusupdate"
)

// Patch returns the object the server wrote; the caller's object is left as
// it was, so the caller moves on with the returned one.
func ExamplePatcher_Patch() {
	ctx := context.Background()
	c := fake.NewClientBuilder().
		WithStatusSubresource(&corev1.Pod{}).
		WithObjects(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "worker", Namespace: "default"},
			Status:     corev1.PodStatus{Phase: corev1.PodPending},
		}).
		Build()
	var pod corev1.Pod
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "worker"}, &pod); err != nil {
		fmt.Println(err)
		return
	}

	// In a controller: New[*corev1.Pod](mgr.GetClient(), mgr.GetAPIReader(), ...).
	p := statusupdate.New[*corev1.Pod](c, c, statusupdate.Options{})
	written, err := p.Patch(ctx, &pod, func(pod *corev1.Pod) error {
		pod.Status.Phase = corev1.PodRunning
		return nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("held:   ", pod.Status.Phase, pod.ResourceVersion)
	fmt.Println("written:", written.Status.Phase, written.ResourceVersion)

	// Asking for what is already there sends nothing.
	again, err := p.Patch(ctx, written, func(pod *corev1.Pod) error {
		pod.Status.Phase = corev1.PodRunning
		return nil
	})
	fmt.Println("again:  ", again.Status.Phase, again.ResourceVersion, err)
	// Output:
	// held:    Pending 999
	// written: Running 1000
	// again:   Running 1000 <nil>
}

// printRecorder stands in for *expectations.Tracker.
type printRecorder struct{}

func (printRecorder) ExpectWrite(obj client.Object) error {
	fmt.Println("expect write at", obj.GetResourceVersion())
	return nil
}

func (printRecorder) ExpectDeletion(obj client.Object) error {
	fmt.Println("expect deletion of", obj.GetNamespace()+"/"+obj.GetName())
	return nil
}

// PatchObject removes a finalizer. Removing the last one from an object being
// deleted lets the server delete it, and the recorder hears ExpectDeletion.
func ExamplePatcher_PatchObject() {
	ctx := context.Background()
	c := fake.NewClientBuilder().
		WithObjects(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: "worker", Namespace: "default",
			Finalizers:        []string{"example.com/cleanup"},
			DeletionTimestamp: &metav1.Time{Time: time.Now()},
		}}).
		Build()
	var pod corev1.Pod
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "worker"}, &pod); err != nil {
		fmt.Println(err)
		return
	}

	p := statusupdate.New[*corev1.Pod](c, c, statusupdate.Options{Expectations: printRecorder{}})
	if _, err := p.PatchObject(ctx, &pod, func(pod *corev1.Pod) error {
		pod.Finalizers = nil
		return nil
	}); err != nil {
		fmt.Println(err)
		return
	}
	err := c.Get(ctx, client.ObjectKeyFromObject(&pod), &corev1.Pod{})
	fmt.Println("deleted:", apierrors.IsNotFound(err))
	// Output:
	// expect deletion of default/worker
	// deleted: true
}

// When every attempt conflicts, the error says so and still is a conflict.
func ExampleConflictError() {
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "worker", Namespace: "default", ResourceVersion: "1"}}
	c := interceptor.NewClient(fake.NewClientBuilder().WithStatusSubresource(pod).WithObjects(pod).Build(), interceptor.Funcs{
		SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
			return apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "worker", errors.New("the object has been modified"))
		},
	})

	p := statusupdate.New[*corev1.Pod](c, c, statusupdate.Options{
		Backoff: wait.Backoff{Steps: 3, Duration: time.Millisecond, Factor: 1},
	})
	_, err := p.Patch(ctx, pod, func(pod *corev1.Pod) error {
		pod.Status.Phase = corev1.PodRunning
		return nil
	})
	var cerr *statusupdate.ConflictError
	if errors.As(err, &cerr) {
		fmt.Println("attempts:", cerr.Attempts)
	}
	fmt.Println("exhausted:", errors.Is(err, statusupdate.ErrConflictRetriesExhausted))
	fmt.Println("conflict:", apierrors.IsConflict(err))
	fmt.Println(err)
	// Output:
	// attempts: 3
	// exhausted: true
	// conflict: true
	// patch status of default/worker: conflict retries exhausted after 3 attempts: Operation cannot be fulfilled on pods "worker": the object has been modified
}
