package scenario_test

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/racesafe/racesafe/examples/workitem/scenario"
	"github.com/racesafe/racesafe/internal/testenv"
	"github.com/racesafe/racesafe/racetest"
)

// lockedJitter is a jitter source safe for the lag transport's goroutines.
func lockedJitter(seed uint64, upTo time.Duration) func() time.Duration {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, seed+1))
	return func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return time.Duration(rng.Int64N(int64(upTo)))
	}
}

// Children are decided from a cached List. Under watch lag the naive
// controller's requeue (the install poll) lists before the cache has seen
// the child it created and creates another; racesafe's owner check refuses
// that List until the cache has caught up, so it creates exactly one child
// per item and deletes it before releasing the item. Both are counted on
// the server.
func TestOwnedChildrenUnderLag(t *testing.T) {
	env := testenv.Start(t, withCRD)

	const items = 24
	for _, lag := range []struct {
		name   string
		lag    time.Duration
		jitter func() time.Duration
	}{
		{"200ms", 200 * time.Millisecond, nil},
		{"100ms+jitter", 100 * time.Millisecond, lockedJitter(3, 100*time.Millisecond)},
	} {
		o := scenario.Options{Items: items, Lag: lag.lag, Jitter: lag.jitter, Timeout: 20 * time.Second}
		t.Run("naive duplicates children/"+lag.name, func(t *testing.T) {
			n := o
			n.Timeout = 5 * time.Second // naive leaves its items stuck; children are counted all the same
			rep := run(t, env, scenario.Naive, n)
			if rep.DuplicateChildren == 0 {
				t.Fatalf("naive created no duplicate child under %s lag: the reproducer does not reproduce", lag.name)
			}
		})
		t.Run("racesafe creates one child per item/"+lag.name, func(t *testing.T) {
			rep := run(t, env, scenario.Racesafe, o)
			if rep.Stuck != 0 || rep.Deleted != items {
				t.Fatalf("racesafe: deleted %d of %d, stuck %d", rep.Deleted, items, rep.Stuck)
			}
			if rep.DuplicateChildren != 0 || rep.LeftChildren != 0 || rep.DuplicateUninstalls != 0 {
				t.Fatalf("racesafe: %d duplicate children, %d left behind, %d duplicate uninstalls; want none",
					rep.DuplicateChildren, rep.LeftChildren, rep.DuplicateUninstalls)
			}
			if got := rep.ChildRequests["delete"]; got != items {
				t.Fatalf("racesafe deleted %d children in the burst, want one per item (%d)", got, items)
			}
		})
	}
}

// The racesafe delete flow is two WorkItem writes per item: the transition
// to Deleting carrying the DryRun condition, and the compare-and-swap
// release of the finalizer.
func TestRacesafeDeleteFlowIsTwoWritesPerItem(t *testing.T) {
	env := testenv.Start(t, withCRD)

	const items = 24
	rep := run(t, env, scenario.Racesafe, scenario.Options{Items: items, Lag: 100 * time.Millisecond, Timeout: 20 * time.Second})
	if rep.Stuck != 0 {
		t.Fatalf("racesafe left %d of %d items stuck", rep.Stuck, items)
	}
	if got := rep.WritesPerItem(); got != 2 {
		t.Fatalf("racesafe sent %.2f WorkItem writes per item in the burst (%v), want 2", got, rep.Requests)
	}
	if rep.Requests["patch"] != 2*items || rep.Requests["update"] != 0 {
		t.Fatalf("racesafe burst requests %v: want %d patches and no update", rep.Requests, 2*items)
	}
}

// A release the API server fails (a 500 on the finalizer patch) is retried
// without asking the installer again: the uninstall that finished runs
// once, counted by the installer.
func TestFailedReleaseDoesNotUninstallAgain(t *testing.T) {
	env := testenv.Start(t, withCRD)
	faults, err := racetest.NewFaults(racetest.FaultOptions{Seed: 7, ServerError: 0.5, Operations: []racetest.Operation{racetest.OpPatch}})
	if err != nil {
		t.Fatal(err)
	}
	const items = 24
	rep := run(t, env, scenario.Racesafe, scenario.Options{Items: items, Lag: 100 * time.Millisecond, Timeout: 30 * time.Second, Faults: faults})
	if n := faults.Injected().Of(racetest.FaultServerError); n == 0 {
		t.Fatal("no server error was injected: the test proves nothing")
	}
	if rep.Stuck != 0 || rep.Deleted != items {
		t.Fatalf("deleted %d of %d, stuck %d", rep.Deleted, items, rep.Stuck)
	}
	if rep.DuplicateUninstalls != 0 {
		t.Fatalf("%d uninstalls ran again after a failed release, want 0", rep.DuplicateUninstalls)
	}
}

// Children's creates and deletes fail under watch lag: some refused with a
// 500, some applied by the server and answered with a 500 or a timeout
// (the caller cannot tell which). The create with generateName that was
// applied is the one that duplicates children. Both racesafe controllers,
// the full port and the incident's code behind the drop-in port, create
// exactly one child per item and delete it, counted on the server.
func TestChildrenUnderCreateAndDeleteFaults(t *testing.T) {
	env := testenv.Start(t, withCRD)
	const items = 24
	for _, c := range []scenario.Kind{scenario.Racesafe, scenario.NaiveClient} {
		t.Run(string(c), func(t *testing.T) {
			faults, err := racetest.NewFaults(racetest.FaultOptions{
				Seed: 11, ServerError: 0.1, AppliedServerError: 0.15, AppliedTimeout: 0.15,
				Operations: []racetest.Operation{racetest.OpCreate, racetest.OpDelete},
			})
			if err != nil {
				t.Fatal(err)
			}
			rep := run(t, env, c, scenario.Options{Items: items, Lag: 200 * time.Millisecond, Timeout: 30 * time.Second, Faults: faults})
			got := faults.Injected()
			t.Logf("%s: injected %v", c, got.Injected)
			for _, op := range []racetest.Operation{racetest.OpCreate, racetest.OpDelete} {
				applied := got.Injected[racetest.Injection{Fault: racetest.FaultAppliedServerError, Operation: op}] +
					got.Injected[racetest.Injection{Fault: racetest.FaultAppliedTimeout, Operation: op}]
				if applied == 0 {
					t.Errorf("no applied fault on a child %s: the test proves nothing there", op)
				}
			}
			if rep.Stuck != 0 || rep.Deleted != items {
				t.Errorf("deleted %d of %d, stuck %d", rep.Deleted, items, rep.Stuck)
			}
			if rep.DuplicateChildren != 0 || rep.LeftChildren != 0 {
				t.Errorf("%d duplicate children, %d left behind; want none", rep.DuplicateChildren, rep.LeftChildren)
			}
		})
	}
}
