package wire_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/racesafe/racesafe/internal/testenv"
	"github.com/racesafe/racesafe/wire"
)

const finishFinalizer = "racesafe.io/finish-test"

// TestIntegrationFinishDeletionOnStop: a deletion's reconcile does work
// outside the API server (here, 1 s of it), then releases its finalizer.
// The manager is stopped while the work runs. With FinishDeletion the
// reconcile runs on and the release is written; without it (the default)
// its context ends with the stop and the finalizer stays, for the next
// leader to do the work again.
func TestIntegrationFinishDeletionOnStop(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	direct := testenv.Client(t, env.Config, client.Options{Scheme: clientgoscheme.Scheme})
	for _, finish := range []time.Duration{0, 10 * time.Second} {
		name := map[bool]string{false: "default", true: "FinishDeletion"}[finish > 0]
		t.Run(name, func(t *testing.T) {
			ns := "finish-" + map[bool]string{false: "default", true: "set"}[finish > 0]
			testenv.Namespace(t, direct, ns)
			released := runUntilStoppedMidDeletion(t, env, direct, ns, finish)
			cm := &corev1.ConfigMap{}
			err := direct.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "owner"}, cm)
			gone := apierrors.IsNotFound(err)
			if err != nil && !gone {
				t.Fatal(err)
			}
			t.Logf("%s: release sent %v, object gone %v", name, released, gone)
			if finish > 0 && (!released || !gone) {
				t.Errorf("with FinishDeletion the release was sent: %v, the object is gone: %v; want both", released, gone)
			}
			if finish == 0 && (released || gone) {
				t.Errorf("without FinishDeletion the release was sent: %v, the object is gone: %v; want neither (the stop cancels the reconcile)", released, gone)
			}
		})
	}
}

// runUntilStoppedMidDeletion starts a wired controller on ns, deletes its
// object, stops the manager once the deletion's work has started, waits for
// the manager to return, and reports whether the release was sent.
func runUntilStoppedMidDeletion(t *testing.T, env *testenv.Env, direct client.Client, ns string, finish time.Duration) (released bool) {
	opts := testenv.ManagerOptions()
	opts.Scheme = clientgoscheme.Scheme
	mgr, err := ctrl.NewManager(env.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	working := make(chan struct{}, 1)
	releasedCh := make(chan bool, 1)
	b := wire.ControllerManagedBy(mgr)
	c := b.Client()
	r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		if req.Namespace != ns {
			return reconcile.Result{}, nil
		}
		var cm corev1.ConfigMap
		if err := c.Get(ctx, req.NamespacedName, &cm); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		if cm.DeletionTimestamp.IsZero() || !controllerutil.ContainsFinalizer(&cm, finishFinalizer) {
			return reconcile.Result{}, nil
		}
		select {
		case working <- struct{}{}:
		default:
		}
		select { // the uninstall
		case <-ctx.Done():
			return reconcile.Result{}, ctx.Err()
		case <-time.After(time.Second):
		}
		controllerutil.RemoveFinalizer(&cm, finishFinalizer)
		err := c.Update(ctx, &cm)
		if err == nil {
			releasedCh <- true
		}
		return reconcile.Result{}, err
	})
	if err := b.Named("finish-" + ns).For(&corev1.ConfigMap{}).WithWiring(wire.Options{FinishDeletion: finish}).Complete(r); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	stop := testenv.Run(ctx, t, mgr)

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner", Finalizers: []string{finishFinalizer}}}
	if err := direct.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := direct.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	select {
	case <-working:
	case <-time.After(30 * time.Second):
		t.Fatal("the deletion was never reconciled")
	}
	stop()
	select {
	case released = <-releasedCh:
	default:
	}
	if !released {
		// Clean up for the namespace's sake: the test's verdict is taken.
		t.Cleanup(func() {
			var left corev1.ConfigMap
			if direct.Get(context.Background(), client.ObjectKeyFromObject(cm), &left) == nil {
				controllerutil.RemoveFinalizer(&left, finishFinalizer)
				_ = direct.Update(context.Background(), &left)
			}
		})
	}
	return released
}
