package scenario_test

import (
	"strings"
	"testing"
	"time"

	"github.com/racesafe/racesafe/examples/workitem/scenario"
	"github.com/racesafe/racesafe/internal/testenv"
	"github.com/racesafe/racesafe/racetest"
)

// A short soak with every fault at once: lag jitter, 409s, 500s, writes
// applied although the client saw a 500 or a timeout, broken watches and
// 410 Gone relists, a leader failover every 12s (crash, then handover) and
// a kube-apiserver restart every 20s. Each fault must have happened, and
// nothing may be stuck, left or done twice.
func TestSoakSurvivesEveryFault(t *testing.T) {
	if testing.Short() {
		t.Skip("soak: skipped with -short")
	}
	env, restarter := testenv.StartRestartable(t, withCRD)
	var stuck strings.Builder
	rep, err := scenario.Soak(t.Context(), env.Config, scenario.SoakOptions{
		Duration:              40 * time.Second,
		Wave:                  10,
		Seed:                  7,
		Jitter:                scenario.SeededJitter(7, 100*time.Millisecond),
		WatchBreak:            0.01,
		RestartEvery:          8 * time.Second,
		APIServerRestartEvery: 25 * time.Second,
		Restarter:             restarter,
		Describe:              &stuck,
	})
	if err != nil {
		t.Fatalf("Soak: %v\n%s", err, stuck.String())
	}
	t.Logf("created %d gone %d stuck %d finalizers left %d; children %d duplicate %d left; %d duplicate uninstalls (%d after a replica exited)",
		rep.Created, rep.Gone, rep.Stuck, rep.FinalizersLeft, rep.DuplicateChildren, rep.LeftChildren, rep.DuplicateUninstalls, rep.DuplicateUninstallsAfterExit)
	t.Logf("crashes %d handovers %d exits %d API server restarts %d; injected %v; watch broken %v gone %v",
		rep.Crashes, rep.Handovers, rep.Exits, rep.APIServerRestarts, rep.Injected.Injected, rep.Watch.Broken, rep.Watch.Gone)
	t.Logf("goroutines %d -> %d, live heap %d -> %d bytes, slowest wave %s", rep.GoroutinesBefore, rep.GoroutinesAfter, rep.HeapBefore, rep.HeapAfter, rep.SlowestWave)
	if rep.SlowestWave <= 0 {
		t.Errorf("slowest wave %s: no wave was timed", rep.SlowestWave)
	}

	// Every fault happened.
	for _, f := range []racetest.Fault{racetest.FaultConflict, racetest.FaultServerError, racetest.FaultAppliedServerError, racetest.FaultAppliedTimeout} {
		if rep.Injected.Of(f) == 0 {
			t.Errorf("no %q injected", f)
		}
	}
	if sum(rep.Watch.Broken) == 0 {
		t.Error("no watch stream broken")
	}
	if rep.Crashes+rep.Exits == 0 || rep.Handovers == 0 {
		t.Errorf("%d crashes, %d exits, %d handovers; want a crash or an exit, and a handover", rep.Crashes, rep.Exits, rep.Handovers)
	}
	if rep.APIServerRestarts == 0 {
		t.Error("kube-apiserver never restarted")
	}
	// And nothing was lost or done twice.
	if rep.Created == 0 || rep.Stuck != 0 || rep.Gone != rep.Created || rep.FinalizersLeft != 0 {
		t.Errorf("created %d, gone %d, stuck %d, finalizers left %d", rep.Created, rep.Gone, rep.Stuck, rep.FinalizersLeft)
	}
	if rep.DuplicateChildren != 0 || rep.LeftChildren != 0 {
		t.Errorf("%d duplicate children, %d left; want none", rep.DuplicateChildren, rep.LeftChildren)
	}
	// An uninstall is asked for again only after the replica told it was
	// done exited by itself before it could release the item.
	if d := rep.DuplicateUninstalls - rep.DuplicateUninstallsAfterExit; d != 0 {
		t.Errorf("%d duplicate uninstalls (%d after an exit): %d not explained by an exit, want 0",
			rep.DuplicateUninstalls, rep.DuplicateUninstallsAfterExit, d)
	}
	if rep.GoroutinesAfter > rep.GoroutinesBefore {
		t.Errorf("goroutines %d before, %d after the soak", rep.GoroutinesBefore, rep.GoroutinesAfter)
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
