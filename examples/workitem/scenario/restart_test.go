package scenario_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/racesafe/racesafe/examples/workitem/scenario"
	"github.com/racesafe/racesafe/internal/testenv"
)

// kube-apiserver is stopped a third of the way through the delete burst
// and started again on the same etcd; the controller, left alone, finishes:
// every item gone, none holding its finalizer, each with exactly one child,
// deleted before the item.
func TestRacesafeSurvivesAPIServerRestart(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	plane := startRestartable(t)
	cfg := plane.cfg
	restarts := 0
	stopAPIServer := plane.stop

	const items = 30
	rep, err := scenario.RunAPIServerRestart(t.Context(), cfg, scenario.RestartOptions{
		Items:   items,
		Lag:     200 * time.Millisecond,
		Timeout: 90 * time.Second,
		// Stopped as soon as the deletes are sent and killed a second later,
		// while every uninstall (3 s) is still running: they finish while
		// the server is down, and every release has to wait for it.
		StopAfter:         0,
		UninstallDuration: 3 * time.Second,
		StopAPIServer:     stopAPIServer,
		StartAPIServer: func() error {
			restarts++
			return plane.start()
		},
	})
	if err != nil {
		t.Fatalf("RunAPIServerRestart: %v", err)
	}
	t.Logf("deleted %d/%d stuck %d (%d with finalizer), gone at stop %d, at start %d, down %s (%v), elapsed %s",
		rep.Deleted, rep.Items, rep.Stuck, rep.StuckWithFinalizer, rep.GoneAtStop, rep.GoneAtStart,
		rep.Downtime, rep.DownErr, rep.Elapsed)
	t.Logf("API server restarted %d times, %d killed after the graceful stop timed out", restarts, plane.killed)
	t.Logf("%d reconciles (%d errors), %d releases; children %d duplicate, %d left; %d duplicate uninstalls",
		rep.Reconciles, rep.ReconcileErrors, rep.Releases, rep.DuplicateChildren, rep.LeftChildren, rep.DuplicateUninstalls)

	// The fault happened: the API server was restarted once, refused a
	// request while down, and items were still left to delete after it.
	if restarts != 1 {
		t.Fatalf("API server started again %d times; want 1", restarts)
	}
	if rep.DownErr == nil {
		t.Fatal("a request to the stopped API server succeeded: it was not down")
	}
	if rep.GoneAtStart >= items {
		t.Fatalf("%d of %d items gone when the API server served again: nothing was left to recover", rep.GoneAtStart, items)
	}

	// It recovered by itself: nothing stuck, no child doubled or left
	// behind.
	if rep.Deleted != items || rep.Stuck != 0 || rep.StuckWithFinalizer != 0 {
		t.Fatalf("deleted %d of %d, stuck %d (%d with finalizer)", rep.Deleted, items, rep.Stuck, rep.StuckWithFinalizer)
	}
	if rep.Releases < items-rep.GoneAtStart {
		t.Fatalf("%d releases for the %d items gone after the restart: a release is missing from the count", rep.Releases, items-rep.GoneAtStart)
	}
	if rep.DuplicateChildren != 0 || rep.LeftChildren != 0 {
		t.Fatalf("%d duplicate children, %d left behind; want none", rep.DuplicateChildren, rep.LeftChildren)
	}
	// An uninstall done whose release the stop made fail is run again; the
	// installer is idempotent per UID. Only items not gone at the stop can
	// have one.
	// The manager lives through the outage, so it remembers which uninstalls
	// finished and retries only the release (reconciler.go, uninstalled).
	if rep.DuplicateUninstalls != 0 {
		t.Fatalf("%d duplicate uninstalls across the API server restart, want 0", rep.DuplicateUninstalls)
	}
}

// restartable is an envtest control plane whose kube-apiserver can be
// stopped and started again on the same etcd, address and certificates.
type restartable struct {
	cfg         *rest.Config
	stop, start func() error
	killed      int // stops that ended in a kill after the stop timeout
}

func startRestartable(t *testing.T) *restartable {
	t.Helper()
	dir, err := testenv.AssetsDir()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("integration test needs a control plane under CI=true: %v", err)
		}
		t.Skipf("skipping integration test: %v", err)
	}
	env := testenv.NewEnvironment(dir, testenv.Options{CRDDirectoryPaths: []string{"../config/crd"}})
	// envtest gives a fresh certificate folder to each start of an API
	// server whose CertDir it chose, and with it a new serving CA the
	// rest.Config does not trust. A folder of the test's own keeps the
	// certificates, so the restarted server is the same server to a client;
	// the address is kept either way.
	env.ControlPlane.APIServer = &envtest.APIServer{CertDir: t.TempDir()}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest from %s: %v", dir, err)
	}
	t.Cleanup(func() {
		// The stop timeout lowered below applies here too: a kube-apiserver
		// killed after it is as stopped as one that exited.
		if err := env.Stop(); err != nil && !strings.Contains(err.Error(), "timeout waiting for process") {
			t.Errorf("stop envtest: %v", err)
		}
	})
	apiServer := env.ControlPlane.GetAPIServer()
	// kube-apiserver's graceful shutdown can outlast envtest's wait for it,
	// which then kills it: a crash rather than a clean stop, and as good a
	// fault. The runs wait for a request to fail before starting it again.
	apiServer.StopTimeout = time.Second
	p := &restartable{cfg: cfg, start: apiServer.Start}
	p.stop = func() error {
		err := apiServer.Stop()
		if err != nil && strings.Contains(err.Error(), "timeout waiting for process") {
			p.killed++
			return nil
		}
		return err
	}
	return p
}
