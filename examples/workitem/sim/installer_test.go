package sim_test

import (
	"errors"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/racesafe/racesafe/examples/workitem/sim"
)

func TestInstallerPollsUntilDone(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
	in := sim.New(sim.Options{UninstallDuration: 3 * time.Second, Clock: clk})

	done, wait, err := in.Uninstall("u1", "a")
	if done || wait != 3*time.Second || err != nil {
		t.Fatalf("first call: done=%v wait=%v err=%v, want started with 3s left", done, wait, err)
	}
	clk.SetTime(time.Unix(2, 0))
	if done, wait, _ := in.Uninstall("u1", "a"); done || wait != time.Second {
		t.Fatalf("after 2s: done=%v wait=%v, want 1s left", done, wait)
	}
	clk.SetTime(time.Unix(3, 0))
	if done, _, err := in.Uninstall("u1", "a"); !done || err != nil {
		t.Fatalf("after 3s: done=%v err=%v, want done", done, err)
	}
	if n := in.Uninstalled("u1"); n != 1 {
		t.Fatalf("Uninstalled = %d, want 1", n)
	}
	if n := in.Uninstalled("u2"); n != 0 {
		t.Fatalf("Uninstalled(other) = %d, want 0", n)
	}
}

func TestInstallerFailsChosenItems(t *testing.T) {
	in := sim.New(sim.Options{FailInstall: func(name string) bool { return name == "bad" }})
	if _, _, err := in.Install("u1", "good"); err != nil {
		t.Fatalf("good: %v", err)
	}
	if _, _, err := in.Install("u2", "bad"); !errors.Is(err, sim.ErrInstallFailed) {
		t.Fatalf("bad: err = %v, want ErrInstallFailed", err)
	}
}

// Views share the work and the counts, and say who was told.
func TestInstallerViewsShareWorkAndNameTheCaller(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
	in := sim.New(sim.Options{UninstallDuration: time.Second, Clock: clk})
	a, b := in.As("replica-a"), in.As("replica-b")
	if done, _, _ := a.Uninstall("u1", "x"); done {
		t.Fatal("done before its duration")
	}
	clk.SetTime(time.Unix(1, 0))
	// b polls the work a started: done at a's start plus the duration.
	if done, _, _ := b.Uninstall("u1", "x"); !done {
		t.Fatal("b's poll of the work a started is not done")
	}
	if done, _, _ := a.Uninstall("u1", "x"); !done {
		t.Fatal("a's poll is not done")
	}
	if n := in.Uninstalled("u1"); n != 2 {
		t.Fatalf("Uninstalled = %d, want 2", n)
	}
	got := b.UninstalledBy("u1")
	if len(got) != 2 || got[0] != "replica-b" || got[1] != "replica-a" {
		t.Fatalf("UninstalledBy = %q, want [replica-b replica-a]", got)
	}
}
