package fence_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/racesafe/racesafe/internal/testenv"
)

// The package starts no goroutine; the tests start a control plane and
// clients, and must stop all of them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testenv.LeakOptions()...)
}
