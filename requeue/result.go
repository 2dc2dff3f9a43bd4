package requeue

import (
	"errors"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/racesafe/racesafe/expectations"
)

// DefaultStaleAfter replaces a zero or negative delay given to [OnStale]. A
// stale read means the informer cache has not yet seen this controller's own
// write; that usually takes milliseconds, so the requeue is short.
const DefaultStaleAfter = time.Second

// ErrNilNoRetry is the cause of the terminal error [NoRetry] returns when it
// is given a nil error: a branch that meant to give up must not end the
// reconcile as a success by mistake.
var ErrNilNoRetry = errors.New("requeue: NoRetry called with a nil error")

// After returns a result that requeues after d, or after [DefaultInterval]
// when d is zero or negative, and a nil error.
func After(d time.Duration) (reconcile.Result, error) {
	if d <= 0 {
		d = DefaultInterval
	}
	return reconcile.Result{RequeueAfter: d}, nil
}

// AfterInterval returns a result that requeues after i's current delay (see
// [Interval.Duration]) and a nil error. It is the default branch of a switch
// on state:
//
//	default:
//		return requeue.AfterInterval(r.checkInterval)
func AfterInterval(i Interval) (reconcile.Result, error) {
	return reconcile.Result{RequeueAfter: i.Duration()}, nil
}

// NoRetry returns an empty result and err wrapped in reconcile.TerminalError:
// controller-runtime logs and counts it but does not retry the request until
// the next event. errors.Is and errors.As see err through the wrapping, and so
// do apierrors.IsNotFound and its siblings. A nil err becomes a terminal
// [ErrNilNoRetry] rather than a silent success.
//
// It is named for what the request gets, not for the phase package's
// terminal phases, which are where a machine may end with nothing to do.
func NoRetry(err error) (reconcile.Result, error) {
	if err == nil {
		err = ErrNilNoRetry
	}
	return reconcile.Result{}, reconcile.TerminalError(err)
}

// OnStale turns a stale cache read into a short requeue. When err matches
// expectations.ErrStale (a *expectations.StaleError, possibly wrapped), it
// returns a result that requeues after after, or after [DefaultStaleAfter]
// when after is zero or negative, and a nil error: the cache will catch up,
// and an error would only add rate-limiter backoff and a log line that reads
// like a failure. Any other err, including nil, is returned unchanged with an
// empty result, so
//
//	if err := reader.Get(ctx, key, item); err != nil {
//		return requeue.OnStale(err, time.Second)
//	}
//
// requeues a stale read briefly and fails on everything else.
func OnStale(err error, after time.Duration) (reconcile.Result, error) {
	if !errors.Is(err, expectations.ErrStale) {
		return reconcile.Result{}, err
	}
	if after <= 0 {
		after = DefaultStaleAfter
	}
	return reconcile.Result{RequeueAfter: after}, nil
}
