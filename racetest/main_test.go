package racetest

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// lagged body, cache and connection must be closed by the test that opened it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
