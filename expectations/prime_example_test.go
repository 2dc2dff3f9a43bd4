package expectations_test

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/racesafe/racesafe/expectations"
)

// ExampleTracker_Prime is a new leader: the old one moved item to rv 20
// and deleted old; this replica's cache still shows item at rv 10, and
// old. After Prime, neither is handed out until the cache catches up.
func ExampleTracker_Prime() {
	cm := func(name, rv string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), ResourceVersion: rv}}
	}
	server := interceptor.NewClient(fake.NewClientBuilder().WithObjects(cm("item", "20")).Build(), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			err := c.List(ctx, list, opts...)
			list.SetResourceVersion("30") // the API server's list version
			return err
		},
	})
	cache := fake.NewClientBuilder().WithObjects(cm("item", "10"), cm("old", "5")).Build()

	tracker := expectations.New(expectations.Options{Name: "example-prime"})
	res, err := tracker.Prime(context.Background(), server, cache, &corev1.ConfigMapList{})
	if err != nil {
		panic(err)
	}
	fmt.Printf("listed %d at rv %s: %d behind, %d gone\n", res.Listed, res.ResourceVersion, res.Behind, res.Gone)

	reader := expectations.NewReader(cache, tracker)
	for _, name := range []string{"item", "old"} {
		err := reader.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, &corev1.ConfigMap{})
		fmt.Println(name, "stale:", errors.Is(err, expectations.ErrStale))
	}
	// Output:
	// listed 1 at rv 30: 1 behind, 1 gone
	// item stale: true
	// old stale: true
}

// ExampleTracker_Prime_onElection primes a tracker when its replica is
// elected: a runnable in the leader-election group, which the reconciler
// waits for before it acts on any object.
func ExampleTracker_Prime_onElection() {
	var mgr ctrl.Manager // from ctrl.NewManager with LeaderElection
	tracker := expectations.New(expectations.Options{Name: "replicaset", Scheme: mgr.GetScheme()})
	primed := make(chan struct{})
	err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return nil
		}
		res, err := tracker.Prime(ctx, mgr.GetAPIReader(), mgr.GetCache(), &appsv1.ReplicaSetList{})
		if err != nil {
			return err
		}
		ctrl.LoggerFrom(ctx).Info("primed", "behind", res.Behind, "gone", res.Gone)
		close(primed)
		return nil
	}))
	if err != nil {
		panic(err)
	}
}
