package statusupdate_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1 "github.com/racesafe/racesafe/examples/workitem/api/v1alpha1"
	"github.com/racesafe/racesafe/statusupdate"
)

// Controller is the incident's reconciler, as far as its updateStatus goes.
type Controller struct {
	client.Client
}

// updateStatus is the incident's status write, shown in the package doc.
func (r *Controller) updateStatus(ctx context.Context, item *v1.WorkItem, phase v1.Phase) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := r.Get(ctx, client.ObjectKeyFromObject(item), item); err != nil {
			return err
		}
		before := item.DeepCopy()
		item.Status.Phase = phase
		return r.Status().Patch(ctx, item, client.MergeFrom(before))
	})
}

// clients is what a write needs of a manager.Manager.
type clients interface {
	GetClient() client.Client
	GetAPIReader() client.Reader
}

var _ clients = manager.Manager(nil)

// testManager stands in for a manager: one fake client for both.
type testManager struct{ c client.Client }

func (m testManager) GetClient() client.Client    { return m.c }
func (m testManager) GetAPIReader() client.Reader { return m.c }

// transition is the package doc's replacement for updateStatus: no Get.
func transition(ctx context.Context, mgr clients, item *v1.WorkItem, phase v1.Phase) (*v1.WorkItem, error) {
	p := statusupdate.New[*v1.WorkItem](mgr.GetClient(), mgr.GetAPIReader(), statusupdate.Options{})
	item, err := p.PatchStatus(ctx, item, func(w *v1.WorkItem) error {
		w.Status.Phase = phase
		return nil
	})
	return item, err
}

// The incident's updateStatus and its replacement from the package doc. The
// fake client has no cache, so the Get here cannot roll item back; in the
// incident it was served by the informer cache and did.
func Example() {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		fmt.Println(err)
		return
	}
	if err := v1.AddToScheme(scheme); err != nil {
		fmt.Println(err)
		return
	}
	c := fake.NewClientBuilder().WithScheme(scheme).
		WithStatusSubresource(&v1.WorkItem{}).
		WithObjects(&v1.WorkItem{
			ObjectMeta: metav1.ObjectMeta{Name: "item", Namespace: "default"},
			Status:     v1.WorkItemStatus{Phase: v1.PhasePending},
		}).
		Build()
	item := &v1.WorkItem{ObjectMeta: metav1.ObjectMeta{Name: "item", Namespace: "default"}}

	r := &Controller{Client: c}
	if err := r.updateStatus(ctx, item, v1.PhaseInstalling); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("incident:", item.Status.Phase, item.ResourceVersion)

	written, err := transition(ctx, testManager{c}, item, v1.PhaseReady)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("patcher: ", written.Status.Phase, written.ResourceVersion)
	// Output:
	// incident: Installing 1000
	// patcher:  Ready 1001
}

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
	written, err := p.PatchStatus(ctx, &pod, func(pod *corev1.Pod) error {
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
	again, err := p.PatchStatus(ctx, written, func(pod *corev1.Pod) error {
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
	_, err := p.PatchStatus(ctx, pod, func(pod *corev1.Pod) error {
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

// A status patch on a kind without a status subresource is answered NotFound
// although the object exists. The error says so, and is not NotFound, so
// client.IgnoreNotFound does not drop it.
func ExampleSubresourceError() {
	ctx := context.Background()
	// The fake, like the API server, gives ConfigMap no status subresource.
	c := fake.NewClientBuilder().
		WithObjects(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "default"}}).
		Build()
	var cm corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "settings"}, &cm); err != nil {
		fmt.Println(err)
		return
	}

	p := statusupdate.New[*corev1.ConfigMap](c, c, statusupdate.Options{})
	_, err := p.PatchStatus(ctx, &cm, func(cm *corev1.ConfigMap) error {
		cm.Data = map[string]string{"mode": "fast"}
		return nil
	})
	fmt.Println("no status subresource:", errors.Is(err, statusupdate.ErrNoStatusSubresource))
	fmt.Println("ignored as NotFound:", client.IgnoreNotFound(err) == nil)
	fmt.Println(err)
	// Output:
	// no status subresource: true
	// ignored as NotFound: false
	// patch status of default/settings: ConfigMap has no status subresource: the server answered NotFound for an object that exists
}
