package requeue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/racesafe/racesafe/expectations"
)

// key is a request type other than reconcile.Request: UntilSettled is generic.
type key string

func TestUntilSettled(t *testing.T) {
	errInner := errors.New("inner failed")
	errSettled := errors.New("cache unavailable")
	prio := 3
	tests := []struct {
		name       string
		inner      reconcile.Result
		innerErr   error
		settled    bool
		reason     string
		settledErr error
		nilSettled bool
		want       reconcile.Result
		wantErr    error
		wantReason string // the reason counted, "" for no count
		wantAsked  bool
	}{
		{name: "settled", settled: true, want: reconcile.Result{}, wantAsked: true},
		{name: "unsettled", reason: "Deleting", want: reconcile.Result{RequeueAfter: 7 * time.Second},
			wantReason: "Deleting", wantAsked: true},
		{name: "unsettled without reason", want: reconcile.Result{RequeueAfter: 7 * time.Second},
			wantReason: ReasonUnspecified, wantAsked: true},
		{name: "unsettled keeps priority", inner: reconcile.Result{Priority: &prio}, reason: "Failed",
			want: reconcile.Result{RequeueAfter: 7 * time.Second, Priority: &prio}, wantReason: "Failed", wantAsked: true},
		{name: "nil settled func", nilSettled: true, want: reconcile.Result{RequeueAfter: 7 * time.Second},
			wantReason: ReasonNoSettledFunc},
		{name: "inner error passes", innerErr: errInner, inner: reconcile.Result{}, want: reconcile.Result{}, wantErr: errInner},
		{name: "explicit requeue passes", inner: reconcile.Result{RequeueAfter: time.Hour},
			want: reconcile.Result{RequeueAfter: time.Hour}},
		{name: "settled error", settledErr: errSettled, want: reconcile.Result{}, wantErr: errSettled, wantAsked: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "floor-" + t.Name()
			asked := false
			inner := reconcile.TypedFunc[key](func(ctx context.Context, req key) (reconcile.Result, error) {
				return tt.inner, tt.innerErr
			})
			opts := UntilSettledOptions[key]{
				Name:     name,
				Interval: Fixed(7 * time.Second),
				Settled: func(ctx context.Context, req key) (bool, string, error) {
					asked = true
					if req != "item" {
						t.Errorf("Settled got request %q, want %q", req, "item")
					}
					return tt.settled, tt.reason, tt.settledErr
				},
			}
			if tt.nilSettled {
				opts.Settled = nil
			}
			reasons := []string{"Deleting", "Failed", "", ReasonUnspecified, ReasonNoSettledFunc}
			before := make(map[string]float64, len(reasons))
			for _, reason := range reasons {
				before[reason] = counterValue(t, "racesafe_requeue_floor_total", map[string]string{"controller": name, "reason": reason})
			}
			res, err := UntilSettled(inner, opts).Reconcile(t.Context(), "item")

			if res.RequeueAfter != tt.want.RequeueAfter || res.Priority != tt.want.Priority || !res.IsZero() != !tt.want.IsZero() {
				t.Errorf("result = %+v, want %+v", res, tt.want)
			}
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Errorf("error = %v, want %v", err, tt.wantErr)
			}
			if asked != tt.wantAsked {
				t.Errorf("Settled called = %v, want %v", asked, tt.wantAsked)
			}
			for _, reason := range reasons {
				want := 0.0
				if reason == tt.wantReason && tt.wantReason != "" {
					want = 1
				}
				got := counterValue(t, "racesafe_requeue_floor_total", map[string]string{"controller": name, "reason": reason}) - before[reason]
				if got != want {
					t.Errorf("racesafe_requeue_floor_total{controller=%q,reason=%q} rose by %v, want %v", name, reason, got, want)
				}
			}
		})
	}
}

func TestUntilSettledReadsIntervalAtCallTime(t *testing.T) {
	d := time.Second
	inner := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	})
	f := UntilSettled(inner, UntilSettledOptions[reconcile.Request]{
		Name:     "floor-interval",
		Interval: func() time.Duration { return d },
		Settled: func(context.Context, reconcile.Request) (bool, string, error) {
			return false, "Pending", nil
		},
	})
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: "item"}}
	labels := map[string]string{"controller": "floor-interval", "reason": "Pending"}
	before := counterValue(t, "racesafe_requeue_floor_total", labels)
	for _, want := range []time.Duration{time.Second, time.Minute} {
		d = want
		if res, err := f.Reconcile(t.Context(), req); err != nil || res.RequeueAfter != want {
			t.Errorf("Reconcile = %+v, %v; want RequeueAfter %v", res, err, want)
		}
	}
	if got := counterValue(t, "racesafe_requeue_floor_total", labels) - before; got != 2 {
		t.Errorf("floor count rose by %v, want 2", got)
	}
}

