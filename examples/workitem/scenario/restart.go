package scenario

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/racesafe/racesafe/examples/workitem/api/v1alpha1"
	"github.com/racesafe/racesafe/examples/workitem/settings"
	"github.com/racesafe/racesafe/examples/workitem/sim"
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
	// StopAPIServer stops kube-apiserver (the run then waits for a request
	// to fail);
	// StartAPIServer starts it again on the same etcd, address and
	// certificates and returns once it serves. Both are required.
	StopAPIServer, StartAPIServer func() error
}

// RestartReport is what one API server restart run measured.
type RestartReport struct {
	Items, Deleted, Stuck, StuckWithFinalizer int
	// GoneAtStop and GoneAtStart are how many items were gone when the API
	// server was stopped and when it served again.
	GoneAtStop, GoneAtStart int
	// DownErr is the error a direct request got while the API server was
	// down: the proof that it was.
	DownErr  error
	Downtime time.Duration // from the stop to serving again
	// Reconciles and ReconcileErrors of the controller during the burst;
	// Releases are its WorkItem object writes then.
	Reconciles, ReconcileErrors, Releases int
	// DuplicateChildren, LeftChildren and DuplicateUninstalls as in Report.
	DuplicateChildren, LeftChildren, DuplicateUninstalls int
	Elapsed                                              time.Duration // first delete to last item seen gone
}

// ErrNoRestart is returned when RestartOptions cannot stop and start the
// API server.
var ErrNoRestart = errors.New("no way to stop and start the API server")

