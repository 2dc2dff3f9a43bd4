package scenario_test

import (
	"testing"
	"time"

	"github.com/racesafe/racesafe/examples/workitem/scenario"
	"github.com/racesafe/racesafe/internal/testenv"
	"github.com/racesafe/racesafe/racetest"
)

// The leader is stopped a third of the way through the delete burst,
// without giving up its lease as a crash leaves it (the other replica waits
// the lease out) or handing it over; the other replica takes over with
// empty trackers and finishes: every item gone, each with exactly one
// child, deleted before the item.
func TestRacesafeSurvivesLeaderFailover(t *testing.T) {
	env := testenv.Start(t, withCRD)
	for _, tc := range []struct {
		name string
		mode racetest.FailoverMode
		warm bool
		lag  time.Duration
	}{
		{"crash", racetest.Expire, false, 200 * time.Millisecond},
		{"clean handover", racetest.Handover, false, 200 * time.Millisecond},
		// A standby whose informer runs before it leads, elected well within
		// its cache's lag of the old leader's last releases: its cache still
		// shows those items Deleting, holding their finalizer.
		{"clean handover to a warm standby behind a slow watch", racetest.Handover, true, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) { failover(t, env, tc.mode, tc.warm, tc.lag) })
	}
}

func failover(t *testing.T, env *testenv.Env, mode racetest.FailoverMode, warm bool, lag time.Duration) {
	const items = 30
	rep, err := scenario.RunFailover(t.Context(), env.Config, scenario.FailoverOptions{
		Items:             items,
		Lag:               lag,
		Timeout:           30 * time.Second,
		StopAfter:         items / 3,
		UninstallDuration: 300 * time.Millisecond,
		Mode:              mode,
		WarmStandby:       warm,
	})
	if err != nil {
		t.Fatalf("RunFailover: %v", err)
	}
	t.Logf("deleted %d/%d stuck %d, gone at stop %d, elapsed %s; %v",
		rep.Deleted, rep.Items, rep.Stuck, rep.GoneAtStop, rep.Elapsed, rep.Leftovers)
	for _, r := range []scenario.Replica{rep.First, rep.Second} {
		t.Logf("%s: led %v (elected %s, stopped %s), %d reconciles, %d releases",
			r.Name, r.Led, r.Elected, r.Stopped, r.Reconciles, r.Releases)
	}

	// The failover happened: the first replica led from the start and was
	// stopped mid-burst; the second was elected only after that and did
	// the rest of the work.
	if !rep.First.Led || rep.First.Elected >= 0 {
		t.Fatalf("first replica led %v, elected %s after the burst began; want leading before it", rep.First.Led, rep.First.Elected)
	}
	if !rep.Second.Led || rep.Second.Elected <= rep.First.Stopped {
		t.Fatalf("second replica led %v, elected at %s, first stopped at %s; want elected after the stop",
			rep.Second.Led, rep.Second.Elected, rep.First.Stopped)
	}
	if rep.GoneAtStop >= items {
		t.Fatalf("%d of %d items gone when the leader stopped: nothing was left to take over", rep.GoneAtStop, items)
	}
	if rep.Second.Reconciles == 0 || rep.Second.Releases == 0 {
		t.Fatalf("second replica ran %d reconciles and released %d items: it did not take over", rep.Second.Reconciles, rep.Second.Releases)
	}

	// It survived: nothing stuck, nothing released twice, no child doubled
	// or left behind.
	if rep.Deleted != items || rep.Stuck != 0 || rep.StuckWithFinalizer != 0 {
		t.Fatalf("deleted %d of %d, stuck %d (%d with finalizer)", rep.Deleted, items, rep.Stuck, rep.StuckWithFinalizer)
	}
	if got := rep.First.Releases + rep.Second.Releases; got < items {
		t.Fatalf("the replicas sent %d releases (%d + %d) for %d items gone: a release is missing from the count",
			got, rep.First.Releases, rep.Second.Releases, items)
	}
	if rep.DuplicateChildren != 0 || rep.LeftChildren != 0 {
		t.Fatalf("%d duplicate children, %d left behind; want none", rep.DuplicateChildren, rep.LeftChildren)
	}
	// No side effect twice: the old leader finishes the release of an
	// uninstall it saw done although it is stopping, and the new leader's
	// client, primed at election, serves the item released just before the
	// handover as gone rather than its cache's copy (wire's priming, and
	// FinishDeletion from reconciler.Options.FinishTimeout).
	if rep.DuplicateUninstalls != 0 {
		t.Fatalf("%d duplicate uninstalls across the failover, want 0", rep.DuplicateUninstalls)
	}
}
