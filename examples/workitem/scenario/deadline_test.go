package scenario_test

import (
	"errors"
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
