package expectations_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The package starts no goroutine; the tests start writers, a cache and a
// control plane, and must stop all of them. One goroutine is not theirs to
// stop: controller-runtime wraps a metadata-only informer's watch in
// watch.Filter, whose loop blocks for good on an event that arrives as the
// informer stops (kubernetes/kubernetes#113254).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("k8s.io/apimachinery/pkg/watch.(*filteredWatch).loop"))
}
