// Package ported is the incident's controller (examples/workitem/naive, its
// code untouched) made safe by the drop-in port that docs/adopting.md opens
// with: its SetupWithManager builds the controller through wire instead of
// ctrl.NewControllerManagedBy and gives the reconciler the client wire
// makes, which serves the controller's own writes. SetupWithManager is
// naive.Controller.SetupWithManager with the port's changed lines; the
// guide shows the diff.
package ported

import (
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	v1 "github.com/racesafe/racesafe/examples/workitem/api/v1alpha1"
	"github.com/racesafe/racesafe/examples/workitem/naive"
	"github.com/racesafe/racesafe/wire"
)

// What the incident's controller sends to the API server, for
// controller-gen's RBAC (examples/workitem/config/rbac): items are watched
// and listed by the cache and read live by the wired client when the cache
// is behind its writes; the finalizer goes on with a patch and comes off
// with an update; phase and condition are status patches; children are
// watched and listed by the cache, created and deleted, and read live by name
// when a create or delete ended ambiguously (a timeout). workitems/finalizers:
// see examples/workitem/reconciler.
//
// +kubebuilder:rbac:groups=demo.racesafe.io,resources=workitems,verbs=get;list;watch;patch;update
// +kubebuilder:rbac:groups=demo.racesafe.io,resources=workitems/status,verbs=patch
// +kubebuilder:rbac:groups=demo.racesafe.io,resources=workitems/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;delete

// SetupWithManager registers r, the incident's controller, behind the
// drop-in port. It replaces r.Client with the wired client.
func SetupWithManager(mgr ctrl.Manager, r *naive.Controller, name string, opts controller.Options) error {
	b := wire.ControllerManagedBy(mgr)
	r.Client = b.Client()
	return b.
		Named(name).
		For(&v1.WorkItem{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.ConfigMap{}).
		WithOptions(opts).
		Complete(r)
}
