package scenario_test

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/racesafe/racesafe/internal/testenv"
)

// withCRD is the control plane of every integration test: WorkItem's CRD
// installed.
var withCRD = testenv.Options{CRDDirectoryPaths: []string{"../config/crd"}}

// TestMain silences controller-runtime's log once for every test: the
// managers of a run log each fault the run injects, by the thousand.
func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(m.Run())
}
