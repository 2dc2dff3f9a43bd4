package scenario

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/racesafe/racesafe/examples/workitem/api/v1alpha1"
	"github.com/racesafe/racesafe/examples/workitem/settings"
	"github.com/racesafe/racesafe/examples/workitem/sim"
	"github.com/racesafe/racesafe/racetest"
)

// SoakOptions shape a soak run of the racesafe controller.
type SoakOptions struct {
	Duration     time.Duration // how long new items keep coming; default 5m
	Drain        time.Duration // how long the last items may take to go; default 60s
	Wave         int           // items created (and later deleted) together; default 20
	Lag          time.Duration // base watch lag; default 100ms
	Jitter       func() time.Duration
	Conflict     float64 // injected 409 rate on writes; default 0.10
	ServerError  float64 // injected 500 rate; default 0.02
	Seed         uint64
	RestartEvery time.Duration // manager restart period; default 1m
	Concurrency  int           // MaxConcurrentReconciles; default 4
	Progress     io.Writer
}

// SoakReport is what a soak run counted.
type SoakReport struct {
	Created, Gone, Stuck int
	FinalizersLeft       int // must be 0
	// DuplicateChildren, LeftChildren and DuplicateUninstalls are counted
	// as in Report. The first two must be 0; an uninstall is polled again
	// when the release after it failed (injected 500s, restarts), so
	// DuplicateUninstalls need not be.
	DuplicateChildren, LeftChildren, DuplicateUninstalls int
	Restarts                                             int
	Injected                                             racetest.FaultCounts
	GoroutinesBefore                                     int
	GoroutinesAfter                                      int
	Elapsed                                              time.Duration
}

