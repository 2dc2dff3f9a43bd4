package requeue

import (
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The names below were published before this release and read as something
// they are not: Floor as a minimum delay, Terminal as the phase package's
// terminal phases. They stay, as aliases, for one minor release.

// FloorOptions is [UntilSettledOptions].
//
// Deprecated: use UntilSettledOptions.
type FloorOptions[Req comparable] = UntilSettledOptions[Req]

// FloorReconciler is [UntilSettledReconciler].
//
// Deprecated: use UntilSettledReconciler.
type FloorReconciler[Req comparable] = UntilSettledReconciler[Req]

// Floor is [UntilSettled].
//
// Deprecated: use UntilSettled; Floor read as a minimum delay.
func Floor[Req comparable](r reconcile.TypedReconciler[Req], opts FloorOptions[Req]) *FloorReconciler[Req] {
	return UntilSettled(r, opts)
}

// ErrNilTerminal is [ErrNilNoRetry], the same value, so errors.Is matches
// either.
//
// Deprecated: use ErrNilNoRetry.
var ErrNilTerminal = ErrNilNoRetry

// Terminal is [NoRetry].
//
// Deprecated: use NoRetry; Terminal read as the phase package's terminal
// phases, where a reconcile may end with nothing to do.
func Terminal(err error) (reconcile.Result, error) { return NoRetry(err) }
