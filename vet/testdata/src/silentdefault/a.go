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
	return reconcile.Result{}, nil // want `the fall-through past the switch on w.Status.State`
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

// An if-chain over the phase is a switch written out: its final else is
// the default.
func (r *R) chainElse(ctx context.Context, w *api.Widget) (ctrl.Result, error) {
	if err := r.Status().Update(ctx, w); err != nil {
		return ctrl.Result{}, err
	}
	if w.Status.Phase == api.PhasePending {
		return ctrl.Result{RequeueAfter: 1}, nil
	} else if w.Status.Phase == api.PhaseRunning || w.Status.Phase == api.PhaseDeleting {
		return ctrl.Result{RequeueAfter: 2}, nil
	} else {
		return ctrl.Result{}, nil // want `the final else of the if-chain on w.Status.Phase ends the reconcile with an empty result and a nil error: w was written at line`
	}
}

// Without a final else, the statement after the chain is its default.
func (r *R) chainFallThrough(ctx context.Context, w *api.Widget) (ctrl.Result, error) {
	if err := r.Update(ctx, w); err != nil {
		return ctrl.Result{}, err
	}
	if api.PhasePending == w.Status.Phase {
		return ctrl.Result{RequeueAfter: 1}, nil
	} else if w.Status.Phase == api.PhaseDeleting {
		return ctrl.Result{RequeueAfter: 2}, nil
	}
	return ctrl.Result{}, nil // want `the fall-through past the if-chain on w.Status.Phase`
}

// Not reported: a single if on the phase is a guard, not a dispatch.
func (r *R) singleIf(ctx context.Context, w *api.Widget) (ctrl.Result, error) {
	if err := r.Update(ctx, w); err != nil {
		return ctrl.Result{}, err
	}
	if w.Status.Phase == api.PhaseFailed {
		return ctrl.Result{RequeueAfter: 1}, nil
	}
	return ctrl.Result{}, nil
}

// Not reported: the chain mixes the phase with another condition.
func (r *R) mixedChain(ctx context.Context, w *api.Widget, ready bool) (ctrl.Result, error) {
	if err := r.Update(ctx, w); err != nil {
		return ctrl.Result{}, err
	}
	if w.Status.Phase == api.PhasePending {
		return ctrl.Result{RequeueAfter: 1}, nil
	} else if ready {
		return ctrl.Result{RequeueAfter: 2}, nil
	}
	return ctrl.Result{}, nil
}

// Not reported: the chain's else requeues.
func (r *R) chainRequeues(ctx context.Context, w *api.Widget) (ctrl.Result, error) {
	if err := r.Update(ctx, w); err != nil {
		return ctrl.Result{}, err
	}
	if w.Status.Phase == api.PhasePending {
		return ctrl.Result{RequeueAfter: 1}, nil
	} else if w.Status.Phase == api.PhaseRunning {
		return ctrl.Result{}, nil
	} else {
		return ctrl.Result{RequeueAfter: 5}, nil
	}
}

// Not reported: nothing written before the chain, and no
// GenerationChangedPredicate in the package.
func (r *R) chainUnwritten(w *api.Widget) (ctrl.Result, error) {
	if w.Status.Phase == api.PhasePending {
		return ctrl.Result{RequeueAfter: 1}, nil
	} else if w.Status.Phase == api.PhaseRunning {
		return ctrl.Result{RequeueAfter: 2}, nil
	}
	return ctrl.Result{}, nil
}
