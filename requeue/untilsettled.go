package requeue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/racesafe/racesafe/expectations"
)

// ErrNilReconciler is returned by a [UntilSettledReconciler] that wraps no
// reconciler.
var ErrNilReconciler = errors.New("requeue: UntilSettled wraps a nil reconciler")

// ReasonNoSettledFunc is the reason label counted when [UntilSettledOptions].Settled
// is nil, which makes every empty result a requeue.
const ReasonNoSettledFunc = "no settled func"

// ReasonUnspecified is the reason label counted when Settled reports an
// unsettled request without a reason.
const ReasonUnspecified = "unspecified"

// UntilSettledOptions configure [UntilSettled].
type UntilSettledOptions[Req comparable] struct {
	// Name labels the metric and the log lines, typically the controller name.
	// Empty (the zero value) counts under controller="", which works but
	// joins no controller-runtime series; set it.
	Name string

	// Interval is the delay of a requeue that UntilSettled adds; nil means
	// [DefaultInterval]. It is read on every replaced result.
	Interval Interval

	// Settled reports whether req is in a state that needs no further
	// reconcile until a watch event: a terminal phase, or a wait whose event
	// the controller's predicates let through. When it is not, reason names
	// the state in a few words; it becomes a metric label, so it must come
	// from a small fixed set (a phase name, never an object name or an error
	// text). It is called only after the wrapped reconciler returned an empty
	// result with no error, typically reading the object from the cache.
	//
	// An error from Settled is returned from Reconcile, wrapped, so the
	// request is retried with backoff rather than dropped. A nil Settled
	// counts every request as unsettled, reason [ReasonNoSettledFunc].
	Settled func(ctx context.Context, req Req) (settled bool, reason string, err error)

	// StaleAfter is the delay of the requeue UntilSettled returns in place of an
	// error that errors.Is expectations.ErrStale (a stale read refused, a
	// phase that moved under a stale copy), as [OnStale] does; zero or
	// negative means [DefaultStaleAfter].
	StaleAfter time.Duration
}

// UntilSettledReconciler is the reconciler [UntilSettled] returns. It is safe for
// concurrent use if the wrapped reconciler and Settled are.
type UntilSettledReconciler[Req comparable] struct {
	inner reconcile.TypedReconciler[Req]
	opts  UntilSettledOptions[Req]
}

// UntilSettled wraps r so that an empty result cannot end the reconcile of a request
// that is not settled. When r returns an empty result and a nil error, UntilSettled
// asks opts.Settled about the request; unless it is settled, UntilSettled returns
// RequeueAfter opts.Interval instead, logs it and counts it in
// racesafe_requeue_floor_total{controller,reason}. An error from r and a result
// that already requeues pass through untouched, without calling Settled.
//
// An error that errors.Is expectations.ErrStale becomes a requeue after
// opts.StaleAfter with a nil error, as [OnStale] makes it, counted in
// racesafe_requeue_floor_stale_total{controller}: the cache will catch up, and an
// error would only feed the rate limiter's backoff. So a reconciler that
// returns the errors of an expectations.Client or a phase.Machine as they
// are needs no change at its return sites.
//
// UntilSettled is a safety net under a state machine, not its logic: each count is
// a branch that should have said what it waits for.
func UntilSettled[Req comparable](r reconcile.TypedReconciler[Req], opts UntilSettledOptions[Req]) *UntilSettledReconciler[Req] {
	return &UntilSettledReconciler[Req]{inner: r, opts: opts}
}

// Reconcile implements reconcile.TypedReconciler.
func (f *UntilSettledReconciler[Req]) Reconcile(ctx context.Context, req Req) (reconcile.Result, error) {
	if f == nil || f.inner == nil {
		return reconcile.Result{}, ErrNilReconciler
	}
	res, err := f.inner.Reconcile(ctx, req)
	if errors.Is(err, expectations.ErrStale) {
		floorStaleTotal.WithLabelValues(f.opts.Name).Inc()
		log.FromContext(ctx).V(1).Info("stale read; requeueing", "floor", f.opts.Name, "reason", err.Error())
		return OnStale(err, f.opts.StaleAfter)
	}
	if err != nil || requeues(res) {
		return res, err
	}

	reason := ReasonNoSettledFunc
	if f.opts.Settled != nil {
		settled, why, err := f.opts.Settled(ctx, req)
		if err != nil {
			return res, fmt.Errorf("requeue.UntilSettled %q: check whether %v is settled: %w", f.opts.Name, req, err)
		}
		if settled {
			return res, nil
		}
		reason = why
		if reason == "" {
			reason = ReasonUnspecified
		}
	}

	res.RequeueAfter = f.opts.Interval.Duration()
	floorTotal.WithLabelValues(f.opts.Name, reason).Inc()
	log.FromContext(ctx).Info("reconcile ended without a requeue on an unsettled object; requeueing",
		"floor", f.opts.Name, "reason", reason, "requeueAfter", res.RequeueAfter)
	return res, nil
}

// requeues reports whether controller-runtime will requeue after res, which
// it does for a positive RequeueAfter or the deprecated rate-limited flag.
// The flag is compared as part of the struct rather than named, so that this
// package never touches the deprecated field; Priority alone requeues nothing.
func requeues(res reconcile.Result) bool {
	return res.RequeueAfter > 0 ||
		res != reconcile.Result{Priority: res.Priority, RequeueAfter: res.RequeueAfter}
}
