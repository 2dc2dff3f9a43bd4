package scenario_test

import (
	"math"
	"testing"
	"time"

	"github.com/racesafe/racesafe/examples/workitem/scenario"
	"github.com/racesafe/racesafe/internal/testenv"
	"github.com/racesafe/racesafe/racetest"
)

// One control plane serves every case: each run makes its own namespace.
func TestDeleteBurst(t *testing.T) {
	env := testenv.Start(t, withCRD)

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
	t.Logf("%s: deleted %d/%d stuck %d p50 %s p99 %s requests %v child requests %v reconciles %d; %v",
		kind, rep.Deleted, rep.Items, rep.Stuck, rep.P50, rep.P99, rep.Requests, rep.ChildRequests, rep.Reconciles, rep.Leftovers)
	return rep
}

func TestReportRatesAreOverTheBurst(t *testing.T) {
	r := scenario.Report{Items: 100, Workers: 4, Elapsed: 2 * time.Second, StatusWrites: 100, ObjectWrites: 100,
		ReconcileTime: 4 * time.Second, RoundTrips: 300, RoundTripTime: 3 * time.Second}
	for name, c := range map[string]struct{ got, want float64 }{
		"Writes":          {float64(r.Writes()), 200},
		"WritesPerSecond": {r.WritesPerSecond(), 100},
		"WorkersBusy":     {r.WorkersBusy(), 0.5},
		"MeanRoundTrip":   {r.MeanRoundTrip().Seconds(), 0.01},
	} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", name, c.got, c.want)
		}
	}
	var none scenario.Report
	if none.WritesPerSecond() != 0 || none.WorkersBusy() != 0 || none.MeanRoundTrip() != 0 {
		t.Errorf("empty report: WritesPerSecond %v, WorkersBusy %v, MeanRoundTrip %v; want 0", none.WritesPerSecond(), none.WorkersBusy(), none.MeanRoundTrip())
	}
}

func TestLeftoversSaysWhatWasLeft(t *testing.T) {
	l := scenario.Leftovers{StuckWithFinalizer: 1, DuplicateChildren: 2, LeftChildren: 3, DuplicateUninstalls: 4}
	want := "1 with the finalizer; children 2 duplicate, 3 left; 4 duplicate uninstalls"
	if got := l.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