func TestUntilSettledNilReconciler(t *testing.T) {
	_, err := UntilSettled[key](nil, UntilSettledOptions[key]{}).Reconcile(t.Context(), "item")
	if !errors.Is(err, ErrNilReconciler) {
		t.Errorf("error = %v, want ErrNilReconciler", err)
	}
	var f *UntilSettledReconciler[key]
	if _, err := f.Reconcile(t.Context(), "item"); !errors.Is(err, ErrNilReconciler) {
		t.Errorf("nil UntilSettledReconciler: error = %v, want ErrNilReconciler", err)
	}
}

// TestUntilSettledLogsEachReplacedResult: a replaced result is logged through the
// context's logger with the floor's name, the reason and the delay; a
// settled request, an error and an explicit requeue log nothing.
func TestUntilSettledLogsEachReplacedResult(t *testing.T) {
	var lines []string
	ctx := log.IntoContext(t.Context(), funcr.New(func(prefix, args string) {
		lines = append(lines, args)
	}, funcr.Options{}))
	settled := map[key]bool{"done": true}
	results := map[key]reconcile.Result{"requeues": {RequeueAfter: time.Minute}}
	inner := reconcile.TypedFunc[key](func(_ context.Context, req key) (reconcile.Result, error) {
		if req == "fails" {
			return reconcile.Result{}, errors.New("inner failed")
		}
		return results[req], nil
	})
	f := UntilSettled(inner, UntilSettledOptions[key]{
		Name:     "floor-log",
		Interval: Fixed(7 * time.Second),
		Settled: func(_ context.Context, req key) (bool, string, error) {
			return settled[req], "Deleting", nil
		},
	})
	for _, req := range []key{"done", "fails", "requeues", "stuck"} {
		_, _ = f.Reconcile(ctx, req)
	}
	if len(lines) != 1 {
		t.Fatalf("logged %d lines, want 1 for the one replaced result: %q", len(lines), lines)
	}
	for _, want := range []string{`"floor"="floor-log"`, `"reason"="Deleting"`, `"requeueAfter"="7s"`} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("log line %s does not hold %s", lines[0], want)
		}
	}
}

// TestUntilSettledTurnsStaleErrorsIntoShortRequeues: a stale read the wrapped
// reconciler returns as an error becomes a requeue after StaleAfter with no
// error, never reaching the rate limiter; other errors still pass through.
func TestUntilSettledTurnsStaleErrorsIntoShortRequeues(t *testing.T) {
	stale := fmt.Errorf("get item: %w", &expectations.StaleError{Want: "10", Seen: "9"})
	for _, tt := range []struct {
		name       string
		staleAfter time.Duration
		want       time.Duration
	}{
		{name: "configured", staleAfter: 300 * time.Millisecond, want: 300 * time.Millisecond},
		{name: "default", want: DefaultStaleAfter},
		{name: "negative", staleAfter: -time.Second, want: DefaultStaleAfter},
	} {
		t.Run(tt.name, func(t *testing.T) {
			name := "floor-" + t.Name()
			asked := false
			f := UntilSettled(reconcile.TypedFunc[key](func(context.Context, key) (reconcile.Result, error) {
				return reconcile.Result{}, stale
			}), UntilSettledOptions[key]{Name: name, StaleAfter: tt.staleAfter,
				Settled: func(context.Context, key) (bool, string, error) { asked = true; return true, "", nil }})
			before := counterValue(t, "racesafe_requeue_floor_stale_total", map[string]string{"controller": name})
			res, err := f.Reconcile(context.Background(), "a")
			if err != nil || res.RequeueAfter != tt.want {
				t.Fatalf("Reconcile = %+v, %v; want RequeueAfter %v, nil", res, err, tt.want)
			}
			if asked {
				t.Error("Settled was asked about a stale read")
			}
			if d := counterValue(t, "racesafe_requeue_floor_stale_total", map[string]string{"controller": name}) - before; d != 1 {
				t.Errorf("racesafe_requeue_floor_stale_total grew by %v, want 1", d)
			}
		})
	}
}
