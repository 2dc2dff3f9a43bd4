package scenario_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/racesafe/racesafe/examples/workitem/scenario"
)

func draws(f func() time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = f()
	}
	return out
}

// A soak is replayable only if its jitter is: the same seed gives the same
// sequence, another seed another one, every value in [0, max).
func TestSeededJitterReplays(t *testing.T) {
	const max = 100 * time.Millisecond
	a := draws(scenario.SeededJitter(1, max), 1000)
	b := draws(scenario.SeededJitter(1, max), 1000)
	if !slices.Equal(a, b) {
		t.Fatal("the same seed gave two sequences")
	}
	if slices.Equal(a, draws(scenario.SeededJitter(2, max), 1000)) {
		t.Fatal("seeds 1 and 2 gave the same sequence")
	}
	distinct := map[time.Duration]bool{}
	for _, d := range a {
		if d < 0 || d >= max {
			t.Fatalf("jitter %s outside [0, %s)", d, max)
		}
		distinct[d] = true
	}
	if len(distinct) < 900 {
		t.Fatalf("%d distinct values in 1000 draws: not uniform over [0, %s)", len(distinct), max)
	}
	for _, m := range []time.Duration{0, -time.Second} {
		if d := scenario.SeededJitter(1, m)(); d != 0 {
			t.Errorf("max %s: jitter %s, want 0", m, d)
		}
	}
}

// The lag calls Jitter from one goroutine per watch: concurrent draws are
// race-free and, together, the same values as serial ones.
func TestSeededJitterConcurrent(t *testing.T) {
	const max, n = time.Second, 4000
	serial := draws(scenario.SeededJitter(3, max), n)
	f := scenario.SeededJitter(3, max)
	var mu sync.Mutex
	var got []time.Duration
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			mine := draws(f, n/8)
			mu.Lock()
			got = append(got, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(serial)
	slices.Sort(got)
	if !slices.Equal(serial, got) {
		t.Fatal("concurrent draws are not the serial sequence's values")
	}
}
