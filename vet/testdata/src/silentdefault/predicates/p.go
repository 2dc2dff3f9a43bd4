// Package predicates filters its events with GenerationChangedPredicate:
// no status event brings an object back, so even an unwritten phase's
// silent default is reported.
package predicates

import (
	"example.com/api"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

var filter = predicate.GenerationChangedPredicate{}

func dispatch(w *api.Widget) (ctrl.Result, error) {
	switch w.Status.Phase {
	case api.PhaseRunning:
		return ctrl.Result{RequeueAfter: 1}, nil
	default:
		return ctrl.Result{}, nil // want `GenerationChangedPredicate, so no status event brings the object back`
	}
}
