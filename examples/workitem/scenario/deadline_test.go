package scenario_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/racesafe/racesafe/examples/workitem/scenario"
)

func TestSetupDeadlineGrowsWithLagAndItems(t *testing.T) {
	base := scenario.Options{Items: 100, Lag: 100 * time.Millisecond, Timeout: 30 * time.Second}
	// 30s + 100 x (10ms + 50ms) + ceil(100/4) x 8 x 100ms
	if got, want := scenario.SetupDeadline(base), 30*time.Second+6*time.Second+20*time.Second; got != want {
		t.Fatalf("SetupDeadline(%+v) = %s, want %s", base, got, want)
	}
	moreLag := base
	moreLag.Lag = 500 * time.Millisecond
	moreItems := base
	moreItems.Items = 1000
	for name, o := range map[string]scenario.Options{"lag": moreLag, "items": moreItems} {
		if scenario.SetupDeadline(o) <= scenario.SetupDeadline(base) {
			t.Errorf("more %s: SetupDeadline %s, not above %s", name, scenario.SetupDeadline(o), scenario.SetupDeadline(base))
		}
	}
	fewerWorkers := base
	fewerWorkers.MaxConcurrentReconciles = 1
	if scenario.SetupDeadline(fewerWorkers) <= scenario.SetupDeadline(base) {
		t.Errorf("one worker: SetupDeadline %s, not above four workers' %s", scenario.SetupDeadline(fewerWorkers), scenario.SetupDeadline(base))
	}
}

func TestSetupTimeoutOverridesSetupDeadline(t *testing.T) {
	o := scenario.Options{Items: 1000, Lag: time.Second, SetupTimeout: time.Minute}
	if got := scenario.SetupDeadline(o); got != time.Minute {
		t.Fatalf("SetupDeadline with SetupTimeout 1m = %s", got)
	}
}

func TestSetupErrorSaysHowFarTheCreateFlowGot(t *testing.T) {
	cause := errors.New("context deadline exceeded")
	var err error = &scenario.SetupError{Controller: scenario.NaiveRYW, Items: 100, Reached: 40,
		LastReachedAt: 12 * time.Second, Deadline: 56 * time.Second, Err: cause}
	want := "naive+ryw: setup: 40 of 100 items reached Failed with the finalizer by the setup deadline of 56s (the last of them at 12s): context deadline exceeded"
	if err.Error() != want {
		t.Errorf("Error() = %q\nwant      %q", err.Error(), want)
	}
	if !errors.Is(err, scenario.ErrSetup) || !errors.Is(err, cause) {
		t.Errorf("errors.Is(err, ErrSetup) = %t, errors.Is(err, cause) = %t; want both", errors.Is(err, scenario.ErrSetup), errors.Is(err, cause))
	}
}

func TestCapacityFractionIsTheShareOfTheBurstAtCalibratedRates(t *testing.T) {
	c := scenario.Capacity{Status: 200, Release: 100}
	// 100 status writes take 0.5s at 200/s, 100 releases 1s at 100/s: 1.5s of a 3s burst.
	if got := c.Fraction(100, 100, 3*time.Second); math.Abs(got-0.5) > 1e-9 {
		t.Errorf("Fraction(100, 100, 3s) = %v, want 0.5", got)
	}
	// A writer at exactly the calibrated rates uses all of it.
	if got := c.Fraction(200, 0, time.Second); math.Abs(got-1) > 1e-9 {
		t.Errorf("Fraction(200, 0, 1s) = %v, want 1", got)
	}
	// One of each per item: 1 / (1/200 + 1/100) items/s.
	if got, want := c.MinimalFlowItems(), 200.0/3; math.Abs(got-want) > 1e-9 {
		t.Errorf("MinimalFlowItems() = %v, want %v", got, want)
	}
	for name, f := range map[string]float64{
		"no calibration": scenario.Capacity{}.Fraction(100, 100, time.Second),
		"no time":        c.Fraction(100, 100, 0),
		"no flow":        scenario.Capacity{Status: 200}.MinimalFlowItems(),
	} {
		if f != 0 {
			t.Errorf("%s: %v, want 0", name, f)
		}
	}
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