// RunAPIServerRestart runs the delete burst of Run for the racesafe
// controller and, once opts.StopAfter items are gone, stops kube-apiserver
// and starts it again on the same etcd. The controller is left alone
// throughout: whatever it does to recover, it does by itself.
//
// Children are counted by a watch stopped just before the API server is,
// and a second one opened (after a List) once it serves again; a watch
// cannot be resumed across the restart, as the new server's watch cache
// starts at its own first List. A child created and deleted again between
// the two is not seen.
func RunAPIServerRestart(ctx context.Context, cfg *rest.Config, opts RestartOptions) (RestartReport, error) {
	opts = restartDefaults(opts)
	rep := RestartReport{Items: opts.Items}
	if opts.StopAPIServer == nil || opts.StartAPIServer == nil {
		return rep, ErrNoRestart
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 1000, 2000
	scheme := Scheme()
	direct, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return rep, err
	}
	n := runs.Add(1)
	ns := fmt.Sprintf("restart-%d-%d", time.Now().UnixNano()%1e6, n)
	if err := direct.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return rep, fmt.Errorf("create namespace: %w", err)
	}
	defer releaseAll(context.WithoutCancel(ctx), direct, ns)
	before, err := watchChildren(ctx, direct, ns)
	if err != nil {
		return rep, err
	}
	var stopBefore sync.Once
	defer stopBefore.Do(before.stop)

	installer := sim.New(sim.Options{
		InstallDuration:   opts.Lag / 4,
		UninstallDuration: opts.UninstallDuration,
		FailInstall:       func(string) bool { return true },
	})
	cfgs := &settings.Manager{}
	cfgs.Set(settings.Settings{SyncStatusCheckInterval: settings.Default.SyncStatusCheckInterval})
	name := fmt.Sprintf("workitem-restart-%d", n)
	counted, counter := racetest.CountRequests(cfg)
	sopts := Options{Items: opts.Items, Lag: opts.Lag, MaxConcurrentReconciles: opts.MaxConcurrentReconciles}
	stop, err := startManager(ctx, counted, scheme, ns, Racesafe, name, sopts, installer, cfgs, &readTimes{})
	if err != nil {
		return rep, err
	}
	defer func() { _ = stop() }()

	setupStart := time.Now()
	for i := range opts.Items {
		item := &v1.WorkItem{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("item-%04d", i), Namespace: ns},
			Spec:       v1.WorkItemSpec{Payload: fmt.Sprintf("payload-%d", i), DryRun: i%2 == 0},
		}
		if err := direct.Create(ctx, item); err != nil {
			return rep, fmt.Errorf("create %s: %w", item.Name, err)
		}
	}
	if _, err := awaitFailed(ctx, direct, ns, Racesafe, sopts, setupStart, SetupDeadline(sopts)); err != nil {
		return rep, err
	}
	var items v1.WorkItemList
	if err := direct.List(ctx, &items, client.InNamespace(ns)); err != nil {
		return rep, err
	}

	counter.Reset()
	reconciles0 := reconcileTotal(name)
	errors0 := int(controllerMetric("controller_runtime_reconcile_errors_total", name))
	t0 := time.Now()
	var g sync.WaitGroup
	errs := make(chan error, opts.Items)
	for i := range opts.Items {
		g.Go(func() {
			item := &v1.WorkItem{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("item-%04d", i), Namespace: ns}}
			if err := direct.Delete(ctx, item); err != nil {
				errs <- err
			}
		})
	}
	g.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return rep, fmt.Errorf("delete: %w", err)
	}

	// gone polls the number of items gone; a failed List counts as no
	// progress, so the poll survives the API server being down.
	lastGone, last := 0, t0
	awaitGone := func(want int, timeout time.Duration) error {
		return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			var list v1.WorkItemList
			if err := direct.List(ctx, &list, client.InNamespace(ns)); err != nil {
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
	stopBefore.Do(before.stop)
	down := time.Now()
	if err := opts.StopAPIServer(); err != nil {
		return rep, fmt.Errorf("stop API server: %w", err)
	}
	// Down: a direct request fails.
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, opts.Timeout, true, func(ctx context.Context) (bool, error) {
		rep.DownErr = direct.List(ctx, &v1.WorkItemList{}, client.InNamespace(ns))
		return rep.DownErr != nil, nil
	}); err != nil {
		return rep, fmt.Errorf("API server still serving after its stop: %w", err)
	}
	if err := opts.StartAPIServer(); err != nil {
		return rep, fmt.Errorf("start API server again: %w", err)
	}
	// Served again: a direct request succeeds.
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, opts.Timeout, true, func(ctx context.Context) (bool, error) {
		var list v1.WorkItemList
		if err := direct.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, nil
		}
		rep.GoneAtStart = opts.Items - len(list.Items)
		return true, nil
	}); err != nil {
		return rep, fmt.Errorf("API server did not serve again: %w", err)
	}
	rep.Downtime = time.Since(down)
	lastGone = max(lastGone, rep.GoneAtStart)
	after, err := watchChildren(ctx, direct, ns)
	if err != nil {
		return rep, err
	}
	defer after.stop()

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

	if rep.StuckWithFinalizer, err = withFinalizer(ctx, direct, ns); err != nil {
		return rep, err
	}
	rep.DuplicateUninstalls = duplicateUninstalls(installer, items.Items)
	if err := after.sync(ctx); err != nil {
		return rep, fmt.Errorf("count children: %w", err)
	}
	rep.DuplicateChildren = mergedDuplicates(before, after)
	if rep.LeftChildren, err = leftChildren(ctx, direct, ns); err != nil {
		return rep, fmt.Errorf("count children left: %w", err)
	}
	return rep, nil
}

// mergedDuplicates counts the children beyond one per item seen by either
// watch; a child both saw is one child.
func mergedDuplicates(watches ...*childWatch) int {
	byOwner := map[string]map[types.UID]struct{}{}
	for _, cw := range watches {
		cw.mu.Lock()
		for owner, children := range cw.created {
			if byOwner[owner] == nil {
				byOwner[owner] = map[types.UID]struct{}{}
			}
			maps.Copy(byOwner[owner], children)
		}
		cw.mu.Unlock()
	}
	n := 0
	for owner, children := range byOwner {
		if owner != markerOwner && len(children) > 1 {
			n += len(children) - 1
		}
	}
	return n
}

func restartDefaults(o RestartOptions) RestartOptions {
	if o.Items <= 0 {
		o.Items = 30
	}
	if o.Timeout <= 0 {
		o.Timeout = 90 * time.Second
	}
	if o.StopAfter < 0 || o.StopAfter > o.Items {
		o.StopAfter = max(o.Items/3, 1)
	}
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = 4
	}
	return o
}
