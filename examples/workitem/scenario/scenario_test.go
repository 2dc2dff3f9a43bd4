package scenario_test

import (
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/racesafe/racesafe/examples/workitem/api/v1alpha1"
	"github.com/racesafe/racesafe/examples/workitem/scenario"
	"github.com/racesafe/racesafe/internal/testenv"
	"github.com/racesafe/racesafe/racetest"
)

// One control plane serves every case: each run makes its own namespace.
func TestDeleteBurst(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	env := testenv.Start(t, testenv.Options{CRDDirectoryPaths: []string{"../config/crd"}})

	const items = 30
	base := scenario.Options{Items: items, Lag: 200 * time.Millisecond, Timeout: 20 * time.Second}

	// The reproducer reproduces: with the informer 200ms behind, the write of
	// Deleting is certain not to be in the cache when syncDryRunCondition
	// re-Gets the item, so every delete that starts from Failed falls into
	// default and keeps its finalizer.
	t.Run("naive leaves items stuck", func(t *testing.T) {
		o := base
		o.Timeout = 5 * time.Second // long enough: every item that moves is gone within a second
		rep := run(t, env, scenario.Naive, o)
		if rep.Stuck == 0 || rep.StuckWithFinalizer == 0 {
			t.Fatalf("naive controller deleted every item under lag (stuck %d, with finalizer %d): the reproducer does not reproduce",
				rep.Stuck, rep.StuckWithFinalizer)
		}
	})

	for _, tc := range []struct {
		name string
		opts func(o scenario.Options) scenario.Options
	}{
		{"racesafe under lag", func(o scenario.Options) scenario.Options { return o }},
		{"racesafe without lag", func(o scenario.Options) scenario.Options { o.Lag = 0; return o }},
		{"racesafe across a manager restart", func(o scenario.Options) scenario.Options {
			o.RestartAfter = items / 3
			o.UninstallDuration = 300 * time.Millisecond
			return o
		}},
		{"racesafe with 20% conflicts on writes", func(o scenario.Options) scenario.Options {
			f, err := racetest.NewFaults(racetest.FaultOptions{Seed: 7, Conflict: 0.2})
			if err != nil {
				t.Fatal(err)
			}
			o.Faults = f
			return o
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := run(t, env, scenario.Racesafe, tc.opts(base))
			if rep.Stuck != 0 || rep.Deleted != items || rep.StuckWithFinalizer != 0 {
				t.Fatalf("racesafe: deleted %d of %d, stuck %d (%d with finalizer)", rep.Deleted, items, rep.Stuck, rep.StuckWithFinalizer)
			}
		})
	}
}

func run(t *testing.T, env *testenv.Env, kind scenario.Kind, opts scenario.Options) scenario.Report {
	t.Helper()
	rep, err := scenario.Run(t.Context(), env.Config, kind, opts)
	if err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
	t.Logf("%s: deleted %d/%d stuck %d p50 %s p99 %s requests %v child requests %v reconciles %d; children: %d duplicate, %d left; %d duplicate uninstalls",
		kind, rep.Deleted, rep.Items, rep.Stuck, rep.P50, rep.P99, rep.Requests, rep.ChildRequests, rep.Reconciles,
		rep.DuplicateChildren, rep.LeftChildren, rep.DuplicateUninstalls)
	return rep
}

// Calibrate writes every pre-created item once per pass, so both rates are
// measured over Items writes, and its releases remove every item it made.
func TestCalibrateTimesEveryWriteAndReleasesEveryItem(t *testing.T) {
	env := testenv.Start(t, testenv.Options{CRDDirectoryPaths: []string{"../config/crd"}})
	c, err := scenario.Calibrate(t.Context(), env.Config, scenario.CalibrateOptions{Writers: 2, Items: 20})
	if err != nil {
		t.Fatalf("Calibrate: %v", err)
	}
	if c.Writers != 2 || c.Items != 20 || c.StatusElapsed <= 0 || c.ReleaseElapsed <= 0 {
		t.Fatalf("Calibrate = %+v, want 2 writers, 20 items and both passes timed", c)
	}
	if got, want := c.Status, 20/c.StatusElapsed.Seconds(); got != want {
		t.Errorf("Status = %v writes/s, want 20 writes over %s = %v", got, c.StatusElapsed, want)
	}
	if got, want := c.Release, 20/c.ReleaseElapsed.Seconds(); got != want {
		t.Errorf("Release = %v writes/s, want 20 writes over %s = %v", got, c.ReleaseElapsed, want)
	}
	cl, err := client.New(env.Config, client.Options{Scheme: scenario.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	var left v1.WorkItemList
	if err := cl.List(t.Context(), &left); err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 0 {
		t.Errorf("%d WorkItems left after the calibration, want 0: every release removes its item", len(left.Items))
	}
}
