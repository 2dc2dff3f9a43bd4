package scenario

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/racesafe/racesafe/examples/workitem/api/v1alpha1"
	"github.com/racesafe/racesafe/examples/workitem/settings"
	"github.com/racesafe/racesafe/racetest"
)

// RestartOptions shape one API server restart run.
type RestartOptions struct {
	Items   int           // WorkItems created and deleted; default 30
	Lag     time.Duration // watch lag of the controller's informers
	Timeout time.Duration // how long deletion may take; default 90s
	// StopAfter is how many items are gone when the API server is
	// stopped: 0 stops it as soon as the deletes are sent; negative or
	// above Items means a third of Items.
	StopAfter int
	// UninstallDuration is how long the simulated uninstall takes, so that
	// uninstalls are in flight when the API server stops.
	UninstallDuration time.Duration
	// MaxConcurrentReconciles of the controller; default 4.
	MaxConcurrentReconciles int
	// Restarter stops kube-apiserver, sees it down, starts it again on the
	// same etcd, address and certificates and sees it serve; required.
	Restarter *racetest.APIServerRestarter
}

// RestartReport is what one API server restart run measured.
type RestartReport struct {
	Items, Deleted, Stuck int
	// GoneAtStop and GoneAtStart are how many items were gone when the API
	// server was stopped and when it served again.
	GoneAtStop, GoneAtStart int
	// DownErr is the error a request got while the API server was down:
	// the proof that it was. Downtime runs from that request to the first
	// one it answered again; Killed says it outlasted its stop timeout
	// (racetest.APIServerRestart).
	DownErr  error
	Downtime time.Duration
	Killed   bool
	// Reconciles and ReconcileErrors of the controller during the burst;
	// Releases are its WorkItem object writes then.
	Reconciles, ReconcileErrors, Releases int
	// Leftovers as in Report.
	Leftovers
	Elapsed time.Duration // first delete to last item seen gone
}

// ErrNoRestart is returned when RestartOptions has no Restarter.
var ErrNoRestart = errors.New("no way to stop and start the API server")

// RunAPIServerRestart runs the delete burst of Run for the racesafe
// controller and, once opts.StopAfter items are gone, stops kube-apiserver
// and starts it again on the same etcd. The controller is left alone
// throughout: whatever it does to recover, it does by itself.
//
// Children are counted across the restart as cluster.restartAPIServer
// says.
func RunAPIServerRestart(ctx context.Context, cfg *rest.Config, opts RestartOptions) (RestartReport, error) {
	opts = restartDefaults(opts)
	rep := RestartReport{Items: opts.Items}
	if opts.Restarter == nil {
		return rep, ErrNoRestart
	}
	c, err := newCluster(ctx, cfg, "restart")
	if err != nil {
		return rep, err
	}
	defer c.close(ctx)

	counted, counter := racetest.CountRequests(c.cfg)
	sopts := defaults(Options{Items: opts.Items, Lag: opts.Lag, MaxConcurrentReconciles: opts.MaxConcurrentReconciles})
	m := &managers{
		cluster: c, kind: Racesafe, lag: racetest.LagOptions{Delay: opts.Lag}, reads: &readTimes{},
		workers: opts.MaxConcurrentReconciles, installer: newInstaller(opts.Lag/4, opts.UninstallDuration),
		cfgs: newSettings(settings.Default.SyncStatusCheckInterval),
	}
	name := fmt.Sprintf("workitem-restart-%d", c.run)
	stop, err := m.start(ctx, counted, name)
	if err != nil {
		return rep, err
	}
	defer func() { _ = stop() }()

	// Created at once, with the setup deadline of items created at the
	// burst's pace.
	setupDeadline := SetupDeadline(sopts)
	sopts.CreateEvery = 0
	if _, err := c.setup(ctx, Racesafe, sopts, setupDeadline); err != nil {
		return rep, err
	}
	var items v1.WorkItemList
	if err := c.direct.List(ctx, &items, client.InNamespace(c.ns)); err != nil {
		return rep, err
	}

	counter.Reset()
	reconciles0 := reconcileTotal(name)
	errors0 := int(controllerMetric("controller_runtime_reconcile_errors_total", name))
	t0 := time.Now()
	if _, err := c.deleteAll(ctx, opts.Items); err != nil {
		return rep, err
	}

	// awaitGone polls the number of items gone; a failed List counts as no
	// progress, so the poll survives the API server being down.
	lastGone, last := 0, t0
	awaitGone := func(want int, timeout time.Duration) error {
		return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			var list v1.WorkItemList
			if err := c.direct.List(ctx, &list, client.InNamespace(c.ns)); err != nil {
				return false, nil
			}
			if g := opts.Items - len(list.Items); g > lastGone {
				lastGone, last = g, time.Now()
			}
			return lastGone >= want, nil
		})
	}
	if err := awaitGone(opts.StopAfter, opts.Timeout); err != nil {
		rep.Deleted, rep.Stuck = lastGone, opts.Items-lastGone
		return rep, fmt.Errorf("%d of %d items gone before the restart: %w", lastGone, opts.StopAfter, err)
	}
	rep.GoneAtStop = lastGone
	restart, err := c.restartAPIServer(ctx, opts.Restarter)
	rep.DownErr, rep.Downtime, rep.Killed = restart.DownErr, restart.Downtime, restart.Killed
	if err != nil {
		return rep, err
	}
	// Served again: what was gone by then.
	if err := awaitGone(0, opts.Timeout); err != nil {
		return rep, fmt.Errorf("API server did not serve again: %w", err)
	}
	rep.GoneAtStart = lastGone

	goneErr := awaitGone(opts.Items, opts.Timeout-time.Since(t0))
	rep.Elapsed = last.Sub(t0)
	rep.Deleted, rep.Stuck = lastGone, opts.Items-lastGone
	_ = stop()
	rep.Reconciles = reconcileTotal(name) - reconciles0
	rep.ReconcileErrors = int(controllerMetric("controller_runtime_reconcile_errors_total", name)) - errors0
	rep.Releases = counter.Count("patch", "workitems") + counter.Count("update", "workitems")
	if goneErr != nil && !wait.Interrupted(goneErr) {
		return rep, goneErr
	}
	rep.Leftovers, err = c.leftovers(ctx, m.installer, items.Items)
	return rep, err
}

func restartDefaults(o RestartOptions) RestartOptions {
	orDefault(&o.Items, 30)
	orDefault(&o.Timeout, 90*time.Second)
	if o.StopAfter < 0 || o.StopAfter > o.Items {
		o.StopAfter = max(o.Items/3, 1)
	}
	orDefault(&o.MaxConcurrentReconciles, 4)
	return o
}
