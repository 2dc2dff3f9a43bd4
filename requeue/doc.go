// Package requeue makes every way out of a reconcile an explicit one: after a
// delay, after a configured interval, terminal, or back soon because the cache
// was stale. It exists so that no branch of a controller can end a reconcile
// with ctrl.Result{}, nil by accident.
//
// # The race
//
// In the incident (see the racesafe package) a switch on a phase that a stale
// cache read had just rolled back fell into its default branch:
//
//	default:
//		return ctrl.Result{}, nil
//
// An empty result with no error tells controller-runtime that the object is
// done until the next watch event. The controller's predicates dropped
// status-only events, so no event ever came: the object kept its finalizer
// and stayed in Terminating. The hand fix requeued after the configured
// interval instead:
//
//	default:
//		return ctrl.Result{RequeueAfter: r.ConfigManager.Get().SyncStatusCheckInterval}, nil
//
// With this package the same branch reads
//
//	default:
//		return requeue.AfterInterval(r.checkInterval)
//
// where r.checkInterval is an [Interval] that reads the configuration on
// every call, and [UntilSettled] catches the branches nobody thought of.
//
// # Guarantees
//
//   - Never zero: [After], [AfterInterval], [OnStale] on a stale read,
//     [Interval.Duration], [Fixed] and [Jitter] produce a positive delay. A zero, negative or
//     nil interval becomes [DefaultInterval]; a zero or negative stale delay
//     becomes [DefaultStaleAfter]. A configuration that says 0 cannot turn a
//     requeue into "never".
//
//   - Live: an Interval is a function read at the moment a result is built,
//     so an interval changed in a hot-reloaded configuration applies to the
//     next reconcile, without a restart.
//
//   - Bounded jitter: [Jitter] spreads requeues over [d, d·(1+maxFactor)) and
//     never below the interval it jitters, for any maxFactor (+Inf, NaN and
//     negative included) and any draw; a zero, negative or NaN maxFactor or
//     draw adds nothing, and a delay beyond the largest time.Duration is
//     capped there. Its random source can be injected.
//
//   - Quiet on stale reads: [OnStale] turns an expectations.ErrStale into a
//     short RequeueAfter with a nil error, so the rate limiter does not back
//     off and the log shows no error for what is an expected, transient state.
//
//   - NoRetry unwraps: [NoRetry] wraps reconcile.TerminalError, so
//     errors.Is, errors.As and apierrors.IsX still see the cause. A nil
//     error becomes a terminal [ErrNilNoRetry], never a success.
//
//   - UntilSettled: [UntilSettled] wraps any reconciler. An empty result with no error for
//     a request that its Settled function reports unsettled is replaced by a
//     requeue after the Interval, logged through the context's logger and
//     counted in racesafe_requeue_floor_total{controller,reason} on
//     controller-runtime's metrics registry. A nil Settled reports every
//     request unsettled; an error from Settled is returned wrapped, so the
//     request is retried rather than dropped. Errors and explicit requeues
//     pass through untouched, without a call to Settled, except an error
//     that errors.Is expectations.ErrStale: UntilSettled turns it into a requeue
//     after StaleAfter with a nil error, as OnStale does, counted in
//     racesafe_requeue_floor_stale_total{controller}. An UntilSettled around a nil
//     reconciler returns [ErrNilReconciler], never panics.
//
//   - Settled from the object: [SettledWhen] reads the request's object
//     and asks a func about it; an object that is gone is settled, a read
//     refused as stale is unsettled (reason "stale"), any other read error
//     is returned, and a T that is not a pointer to a struct is an error,
//     never "settled".
//
// # What it does not do
//
//   - It never sets the deprecated Result.Requeue field: a requeue through
//     the rate limiter is for errors, and errors say so by being returned.
//   - It does not decide what "settled" means. UntilSettled asks the caller; a
//     Settled function that always answers true makes UntilSettled a no-op.
//   - It does not retry by itself or block: it only builds results for
//     controller-runtime's work queue.
//   - It does not deduplicate or rate-limit requeues; the work queue already
//     collapses several AddAfter calls for one key.
package requeue
