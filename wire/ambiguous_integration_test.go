package wire_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/racesafe/racesafe/internal/testenv"
	"github.com/racesafe/racesafe/racetest"
)

// TestIntegrationAmbiguousChildCreateMakesNoDuplicate: "List my children
// from the cache, create one with generateName if there is none", where the
// first Create is applied by the server and answered with a timeout, and the
// cache sees Secrets 300 ms late, on a server that other writes keep busy.
// The controller-runtime controller retries on the lagging List and creates
// a second child; the wired one reads the kind live after the ambiguous
// Create, and neither its guard nor its List lets the retry decide before
// the cache has reached the child's version, and no longer: it sees its
// child within the test's 30 s, where the TTL is 5 minutes.
func TestIntegrationAmbiguousChildCreateMakesNoDuplicate(t *testing.T) {
	bothBuilders(t, "ambiguous", func(t *testing.T, env *testenv.Env, direct client.Client, ns string, wired bool) {
		judgeChildren(t, ns, wired, runChildController(t, env, direct, ns, wired), "with the create applied and a 300 ms lag")
	})
}

func runChildController(t *testing.T, env *testenv.Env, direct client.Client, ns string, wired bool) int {
	var creates atomic.Int64
	faults, err := racetest.NewFaults(racetest.FaultOptions{
		AppliedTimeout: 1,
		Operations:     []racetest.Operation{racetest.OpCreate},
		// Only the first child Create is ambiguous.
		Match: func(_ racetest.Operation, obj client.Object) bool {
			_, secret := obj.(*corev1.Secret)
			return secret && creates.Add(1) == 1
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	opts := childManagerOptions(ns, 300*time.Millisecond)
	opts.NewClient = faults.NewClient
	mgr, err := ctrl.NewManager(env.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	seen, err := childController(mgr, ns, wired)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer testenv.Run(ctx, t, mgr)()
	// A busy server: something else is written every 20 ms (leader
	// election renews leases as often), so the store's version moves on
	// while no Secret event comes. The wired guard must wait for a version
	// the Secrets' own events deliver, or it waits for the TTL.
	noise := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "noise-" + ns}}
	if err := direct.Create(ctx, noise); err != nil {
		t.Fatal(err)
	}
	noiseDone := make(chan struct{})
	go func() {
		defer close(noiseDone)
		for n := 0; ctx.Err() == nil; n++ {
			noise.Data = map[string]string{"n": strconv.Itoa(n)}
			_ = direct.Update(ctx, noise)
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	defer func() { cancel(); <-noiseDone }()
	if err := direct.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"}}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return seen.Load() >= 5, nil
	}); err != nil {
		t.Fatalf("waiting for reconciles that see a child: %v", err)
	}
	t.Logf("5 reconciles saw a child %s after the owner was created", time.Since(start).Round(time.Millisecond))
	if got := faults.Injected().Total(); got != 1 {
		t.Fatalf("faults injected = %d, want the one ambiguous create", got)
	}
	var onServer corev1.SecretList
	if err := direct.List(ctx, &onServer, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return len(onServer.Items)
}
