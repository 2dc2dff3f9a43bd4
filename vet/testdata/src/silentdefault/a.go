package silentdefault

import (
	"context"
	"errors"

	"example.com/api"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

type R struct{ client.Client }

// The incident's delete flow: the phase was written, a stale read may have
// put it back, and the default ends the reconcile silently.
func (r *R) deleteFlow(ctx context.Context, w *api.Widget) (ctrl.Result, error) {
	if w.Status.Phase != api.PhaseDeleting {
		w.Status.Phase = api.PhaseDeleting
		if err := r.Status().Update(ctx, w); err != nil {
			return ctrl.Result{}, err
		}
	}
	switch w.Status.Phase {
	case api.PhaseDeleting:
		return ctrl.Result{RequeueAfter: 1}, nil
	default:
		return ctrl.Result{}, nil // want `the default of the switch on w.Status.Phase ends the reconcile with an empty result and a nil error: w was written at line 20`
	}
}

// A fall-through past the switch, with reconcile.Result.
func (r *R) fallThrough(ctx context.Context, w *api.Widget) (reconcile.Result, error) {
	if err := r.Update(ctx, w); err != nil {
		return reconcile.Result{}, err
	}
	switch w.Status.State {
	case "a":
		return reconcile.Result{Requeue: true}, nil
	}
	return reconcile.Result{}, nil // want `the fall-through past the switch of the switch on w.Status.State`
}

// Not reported: nothing written before the switch, and the package has no
// GenerationChangedPredicate.
func (r *R) terminal(w *api.Widget) (ctrl.Result, error) {
	switch w.Status.Phase {
	case api.PhaseRunning:
		return ctrl.Result{RequeueAfter: 1}, nil
	default:
		return ctrl.Result{}, nil
	}
}

// Not reported: the default returns an error.
func (r *R) loud(ctx context.Context, w *api.Widget) (ctrl.Result, error) {
	if err := r.Update(ctx, w); err != nil {
		return ctrl.Result{}, err
	}
	switch w.Status.Phase {
	case api.PhaseRunning:
		return ctrl.Result{}, nil
	default:
		return ctrl.Result{}, errors.New("unexpected phase")
	}
}

// Not reported: the default requeues.
func (r *R) requeues(ctx context.Context, w *api.Widget) (ctrl.Result, error) {
	if err := r.Update(ctx, w); err != nil {
		return ctrl.Result{}, err
	}
	switch w.Status.Phase {
	default:
		return ctrl.Result{RequeueAfter: 5}, nil
	}
}

// Not reported: the switch is not on a phase.
func (r *R) notAPhase(ctx context.Context, w *api.Widget) (ctrl.Result, error) {
	if err := r.Update(ctx, w); err != nil {
		return ctrl.Result{}, err
	}
	switch w.Name {
	default:
		return ctrl.Result{}, nil
	}
}
