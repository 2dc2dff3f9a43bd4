package wire_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/racesafe/racesafe/internal/testenv"
	"github.com/racesafe/racesafe/racetest"
	"github.com/racesafe/racesafe/wire"
)

// childManagerOptions are the options both child tests build their manager
// with: its cache on ns alone, Secrets seen secretLag late, metrics and
// probes off.
func childManagerOptions(ns string, secretLag time.Duration) ctrl.Options {
	opts := testenv.ManagerOptions()
	opts.Scheme = clientgoscheme.Scheme
	opts.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}}
	opts.NewCache = racetest.LaggedCache(racetest.LagOptions{
		Delay: secretLag,
		Match: func(r racetest.Request) bool { return r.Resource == "secrets" },
	})
	return opts
}

// childController registers the ReplicaSet problem's controller on mgr:
// "List my children (Secrets labelled with the owner ConfigMap's name)
// from the cache, create one with generateName if there is none", requeued
// every 50 ms. Built by controller-runtime's builder on the manager's
// client, or by wire on its client. seen counts the reconciles that saw a
// child.
func childController(mgr manager.Manager, ns string, wired bool) (seen *atomic.Int64, err error) {
	seen = new(atomic.Int64)
	var c client.Client = mgr.GetClient()
	r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		var owner corev1.ConfigMap
		if err := c.Get(ctx, req.NamespacedName, &owner); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		var list corev1.SecretList
		if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{"owner": owner.Name}); err != nil {
			return reconcile.Result{}, err
		}
		if len(list.Items) > 0 {
			seen.Add(1)
			return reconcile.Result{RequeueAfter: 50 * time.Millisecond}, nil
		}
		return reconcile.Result{RequeueAfter: 50 * time.Millisecond}, c.Create(ctx, ownedChild(&owner))
	})
	if wired {
		b := wire.ControllerManagedBy(mgr)
		c = b.Client()
		return seen, b.Named("children-" + ns).For(&corev1.ConfigMap{}).Owns(&corev1.Secret{}).Complete(r)
	}
	return seen, ctrl.NewControllerManagedBy(mgr).Named("children-" + ns).For(&corev1.ConfigMap{}).Owns(&corev1.Secret{}).Complete(r)
}

func ownedChild(owner *corev1.ConfigMap) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: owner.Namespace, GenerateName: "child-", Labels: map[string]string{"owner": owner.Name}}}
	_ = controllerutil.SetControllerReference(owner, s, clientgoscheme.Scheme)
	return s
}

// bothBuilders starts one envtest and runs run twice on it, as subtests
// "controller-runtime" (wired false) and "wire" (wired true), each in a
// namespace of its own named prefix-<subtest>.
func bothBuilders(t *testing.T, prefix string, run func(t *testing.T, env *testenv.Env, direct client.Client, ns string, wired bool)) {
	t.Helper()
	env := testenv.Start(t, testenv.Options{})
	direct := testenv.Client(t, env.Config, client.Options{Scheme: clientgoscheme.Scheme})
	for _, wired := range []bool{false, true} {
		name := map[bool]string{false: "controller-runtime", true: "wire"}[wired]
		t.Run(name, func(t *testing.T) {
			ns := prefix + "-" + name
			testenv.Namespace(t, direct, ns)
			run(t, env, direct, ns, wired)
		})
	}
}

// judgeChildren judges a children test by the children left on the server:
// the wired controller must leave exactly one; controller-runtime's must
// have made a second, or the race did not happen (race says what should
// have made it) and the test proves nothing.
func judgeChildren(t *testing.T, ns string, wired bool, children int, race string) {
	t.Helper()
	t.Logf("%s: %d children on the server", ns, children)
	if wired && children != 1 {
		t.Errorf("wired controller: %d children, want exactly 1", children)
	}
	if !wired && children < 2 {
		t.Errorf("controller-runtime controller: %d children; %s it must duplicate, or this test proves nothing", children, race)
	}
}
