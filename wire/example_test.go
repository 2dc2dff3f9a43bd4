package wire_test

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	v1 "github.com/racesafe/racesafe/examples/workitem/api/v1alpha1"
	"github.com/racesafe/racesafe/wire"
)

// workItemReconciler is a controller's reconciler as it is before the port:
// it reads and writes through its Client field.
type workItemReconciler struct {
	client.Client
}

func (r *workItemReconciler) Reconcile(context.Context, ctrl.Request) (ctrl.Result, error) {
	return ctrl.Result{}, nil
}

// A SetupWithManager ported to racesafe: the builder chain keeps its shape,
// and the reconciler gets the client that serves its own writes.
func Example() {
	setup := func(mgr ctrl.Manager, r *workItemReconciler) error {
		b := wire.ControllerManagedBy(mgr)
		r.Client = b.Client()
		return b.Named("workitem").
			For(&v1.WorkItem{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
			Owns(&corev1.ConfigMap{}).
			Complete(r)
	}
	_ = setup
}
