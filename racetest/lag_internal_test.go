package racetest

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	testingclock "k8s.io/utils/clock/testing"
)

// readResult is one Read of a lagged body, done on another goroutine.
type readResult struct {
	data string
	err  error
}

func startRead(b *lagBody, size int) <-chan readResult {
	out := make(chan readResult, 1)
	go func() {
		p := make([]byte, size)
		n, err := b.Read(p)
		out <- readResult{string(p[:n]), err}
	}()
	return out
}

// waitForTimer waits until the Read under test is parked on the fake clock's
// timer; from then on, it can only return when the clock is stepped.
func waitForTimer(t *testing.T, fc *testingclock.FakeClock) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true,
		func(ctx context.Context) (bool, error) { return fc.HasWaiters(), nil })
	if err != nil {
		t.Fatalf("Read never waited on the clock: %v", err)
	}
}

func expectPending(t *testing.T, got <-chan readResult) {
	t.Helper()
	select {
	case r := <-got:
		t.Fatalf("Read returned %+v before its release time", r)
	default:
	}
}

func expectRead(t *testing.T, got <-chan readResult, want string) {
	t.Helper()
	select {
	case r := <-got:
		if r.err != nil || r.data != want {
			t.Fatalf("Read = %q, %v; want %q, nil", r.data, r.err, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("Read did not return %q within 10s", want)
	}
}

// TestLagBodyHoldsEachChunkUntilRelease drives the lag with a fake clock: a
// chunk is not readable one nanosecond before arrival+delay, and is at it.
func TestLagBodyHoldsEachChunkUntilRelease(t *testing.T) {
	const delay = 300 * time.Millisecond
	fc := testingclock.NewFakeClock(time.Unix(0, 0))
	src, w := io.Pipe()
	b := newLagBody(src, LagOptions{Delay: delay, Clock: fc})
	defer b.Close()

	if _, err := w.Write([]byte("event-1")); err != nil {
		t.Fatal(err)
	}
	got := startRead(b, 64)
	waitForTimer(t, fc)
	fc.Step(delay - time.Nanosecond)
	expectPending(t, got)
	fc.Step(time.Nanosecond)
	expectRead(t, got, "event-1")
}

// TestLagBodyJitterNeverReorders gives the first chunk a long jitter and the
// second none: the second still comes after the first, in pieces as small as
// the reader asks, and the stream's end comes last.
func TestLagBodyJitterNeverReorders(t *testing.T) {
	const delay = 100 * time.Millisecond
	jitters := make(chan time.Duration, 3)
	jitters <- 200 * time.Millisecond
	jitters <- 0
	jitters <- 0
	fc := testingclock.NewFakeClock(time.Unix(0, 0))
	src, w := io.Pipe()
	b := newLagBody(src, LagOptions{Delay: delay, Clock: fc, Jitter: func() time.Duration { return <-jitters }})
	defer b.Close()

	for _, s := range []string{"first", "second"} {
		if _, err := w.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	// The pump stamps a chunk (clock, then jitter) after the pipe hands it
	// over; step the clock only once all three are stamped at time 0, or a
	// late stamp would be released a full delay after the steps.
	err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return len(jitters) == 0, nil })
	if err != nil {
		t.Fatalf("the pump never stamped all chunks: %v", err)
	}
	got := startRead(b, 64)
	waitForTimer(t, fc)
	fc.Step(delay) // the second chunk's own release time, not the first's
	expectPending(t, got)
	fc.Step(200 * time.Millisecond)
	expectRead(t, got, "first")
	expectRead(t, startRead(b, 3), "sec")
	expectRead(t, startRead(b, 64), "ond")
	select {
	case r := <-startRead(b, 64):
		if !errors.Is(r.err, io.EOF) {
			t.Fatalf("after the last chunk Read = %+v, want EOF", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream's end was not read within 10s")
	}
}

// TestLagBodyCloseUnblocksRead: an informer stops its watch by closing the
// body while its decoder is blocked in Read; the Read must return.
func TestLagBodyCloseUnblocksRead(t *testing.T) {
	fc := testingclock.NewFakeClock(time.Unix(0, 0))
	src, w := io.Pipe()
	b := newLagBody(src, LagOptions{Delay: time.Hour, Clock: fc})
	if _, err := w.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	got := startRead(b, 64)
	waitForTimer(t, fc)
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case r := <-got:
		if !errors.Is(r.err, errBodyClosed) {
			t.Fatalf("Read after Close = %+v, want errBodyClosed", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not unblock Read")
	}
	select {
	case <-b.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the pump")
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestLagBodyServerEndEndsPump: when the server ends the stream and nobody
// reads the end, the pump still returns.
func TestLagBodyServerEndEndsPump(t *testing.T) {
	src, w := io.Pipe()
	b := newLagBody(src, LagOptions{Delay: time.Hour, Clock: testingclock.NewFakeClock(time.Unix(0, 0))})
	defer b.Close()
	if _, err := w.Write([]byte("last")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	select {
	case <-b.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the pump outlived the server's stream")
	}
}

// TestLagBodyZeroDelayPassesAtOnce: no timer is needed at Delay 0.
func TestLagBodyZeroDelayPassesAtOnce(t *testing.T) {
	fc := testingclock.NewFakeClock(time.Unix(0, 0))
	src, w := io.Pipe()
	b := newLagBody(src, LagOptions{Clock: fc, Jitter: func() time.Duration { return -time.Second }})
	defer b.Close()
	if _, err := w.Write([]byte("now")); err != nil {
		t.Fatal(err)
	}
	expectRead(t, startRead(b, 64), "now")
	w.Close()
}
