package fence_test

import (
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/racesafe/racesafe/internal/testenv"
)

// The package starts no goroutine; the tests start a control plane and
// clients, and must stop all of them.
func TestMain(m *testing.M) {
	// A client's warnings go to controller-runtime's logger; without one set
	// it prints a stack trace on first use.
	ctrllog.SetLogger(logr.Discard())
	goleak.VerifyTestMain(m, testenv.LeakOptions()...)
}
