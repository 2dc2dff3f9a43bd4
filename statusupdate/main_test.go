package statusupdate_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The package starts no goroutine; the tests start writers, a cache and a
// control plane, and must stop all of them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
