package expectations_test

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/racesafe/racesafe/expectations"
)

// ExampleClient ports a controller by wrapping its client: its Gets and
// Lists then serve its own writes, so nothing else in the reconciler or the
// builder changes, and nothing polls settled objects. The rare refusal (a
// write it cannot show, an ambiguous write it could not read back) is an
// error matching ErrStale, retried as any reconcile error is.
func ExampleClient() {
	var mgr ctrl.Manager                       // from ctrl.NewManager
	var r reconcile.Reconciler                 // your reconciler, built on c
	var setClient func(c *expectations.Client) // hands c to your reconciler

	c, err := expectations.ForManager(mgr, expectations.ClientOptions{Name: "replicaset"})
	if err != nil {
		panic(err)
	}
	setClient(c)
	err = ctrl.NewControllerManagedBy(mgr).
		For(&appsv1.ReplicaSet{}).
		Owns(&corev1.Pod{}).
		Complete(r)
	if err != nil {
		panic(err)
	}
}
