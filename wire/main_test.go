package wire_test

import (
	"testing"

	"go.uber.org/goleak"
)

// A metadata-only informer's watch.Filter loop can block for good on an event
// that arrives as the informer stops (kubernetes/kubernetes#113254).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("k8s.io/apimachinery/pkg/watch.(*filteredWatch).loop"))
}
