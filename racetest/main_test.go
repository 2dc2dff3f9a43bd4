package racetest

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// lagged body, cache and connection must be closed by the test that opened it.
//
// One goroutine is not the tests' to stop: controller-runtime wraps a
// metadata-only informer's watch in watch.Filter, whose loop blocks for
// good on an event that arrives as the informer stops
// (kubernetes/kubernetes#113254); the history checker's metadata informers
// stop with events in flight. internal/testenv.LeakOptions ignores the same
// function; this package cannot import testenv, which imports it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("k8s.io/apimachinery/pkg/watch.(*filteredWatch).loop"))
}
