package expectations_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/racesafe/racesafe/expectations"
	"github.com/racesafe/racesafe/requeue"
)

// A controller that lists its children from the cache and creates one when
// there is none guards its reconcile with the owner check, records each
// child it creates, and passes the tracker's Source to the builder so that
// the owner is reconciled again as soon as the cache shows the child.
func ExampleOwnerTracker() {
	var mgr ctrl.Manager // from ctrl.NewManager
	if mgr == nil {
		return // the example only compiles: it needs a running manager
	}
	owners, err := expectations.NewOwnerTracker(expectations.OwnerOptions{
		Name:  "replicaset",
		For:   &appsv1.ReplicaSet{},
		Cache: mgr.GetCache(),
	})
	if err != nil {
		panic(err)
	}
	c := mgr.GetClient()
	reconcile := func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
		var rs appsv1.ReplicaSet
		if err := c.Get(ctx, req.NamespacedName, &rs); err != nil {
			if client.IgnoreNotFound(err) == nil {
				owners.Forget(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name}})
			}
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		// Before any List of children: has the cache seen what we wrote?
		if err := owners.Check(ctx, &rs); err != nil {
			return requeue.OnStale(err, time.Second)
		}
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(rs.Namespace), client.MatchingLabels(rs.Spec.Selector.MatchLabels)); err != nil {
			return ctrl.Result{}, err
		}
		if len(pods.Items) == 0 {
			pod := &corev1.Pod{ /* generateName, labels, controller reference */ }
			if err := c.Create(ctx, pod); err != nil {
				return ctrl.Result{}, err
			}
			// pod now holds the server's answer and its resourceVersion.
			if err := owners.ExpectWrite(ctx, &rs, pod); err != nil {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{}, nil
	}
	_ = ctrl.NewControllerManagedBy(mgr).
		For(&appsv1.ReplicaSet{}).
		Owns(&corev1.Pod{}).
		WatchesRawSource(owners.Source()).
		Complete(reconcileFunc(reconcile))
}

// Check never blocks: a cache behind the child's Create is an
// *OwnerStaleError, which requeue.OnStale turns into a short requeue.
func ExampleOwnerTracker_Check() {
	store := &fakeVersionStore{rv: "41"} // the Secret informer's store version
	informers := &fakeOwnerCache{inf: storeInformer{fakeOwnedInformer: &fakeOwnedInformer{}, store: store}}
	owners, err := expectations.NewOwnerTracker(expectations.OwnerOptions{
		Name: "example-owner", For: &corev1.ConfigMap{}, Cache: informers,
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	owner := ownerCM("o1")
	created := child("default", "child-x7k2p", "c1", "42") // as the server answered the Create
	if err := owners.ExpectWrite(ctx, owner, created); err != nil {
		panic(err)
	}

	err = owners.Check(ctx, owner)
	var stale *expectations.OwnerStaleError
	fmt.Println(errors.As(err, &stale), stale.Want, stale.Seen)
	res, err := requeue.OnStale(err, time.Second)
	fmt.Println(res.RequeueAfter, err)

	store.set("42") // the watch delivered the child
	fmt.Println(owners.Check(ctx, owner))
	// Output:
	// true 42 41
	// 1s <nil>
	// <nil>
}
