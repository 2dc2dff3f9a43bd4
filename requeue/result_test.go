package requeue

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/racesafe/racesafe/expectations"
)

func TestAfter(t *testing.T) {
	for _, tt := range []struct {
		d, want time.Duration
	}{
		{5 * time.Second, 5 * time.Second},
		{time.Nanosecond, time.Nanosecond},
		{0, DefaultInterval},
		{-time.Minute, DefaultInterval},
	} {
		res, err := After(tt.d)
		if err != nil || res != (reconcile.Result{RequeueAfter: tt.want}) {
			t.Errorf("After(%v) = %+v, %v; want RequeueAfter %v, nil", tt.d, res, err, tt.want)
		}
	}
}

func TestAfterInterval(t *testing.T) {
	for _, tt := range []struct {
		name string
		i    Interval
		want time.Duration
	}{
		{"fixed", Fixed(time.Minute), time.Minute},
		{"nil", nil, DefaultInterval},
		{"zero", func() time.Duration { return 0 }, DefaultInterval},
	} {
		res, err := AfterInterval(tt.i)
		if err != nil || res != (reconcile.Result{RequeueAfter: tt.want}) {
			t.Errorf("%s: AfterInterval = %+v, %v; want RequeueAfter %v, nil", tt.name, res, err, tt.want)
		}
	}
}

func TestNoRetry(t *testing.T) {
	cause := apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "worker")
	wrapped := fmt.Errorf("read template: %w", cause)
	res, err := NoRetry(wrapped)
	if !res.IsZero() {
		t.Errorf("result = %+v, want empty", res)
	}
	if !errors.Is(err, reconcile.TerminalError(nil)) {
		t.Errorf("errors.Is(%v, TerminalError) = false", err)
	}
	if !errors.Is(err, wrapped) || !apierrors.IsNotFound(err) {
		t.Errorf("cause lost through NoRetry: %v", err)
	}

	_, err = NoRetry(nil)
	if !errors.Is(err, reconcile.TerminalError(nil)) || !errors.Is(err, ErrNilNoRetry) {
		t.Errorf("NoRetry(nil) = %v, want a terminal ErrNilNoRetry", err)
	}
}

func TestOnStale(t *testing.T) {
	stale := fmt.Errorf("get workitem: %w", &expectations.StaleError{
		Key:  client.ObjectKey{Namespace: "default", Name: "item"},
		Want: "12",
		Seen: "9",
	})
	other := errors.New("boom")
	tests := []struct {
		name    string
		err     error
		after   time.Duration
		want    reconcile.Result
		wantErr error
	}{
		{"stale", stale, 2 * time.Second, reconcile.Result{RequeueAfter: 2 * time.Second}, nil},
		{"stale, zero delay", stale, 0, reconcile.Result{RequeueAfter: DefaultStaleAfter}, nil},
		{"stale, negative delay", stale, -time.Second, reconcile.Result{RequeueAfter: DefaultStaleAfter}, nil},
		{"other error", other, time.Second, reconcile.Result{}, other},
		{"nil", nil, time.Second, reconcile.Result{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := OnStale(tt.err, tt.after)
			if res != tt.want || err != tt.wantErr { //nolint:errorlint // identity: passed through unchanged
				t.Errorf("OnStale = %+v, %v; want %+v, %v", res, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestDeprecatedNamesBehaveAsTheNewOnes: Floor, FloorOptions, Terminal and
// ErrNilTerminal, published before UntilSettled and NoRetry, still compile
// and do what they did.
func TestDeprecatedNamesBehaveAsTheNewOnes(t *testing.T) {
	_, err := Terminal(nil)
	if !errors.Is(err, reconcile.TerminalError(nil)) || !errors.Is(err, ErrNilTerminal) || !errors.Is(err, ErrNilNoRetry) {
		t.Errorf("Terminal(nil) = %v, want a terminal ErrNilTerminal that is ErrNilNoRetry", err)
	}
	var empty reconcile.TypedFunc[string] = func(context.Context, string) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	}
	var f *FloorReconciler[string] = Floor(empty, FloorOptions[string]{Name: "deprecated-floor", Interval: Fixed(3 * time.Second)})
	res, err := f.Reconcile(t.Context(), "x")
	if err != nil || res.RequeueAfter != 3*time.Second {
		t.Errorf("Floor without Settled = %+v, %v; want a requeue after 3s", res, err)
	}
}
