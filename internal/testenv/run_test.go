package testenv_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/racesafe/racesafe/internal/testenv"
)

// starter blocks until its context ends, then returns err; returned is
// closed only after that, so a stop that does not wait sees it open.
type starter struct {
	err      error
	started  chan struct{}
	returned chan struct{}
}

func newStarter(err error) *starter {
	return &starter{err: err, started: make(chan struct{}), returned: make(chan struct{})}
}

func (s *starter) Start(ctx context.Context) error {
	close(s.started)
	<-ctx.Done()
	defer close(s.returned)
	return s.err
}

// errorsTB records Errorf instead of failing the test, so a test can see
// that Run reports what Start returned.
type errorsTB struct {
	testing.TB
	errs []string
}

func (e *errorsTB) Errorf(format string, args ...any) {
	e.errs = append(e.errs, fmt.Sprintf(format, args...))
}

func TestRunStopsAndWaitsForStartToReturn(t *testing.T) {
	s := newStarter(nil)
	stop := testenv.Run(t.Context(), t, s)
	<-s.started
	select {
	case <-s.returned:
		t.Fatal("Start returned before stop")
	default:
	}
	stop()
	select {
	case <-s.returned:
	default:
		t.Fatal("stop returned before Start did: an informer could outlive the test")
	}
	stop() // a second stop, and the cleanup's, do nothing
}

func TestRunReportsTheErrorStartReturned(t *testing.T) {
	rec := &errorsTB{TB: t}
	s := newStarter(errors.New("watch failed"))
	stop := testenv.Run(t.Context(), rec, s)
	stop()
	if len(rec.errs) != 1 {
		t.Fatalf("reported %q, want one error naming Start's", rec.errs)
	}
}

func TestRunStopsWhenTheTestEnds(t *testing.T) {
	s := newStarter(nil)
	t.Run("sub", func(t *testing.T) {
		// Not the test's context, which ends before the cleanups: only
		// Run's cleanup can stop s.
		testenv.Run(context.WithoutCancel(t.Context()), t, s)
		<-s.started
	})
	select {
	case <-s.returned:
	default:
		t.Fatal("the subtest ended and its Starter still runs")
	}
}
