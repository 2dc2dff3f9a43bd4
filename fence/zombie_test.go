package fence_test

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/racesafe/racesafe/fence"
)

var zombieTrials = flag.Int("zombie.trials", 20, "trials of TestZombieLeader (the issue asks 1000)")

// TestZombieLeader is the racetest-style trial of issue #40: a leader's
// writes are decided under its epoch and held in-process (a paused
// process), another replica takes the lease, and the held writes are
// released once the API server's policy has seen the new lease (the first
// refusal of an old-epoch probe). Every released write must be refused.
// The window is the time from the lease update's acknowledgement to that
// first refusal: writes of the old leader that reach the server inside it
// are still accepted, which is what the trial measures.
func TestZombieLeader(t *testing.T) {
	fx := startFenced(t, true)
	ctx := t.Context()
	const held = 4
	for i := range held {
		u := item(fx.ns, fmt.Sprintf("z%d", i))
		if err := fx.admin.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	holders := []string{"b", "a"}
	transitions := int32(1)
	var windows []time.Duration
	accepted := 0
	for trial := range *zombieTrials {
		old := fence.Epoch{Lease: fx.lease, Holder: holders[(trial+1)%2], Transitions: transitions}
		fx.fence.Set(old)
		// The zombie's writes: decided now, under the old epoch, held at
		// the gate as a paused process holds them.
		gate := make(chan struct{})
		errs := make(chan error, held)
		var wg sync.WaitGroup
		for i := range held {
			wg.Go(func() {
				u := item(fx.ns, fmt.Sprintf("z%d", i))
				patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"status":{"trial":%d}}`, trial))
				errs <- fx.client.Status().Patch(gatedContext(ctx, gate), u, patch)
			})
		}
		// The handover, then the first refusal of the old epoch.
		transitions++
		setLease(t, fx.admin, fx.lease, holders[trial%2], transitions)
		acked := time.Now()
		fx.waitRefused(t, old)
		windows = append(windows, time.Since(acked))
		close(gate)
		wg.Wait()
		close(errs)
		for err := range errs {
			switch {
			case err == nil:
				accepted++
			case !fence.IsFenced(err):
				t.Fatalf("trial %d: held write: %v", trial, err)
			}
		}
	}
	if accepted != 0 {
		t.Errorf("%d of %d old-epoch writes accepted after the policy saw the new lease, want 0", accepted, *zombieTrials*held)
	}
	slices.Sort(windows)
	pct := func(p float64) time.Duration { return windows[int(p*float64(len(windows)-1))] }
	t.Logf("ZombieLeader: %d trials, %d held writes each: %d accepted after the policy saw the new lease; window from lease update to first refusal: p50 %.1fms, p99 %.1fms, max %.1fms",
		*zombieTrials, held, accepted, ms(pct(0.5)), ms(pct(0.99)), ms(windows[len(windows)-1]))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// gatedContext returns ctx whose requests wait at gate before they leave:
// the fenced client stamps the epoch when it is called, and the transport
// sends the request when the gate opens, as a process paused between the
// two would.
func gatedContext(ctx context.Context, gate <-chan struct{}) context.Context {
	return context.WithValue(ctx, gateKey{}, gate)
}

type gateKey struct{}
