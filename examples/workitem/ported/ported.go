// Package ported is the incident's controller (examples/workitem/naive, its
// code untouched) made safe by the drop-in port that docs/adopting.md opens
// with: its client wrapped in an expectations.Client, its reconciler guarded
// at entry and wrapped in a requeue.Floor. SetupWithManager is
// naive.Controller.SetupWithManager with the port's changed lines; the guide
// shows the diff.
package ported

import (
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/racesafe/racesafe/examples/workitem/api/v1alpha1"
	"github.com/racesafe/racesafe/examples/workitem/naive"
	"github.com/racesafe/racesafe/expectations"
	"github.com/racesafe/racesafe/requeue"
)

// SetupWithManager registers r, the incident's controller, behind the
// drop-in port. It replaces r.Client with the wrapped client.
func SetupWithManager(mgr ctrl.Manager, r *naive.Controller, name string, opts controller.Options) error {
	owners, err := expectations.NewOwnerTracker(expectations.OwnerOptions{Name: name, For: &v1.WorkItem{}, Cache: mgr.GetCache(), Scheme: mgr.GetScheme()})
	if err != nil {
		return err
	}
	c, err := expectations.NewClient(r.Client, expectations.ClientOptions{Name: name, Owners: owners, APIReader: mgr.GetAPIReader()})
	if err != nil {
		return err
	}
	r.Client = c
	settled := func(it *v1.WorkItem) (bool, string) {
		return it.DeletionTimestamp.IsZero() && (it.Status.Phase == v1.PhaseReady || it.Status.Phase == v1.PhaseFailed), string(it.Status.Phase)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		For(&v1.WorkItem{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.ConfigMap{}).
		WatchesRawSource(owners.Source()).
		WithOptions(opts).
		Complete(requeue.Floor(c.Guard(r), requeue.FloorOptions[reconcile.Request]{Name: name, Interval: r.ConfigManager.SyncStatusCheckInterval, Settled: requeue.SettledWhen(c, settled)}))
}
