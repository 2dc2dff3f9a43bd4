package wire_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/racesafe/racesafe/expectations"
	"github.com/racesafe/racesafe/internal/testenv"
	"github.com/racesafe/racesafe/wire"
)

func TestNilManagerIsErrBuilder(t *testing.T) {
	b := wire.ControllerManagedBy(nil)
	if b.Client() != nil {
		t.Fatal("a Builder of a nil manager has a client")
	}
	err := b.Named("x").For(&corev1.ConfigMap{}).Complete(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	}))
	if !errors.Is(err, wire.ErrBuilder) {
		t.Fatalf("Complete on a nil manager: got %v, want ErrBuilder", err)
	}
}

// answer is a reconciler whose next result the test sets.
type answer struct {
	calls atomic.Int32
	err   atomic.Pointer[error]
}

func (a *answer) Reconcile(context.Context, reconcile.Request) (reconcile.Result, error) {
	a.calls.Add(1)
	if p := a.err.Load(); p != nil {
		return reconcile.Result{}, *p
	}
	return reconcile.Result{}, nil
}

func (a *answer) set(err error) { a.err.Store(&err) }

func TestIntegrationBuilder(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := t.Context()
	mgrOpts := testenv.ManagerOptions()
	mgrOpts.Scheme = clientgoscheme.Scheme
	mgr, err := ctrl.NewManager(env.Config, mgrOpts)
	if err != nil {
		t.Fatal(err)
	}
	skipNameValidation := true
	opts := controller.Options{SkipNameValidation: &skipNameValidation}

	t.Run("Misuse", func(t *testing.T) {
		r := &answer{}
		for name, b := range map[string]*wire.Builder{
			"no For":           wire.ControllerManagedBy(mgr).Named("nofor").WithOptions(opts),
			"negative requeue": wire.ControllerManagedBy(mgr).Named("neg").For(&corev1.Secret{}).WithOptions(opts).WithWiring(wire.Options{StaleRequeue: -time.Second}),
			"negative finish":  wire.ControllerManagedBy(mgr).Named("negf").For(&corev1.Secret{}).WithOptions(opts).WithWiring(wire.Options{FinishDeletion: -time.Second}),
			"nil reconciler":   wire.ControllerManagedBy(mgr).Named("nilr").For(&corev1.Secret{}).WithOptions(opts),
		} {
			var err error
			if name == "nil reconciler" {
				err = b.Complete(nil)
			} else {
				err = b.Complete(r)
			}
			if !errors.Is(err, wire.ErrBuilder) {
				t.Errorf("%s: got %v, want ErrBuilder", name, err)
			}
		}
	})

	r := &answer{}
	b := wire.ControllerManagedBy(mgr)
	if b.Client() == nil {
		t.Fatal("no client")
	}
	ctl, err := b.For(&corev1.ConfigMap{}).Owns(&corev1.Secret{}).WithOptions(opts).Build(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Complete(r); !errors.Is(err, wire.ErrBuilder) {
		t.Fatalf("a second Complete: got %v, want ErrBuilder", err)
	}

	testenv.Run(ctx, t, mgr)
	testenv.SyncInformers(ctx, t, mgr.GetCache())

	direct := testenv.Client(t, env.Config, client.Options{Scheme: clientgoscheme.Scheme})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "wired"}}
	if err := direct.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: "wired"}}

	t.Run("ReconcilesTheForKind", func(t *testing.T) {
		deadline := time.Now().Add(30 * time.Second)
		for r.calls.Load() == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the ConfigMap was never reconciled")
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	t.Run("StaleIsAShortRequeueWithoutError", func(t *testing.T) {
		r.set(&expectations.ListStaleError{Reason: "test"})
		res, err := ctl.Reconcile(ctx, req)
		if err != nil || res.RequeueAfter != wire.DefaultStaleRequeue {
			t.Fatalf("got (%+v, %v), want RequeueAfter %v and no error", res, err, wire.DefaultStaleRequeue)
		}
	})

	t.Run("OtherErrorsPassThrough", func(t *testing.T) {
		boom := errors.New("boom")
		r.set(boom)
		if _, err := ctl.Reconcile(ctx, req); !errors.Is(err, boom) {
			t.Fatalf("got %v, want the reconciler's error", err)
		}
	})

	t.Run("GoneOwnerReachesTheReconciler", func(t *testing.T) {
		r.set(nil)
		before := r.calls.Load()
		gone := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: "never-there"}}
		if _, err := ctl.Reconcile(ctx, gone); err != nil {
			t.Fatal(err)
		}
		if r.calls.Load() != before+1 {
			t.Fatal("the reconciler did not run for an owner that is gone")
		}
	})
}
