package scenario

import (
	"sync"
	"time"
)

// A Get the bench counts as waited (WaitThreshold or longer) is a cache Get
// that took milliseconds, on a machine where the control plane shares the
// controller's cores: the controller's process may simply not have run. The
// stall witness tells the two apart. A goroutine of the same process sleeps
// stallTick at a time and records every wake-up late by stallSlack or more
// as a stall: a span in which no goroutine of the process that asked to run
// was sure to run (the OS ran another process, the garbage collector
// stopped the world, or the process had more runnable goroutines than
// cores). A waited read whose time outside the stalls is under
// WaitThreshold was slow because the process stalled, not because the
// client waited.
const (
	stallTick  = time.Millisecond
	stallSlack = 2 * time.Millisecond
)

// span is the time from Start to End.
type span struct{ Start, End time.Time }

func (s span) duration() time.Duration { return s.End.Sub(s.Start) }

// overlap is how much of s the spans cover; spans are disjoint.
func (s span) overlap(spans []span) time.Duration {
	var d time.Duration
	for _, o := range spans {
		from, to := o.Start, o.End
		if s.Start.After(from) {
			from = s.Start
		}
		if s.End.Before(to) {
			to = s.End
		}
		if to.After(from) {
			d += to.Sub(from)
		}
	}
	return d
}

// stallWitness records the process's stalls from start until stop.
type stallWitness struct {
	mu     sync.Mutex
	stalls []span
	quit   chan struct{}
	done   chan struct{}
}

func startStallWitness() *stallWitness {
	w := &stallWitness{quit: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

func (w *stallWitness) run() {
	defer close(w.done)
	t := time.NewTimer(stallTick)
	defer t.Stop()
	due := time.Now().Add(stallTick)
	for {
		select {
		case <-w.quit:
			return
		case <-t.C:
		}
		now := time.Now()
		w.observe(due, now)
		due = now.Add(stallTick)
		t.Reset(stallTick)
	}
}

// observe records a wake-up due at due that happened at now.
func (w *stallWitness) observe(due, now time.Time) {
	if now.Sub(due) < stallSlack {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stalls = append(w.stalls, span{Start: due, End: now})
}

// stop ends the witness and returns its stalls, in time order; a nil
// witness has none.
func (w *stallWitness) stop() []span {
	if w == nil {
		return nil
	}
	close(w.quit)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stalls
}
