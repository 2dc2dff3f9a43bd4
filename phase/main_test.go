package phase_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The package starts no goroutine; the integration tests start a control
// plane and must stop it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