// Soak churns WorkItems through create -> Failed -> delete against the
// racesafe controller under lag jitter, injected conflicts and server
// errors, and periodic manager restarts, then counts what was left.
func Soak(ctx context.Context, cfg *rest.Config, o SoakOptions) (SoakReport, error) {
	if o.Duration <= 0 {
		o.Duration = 5 * time.Minute
	}
	if o.Drain <= 0 {
		o.Drain = 60 * time.Second
	}
	if o.Wave <= 0 {
		o.Wave = 20
	}
	if o.Lag <= 0 {
		o.Lag = 100 * time.Millisecond
	}
	if o.Conflict == 0 {
		o.Conflict = 0.10
	}
	if o.ServerError == 0 {
		o.ServerError = 0.02
	}
	if o.RestartEvery <= 0 {
		o.RestartEvery = time.Minute
	}
	var rep SoakReport
	faults, err := racetest.NewFaults(racetest.FaultOptions{Seed: o.Seed, Conflict: o.Conflict, ServerError: o.ServerError})
	if err != nil {
		return rep, err
	}
	scheme := Scheme()
	direct, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return rep, err
	}
	n := runs.Add(1)
	ns := fmt.Sprintf("soak-%d", n)
	if err := direct.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return rep, err
	}
	defer releaseAll(context.WithoutCancel(ctx), direct, ns)

	children, err := watchChildren(ctx, direct, ns)
	if err != nil {
		return rep, err
	}
	defer children.stop()

	rep.GoroutinesBefore = runtime.NumGoroutine()
	installer := sim.New(sim.Options{
		FailInstall:       func(string) bool { return true },
		InstallDuration:   o.Lag / 4, // the install poll comes back before the cache shows the child
		UninstallDuration: 50 * time.Millisecond,
	})
	cfgs := &settings.Manager{}
	cfgs.Set(settings.Settings{SyncStatusCheckInterval: time.Second})
	opts := Options{Lag: o.Lag, Jitter: o.Jitter, MaxConcurrentReconciles: o.Concurrency, Faults: faults}
	opts = defaults(opts)
	name := fmt.Sprintf("workitem-soak-%d", n)
	stop, err := startManager(ctx, cfg, scheme, ns, Racesafe, name, opts, installer, cfgs, nil)
	if err != nil {
		return rep, err
	}

	t0 := time.Now()
	restart := time.NewTicker(o.RestartEvery)
	defer restart.Stop()
	var pending []string // created, not yet deleted
	for time.Since(t0) < o.Duration {
		select {
		case <-restart.C:
			if err := stop(); err != nil {
				return rep, fmt.Errorf("stop manager: %w", err)
			}
			if stop, err = startManager(ctx, cfg, scheme, ns, Racesafe, name, opts, installer, cfgs, nil); err != nil {
				return rep, fmt.Errorf("restart manager: %w", err)
			}
			rep.Restarts++
		case <-ctx.Done():
			_ = stop()
			return rep, ctx.Err()
		default:
		}
		// Delete the previous wave once it has failed, then create the next.
		if len(pending) > 0 {
			if err := waitPhase(ctx, direct, ns, pending, v1.PhaseFailed, 30*time.Second); err != nil {
				_ = stop()
				return rep, err
			}
			for _, name := range pending {
				if err := direct.Delete(ctx, &v1.WorkItem{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}); client.IgnoreNotFound(err) != nil {
					_ = stop()
					return rep, err
				}
			}
		}
		pending = pending[:0]
		for range o.Wave {
			item := &v1.WorkItem{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("soak-%06d", rep.Created), Namespace: ns},
				Spec:       v1.WorkItemSpec{Payload: "soak", DryRun: rep.Created%2 == 0},
			}
			if err := direct.Create(ctx, item); err != nil {
				_ = stop()
				return rep, err
			}
			rep.Created++
			pending = append(pending, item.Name)
		}
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "  soak %s: created %d, restarts %d\n", time.Since(t0).Round(time.Second), rep.Created, rep.Restarts)
		}
	}
	// The last wave: fail, delete, then drain.
	if err := waitPhase(ctx, direct, ns, pending, v1.PhaseFailed, 30*time.Second); err == nil {
		for _, name := range pending {
			_ = direct.Delete(ctx, &v1.WorkItem{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
		}
	}
	var left v1.WorkItemList
	_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, o.Drain, true, func(ctx context.Context) (bool, error) {
		if err := direct.List(ctx, &left, client.InNamespace(ns)); err != nil {
			return false, err
		}
		return len(left.Items) == 0, nil
	})
	rep.Elapsed = time.Since(t0)
	rep.Stuck = len(left.Items)
	rep.Gone = rep.Created - rep.Stuck
	for _, it := range left.Items {
		if controllerutil.ContainsFinalizer(&it, v1.Finalizer) {
			rep.FinalizersLeft++
		}
	}
	rep.Injected = faults.Injected()
	if err := stop(); err != nil {
		return rep, fmt.Errorf("stop manager: %w", err)
	}
	if err := children.sync(ctx); err != nil {
		return rep, fmt.Errorf("count children: %w", err)
	}
	rep.DuplicateChildren = children.duplicates()
	for _, uid := range children.owners() {
		if n := installer.Uninstalled(uid); n > 1 {
			rep.DuplicateUninstalls += n - 1
		}
	}
	if rep.LeftChildren, err = leftChildren(ctx, direct, ns); err != nil {
		return rep, fmt.Errorf("count children left: %w", err)
	}
	// Goroutines of a stopped manager wind down asynchronously; give them
	// a bounded time before counting.
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return runtime.NumGoroutine() <= rep.GoroutinesBefore, nil
	})
	rep.GoroutinesAfter = runtime.NumGoroutine()
	return rep, nil
}

func waitPhase(ctx context.Context, c client.Client, ns string, names []string, p v1.Phase, timeout time.Duration) error {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var list v1.WorkItemList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, nil // injected faults are on the controller's client, but stay tolerant
		}
		got := 0
		for _, it := range list.Items {
			if want[it.Name] && it.Status.Phase == p {
				got++
			}
		}
		return got == len(want), nil
	})
	if err != nil {
		return fmt.Errorf("wave did not reach %s: %w", p, err)
	}
	return nil
}
