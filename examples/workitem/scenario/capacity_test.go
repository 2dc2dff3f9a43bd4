package scenario_test

import (
	"math"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/racesafe/racesafe/examples/workitem/api/v1alpha1"
	"github.com/racesafe/racesafe/examples/workitem/scenario"
	"github.com/racesafe/racesafe/internal/testenv"
)

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

// Calibrate writes every pre-created item once per pass, so both rates are
// measured over Items writes, and its releases remove every item it made.
func TestCalibrateTimesEveryWriteAndReleasesEveryItem(t *testing.T) {
	env := testenv.Start(t, withCRD)
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
