package explore_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// manager, informer and held watch of an exploration must end with it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
