package scenario_test

import (
	"testing"
	"time"

	"github.com/racesafe/racesafe/examples/workitem/scenario"
	"github.com/racesafe/racesafe/internal/testenv"
)

// kube-apiserver is stopped a third of the way through the delete burst
// and started again on the same etcd; the controller, left alone, finishes:
// every item gone, none holding its finalizer, each with exactly one child,
// deleted before the item.
func TestRacesafeSurvivesAPIServerRestart(t *testing.T) {
	env, restarter := testenv.StartRestartable(t, withCRD)

	const items = 30
	rep, err := scenario.RunAPIServerRestart(t.Context(), env.Config, scenario.RestartOptions{
		Items:   items,
		Lag:     200 * time.Millisecond,
		Timeout: 90 * time.Second,
		// Stopped as soon as the deletes are sent and killed a second later,
		// while every uninstall (3 s) is still running: they finish while
		// the server is down, and every release has to wait for it.
		StopAfter:         0,
		UninstallDuration: 3 * time.Second,
		Restarter:         restarter,
	})
	if err != nil {
		t.Fatalf("RunAPIServerRestart: %v", err)
	}
	t.Logf("deleted %d/%d stuck %d, gone at stop %d, at start %d, down %s (%v), elapsed %s",
		rep.Deleted, rep.Items, rep.Stuck, rep.GoneAtStop, rep.GoneAtStart, rep.Downtime, rep.DownErr, rep.Elapsed)
	counts := restarter.Counts()
	t.Logf("API server restarted %d times, %d killed after the graceful stop timed out", counts.Restarts, counts.Kills)
	t.Logf("%d reconciles (%d errors), %d releases; %v", rep.Reconciles, rep.ReconcileErrors, rep.Releases, rep.Leftovers)

	// The fault happened: the API server was restarted once, refused a
	// request while down, and items were still left to delete after it.
	if counts.Restarts != 1 {
		t.Fatalf("API server started again %d times; want 1", counts.Restarts)
	}
	if rep.DownErr == nil {
		t.Fatal("a request to the stopped API server succeeded: it was not down")
	}
	if rep.GoneAtStart >= items {
		t.Fatalf("%d of %d items gone when the API server served again: nothing was left to recover", rep.GoneAtStart, items)
	}

	// It recovered by itself: nothing stuck, no child doubled or left
	// behind.
	if rep.Deleted != items || rep.Stuck != 0 || rep.StuckWithFinalizer != 0 {
		t.Fatalf("deleted %d of %d, stuck %d (%d with finalizer)", rep.Deleted, items, rep.Stuck, rep.StuckWithFinalizer)
	}
	if rep.Releases < items-rep.GoneAtStart {
		t.Fatalf("%d releases for the %d items gone after the restart: a release is missing from the count", rep.Releases, items-rep.GoneAtStart)
	}
	if rep.DuplicateChildren != 0 || rep.LeftChildren != 0 {
		t.Fatalf("%d duplicate children, %d left behind; want none", rep.DuplicateChildren, rep.LeftChildren)
	}
	// An uninstall done whose release the stop made fail is run again; the
	// installer is idempotent per UID. Only items not gone at the stop can
	// have one.
	// The manager lives through the outage, so it remembers which uninstalls
	// finished and retries only the release (reconciler.go, uninstalled).
	if rep.DuplicateUninstalls != 0 {
		t.Fatalf("%d duplicate uninstalls across the API server restart, want 0", rep.DuplicateUninstalls)
	}
}
