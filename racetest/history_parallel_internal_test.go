package racetest

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"
)

// TestRunAllKeepsSeedOrderAndItsBound: histories that end in any order
// are reported in seed order, never more than Parallel run at once, and a
// history that cannot run ends the stream after it, with every run ended.
func TestRunAllKeepsSeedOrderAndItsBound(t *testing.T) {
	for _, parallel := range []int{1, 3, 8} {
		var running, most atomic.Int64
		o := CheckOptions{Seed: 100, Histories: 40, Parallel: parallel}
		run := func(ctx context.Context, seed uint64) (*historyResult, error) {
			n := running.Add(1)
			defer running.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond) // ends out of order
			return &historyResult{Seed: seed}, nil
		}
		want := o.Seed
		for r := range runAll(t.Context(), o, run) {
			if r.err != nil || r.h.Seed != want {
				t.Fatalf("parallel %d: got seed %v (%v), want %d", parallel, r.h, r.err, want)
			}
			want++
		}
		if want != o.Seed+uint64(o.Histories) {
			t.Errorf("parallel %d: %d histories reported, want %d", parallel, want-o.Seed, o.Histories)
		}
		if got := most.Load(); got > int64(parallel) || (parallel > 1 && got < 2) {
			t.Errorf("parallel %d: %d ran at once", parallel, got)
		}
	}

	broken := errors.New("no namespace")
	var started, ended atomic.Int64
	o := CheckOptions{Seed: 1, Histories: 50, Parallel: 4}
	run := func(ctx context.Context, seed uint64) (*historyResult, error) {
		started.Add(1)
		defer ended.Add(1)
		if seed == 5 {
			return nil, broken
		}
		time.Sleep(time.Millisecond)
		return &historyResult{Seed: seed}, nil
	}
	var seeds []uint64
	var last error
	for r := range runAll(t.Context(), o, run) {
		if r.err != nil {
			last = r.err
			continue
		}
		seeds = append(seeds, r.h.Seed)
	}
	if !errors.Is(last, broken) || len(seeds) != 4 || seeds[3] != 4 {
		t.Errorf("stream = %v then %v, want seeds 1 to 4 then the error", seeds, last)
	}
	if s, e := started.Load(), ended.Load(); s != e || s > 5+int64(o.Parallel) {
		t.Errorf("%d runs started, %d ended when the stream closed; want all ended, at most %d", s, e, 5+o.Parallel)
	}
}
