package expectations_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/racesafe/racesafe/internal/testenv"
)

// The package starts no goroutine; the tests start writers, a cache and a
// control plane, and must stop all of them. What is not theirs to stop is
// in testenv.LeakOptions: a metadata-only informer's watch.Filter loop
// (kubernetes/kubernetes#113254) and, on the oldest controller-runtime this
// module supports, a priority queue deadlocked on ShutDown
// (controller-runtime#3538).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testenv.LeakOptions()...)
}
