package expectations_test

import (
	appsv1 "k8s.io/api/apps/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/racesafe/racesafe/expectations"
	"github.com/racesafe/racesafe/requeue"
)

// ExampleClient ports a controller that owns what it creates: wrap its
// client, guard the reconcile's entry, tell the builder to wake owners when
// their children's cache catches up, and put a Floor around it all so a
// refused read is a short requeue.
func ExampleClient() {
	var mgr ctrl.Manager                       // from ctrl.NewManager
	var r reconcile.Reconciler                 // your reconciler, built on c
	var setClient func(c *expectations.Client) // hands c to your reconciler

	owners, err := expectations.NewOwnerTracker(expectations.OwnerOptions{Name: "replicaset", For: &appsv1.ReplicaSet{}, Cache: mgr.GetCache(), Scheme: mgr.GetScheme()})
	if err != nil {
		panic(err)
	}
	c, err := expectations.NewClient(mgr.GetClient(), expectations.ClientOptions{Name: "replicaset", Owners: owners})
	if err != nil {
		panic(err)
	}
	setClient(c)
	err = ctrl.NewControllerManagedBy(mgr).
		For(&appsv1.ReplicaSet{}).
		WatchesRawSource(owners.Source()).
		Complete(requeue.Floor(c.Guard(r), requeue.FloorOptions[reconcile.Request]{Name: "replicaset"}))
	if err != nil {
		panic(err)
	}
}
