package scenario

import (
	"runtime"
	"testing"
	"time"
)

func TestSummaryTellsReadsInStallsFromWaits(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	r := &readTimes{
		d: []span{
			{at(0), at(1)},     // fast
			{at(10), at(30)},   // 20 ms, all but 2 ms in the stall 8-36: in a stall
			{at(100), at(125)}, // 25 ms, 10 ms of it in the stall 110-120: a wait
			{at(200), at(240)}, // 40 ms, no stall: a wait
			{at(300), at(309)}, // 9 ms: not waited
			{at(400), at(417)}, // 17 ms, 6 ms in stalls 398-402 and 411-415: a wait
			{at(500), at(512)}, // 12 ms, 3 ms in 509-512: under 10 ms outside, in a stall
		},
		stalls: []span{{at(8), at(36)}, {at(110), at(120)}, {at(398), at(402)}, {at(411), at(415)}, {at(509), at(512)}},
	}
	got := r.summary()
	want := readSummary{reads: 7, waited: 5, waitedInStalls: 2, p50: 20 * time.Millisecond, top: 40 * time.Millisecond,
		stalls: 2, stallMax: 28 * time.Millisecond}
	if got != want {
		t.Errorf("summary = %+v\nwant        %+v", got, want)
	}
}

func TestStallWitnessSeesTheProcessNotRun(t *testing.T) {
	// One P, and a goroutine that does not yield: the witness runs only
	// when the runtime preempts it (every 10 ms or so), late.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	w := startStallWitness()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for spin := time.Now(); time.Since(spin) < 30*time.Millisecond; {
		}
		w.mu.Lock()
		n := len(w.stalls)
		w.mu.Unlock()
		if n > 0 {
			break
		}
	}
	stalls := w.stop()
	if len(stalls) == 0 {
		t.Fatal("no stall recorded while the only P spun")
	}
	for _, s := range stalls {
		if s.duration() < stallSlack {
			t.Errorf("stall %v recorded, under the slack %v", s.duration(), stallSlack)
		}
	}
	t.Logf("%d stalls, the first %v", len(stalls), stalls[0].duration())
	var none *stallWitness
	if got := none.stop(); got != nil {
		t.Errorf("a nil witness stopped with %v", got)
	}
}

func TestReadTimesResetRestartsTheWitness(t *testing.T) {
	r := &readTimes{}
	r.reset()
	first := r.witness
	r.add(time.Now(), time.Now())
	r.reset()
	if r.witness == first || r.witness == nil {
		t.Fatal("reset did not start a new witness")
	}
	select {
	case <-first.done:
	default:
		t.Error("reset left the old witness running")
	}
	if len(r.d) != 0 {
		t.Errorf("reset kept %d reads", len(r.d))
	}
	r.finish()
	r.finish()
	if r.witness != nil {
		t.Error("finish left a witness")
	}
}
