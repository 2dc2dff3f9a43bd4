package wire_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/racesafe/racesafe/internal/testenv"
)

// The goroutines that are not the tests' to stop: testenv.LeakOptions (a
// metadata-only informer's watch.Filter loop; on the oldest
// controller-runtime this module supports, a priority queue deadlocked on
// ShutDown, controller-runtime#3538).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testenv.LeakOptions()...)
}
