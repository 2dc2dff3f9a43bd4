package expectations_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/racesafe/racesafe/expectations"
)

// A write is recorded from the server's answer; the cache is stale until it
// shows that resourceVersion.
func ExampleTracker() {
	t := expectations.New(expectations.Options{Name: "example-tracker"})

	// What the API server returned from our status update.
	written := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: "default", Name: "item", UID: "u1", ResourceVersion: "42",
	}}
	_ = t.ExpectWrite(written)

	// The informer has not delivered the event yet.
	cached := written.DeepCopy()
	cached.ResourceVersion = "41"
	err := t.Check(cached)
	fmt.Println(errors.Is(err, expectations.ErrStale))
	fmt.Println(err)

	// It has now.
	cached.ResourceVersion = "42"
	fmt.Println(t.Check(cached), t.Pending())
	// Output:
	// true
	// stale cache read: ConfigMap default/item is at resourceVersion 41 in the cache, older than 42 written by this controller
	// <nil> 0
}

// A deletion is satisfied by NotFound or by a later incarnation, never by the
// deleted one, even when a finalizer keeps it around.
func ExampleTracker_ExpectDeletion() {
	t := expectations.New(expectations.Options{Name: "example-deletion"})
	deleted := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: "default", Name: "item", UID: "u1", ResourceVersion: "7",
	}}
	_ = t.ExpectDeletion(deleted)

	terminating := deleted.DeepCopy()
	terminating.ResourceVersion = "8" // deletionTimestamp set, finalizer pending
	var stale *expectations.StaleError
	fmt.Println(errors.As(t.Check(terminating), &stale), stale.Deletion)

	// The Get that read NotFound went into an empty ConfigMap.
	fmt.Println(t.CheckAbsent(client.ObjectKeyFromObject(deleted), &corev1.ConfigMap{}), t.Pending())
	// Output:
	// true true
	// <nil> 0
}

// The Reader refuses to overwrite the caller's object with an older cached
// snapshot. A fake client stands in for the manager's cache.
func ExampleReader() {
	cache := fake.NewClientBuilder().WithObjects(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "item", UID: "u1"},
		Data:       map[string]string{"phase": "Failed"},
	}).Build()
	ctx := context.Background()
	var cached corev1.ConfigMap
	_ = cache.Get(ctx, client.ObjectKey{Namespace: "default", Name: "item"}, &cached)

	t := expectations.New(expectations.Options{Name: "example-reader"})
	r := expectations.NewReader(cache, t)

	// Our write moved the phase on; the server answered with a newer
	// resourceVersion the cache has not seen.
	item := cached.DeepCopy()
	item.Data["phase"] = "Deleting"
	item.ResourceVersion = cached.ResourceVersion + "0"
	_ = t.ExpectWrite(item)

	err := r.Get(ctx, client.ObjectKeyFromObject(item), item)
	fmt.Println(errors.Is(err, expectations.ErrStale), item.Data["phase"])
	// Output:
	// true Deleting
}

// OR'ed with GenerationChangedPredicate, Predicate lets through the
// status-only update that a stale reconcile is waiting for, and no other.
func ExamplePredicate() {
	t := expectations.New(expectations.Options{Name: "example-predicate"})
	p := predicate.Or(predicate.GenerationChangedPredicate{}, expectations.Predicate[client.Object](t))

	old := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: "default", Name: "item", UID: "u1", ResourceVersion: "5", Generation: 1,
	}}
	statusOnly := old.DeepCopy()
	statusOnly.ResourceVersion = "6"
	update := event.UpdateEvent{ObjectOld: old, ObjectNew: statusOnly}
	fmt.Println(p.Update(update))

	_ = t.ExpectWrite(statusOnly) // our own status write produced rv 6
	fmt.Println(p.Update(update))
	// Output:
	// false
	// true
}

// reconcileStatus is the code block of the package documentation, as it
// sits in a reconcile.
func reconcileStatus(ctx context.Context, c client.Client, tracker *expectations.Tracker, reader *expectations.Reader,
	key client.ObjectKey, item *corev1.Pod,
) (ctrl.Result, error) {
	if err := c.Status().Update(ctx, item); err != nil {
		return ctrl.Result{}, err
	}
	// item now holds the server's answer.
	if err := tracker.ExpectWrite(item); err != nil {
		return ctrl.Result{}, err
	}
	// Later, in this reconcile or the next one:
	if err := reader.Get(ctx, key, item); errors.Is(err, expectations.ErrStale) {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

// A status write, then a read from a cache that has not seen it: the
// reconcile requeues, and item keeps what the server returned. Two fake
// clients stand in for the API server and the manager's cache.
func Example() {
	ctx := context.Background()
	stored := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "item", UID: "u1", ResourceVersion: "5"},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
	server := fake.NewClientBuilder().WithObjects(stored.DeepCopy()).WithStatusSubresource(&corev1.Pod{}).Build()
	cache := fake.NewClientBuilder().WithObjects(stored.DeepCopy()).Build() // never sees the write
	tracker := expectations.New(expectations.Options{Name: "example"})
	reader := expectations.NewReader(cache, tracker)

	item := stored.DeepCopy()
	item.Status.Phase = corev1.PodRunning
	result, err := reconcileStatus(ctx, server, tracker, reader, client.ObjectKeyFromObject(item), item)
	fmt.Println(result.RequeueAfter, err, item.Status.Phase)
	// Output:
	// 1s <nil> Running
}
