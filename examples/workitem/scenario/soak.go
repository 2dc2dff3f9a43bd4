package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/pprof"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/racesafe/racesafe/examples/workitem/api/v1alpha1"
	"github.com/racesafe/racesafe/racetest"
)

// SoakOptions shape a soak run of the racesafe controller.
type SoakOptions struct {
	Duration time.Duration // how long new items keep coming; default 5m
	Drain    time.Duration // how long the last items may take to go; default 3m
	// WaveTimeout is how long a wave may take to reach Failed before the
	// run stops as stuck; default 3m. It must outlast client-go's reflector
	// backoff: after repeated watch failures (410s, an API server down) a
	// relist waits up to 30s plus 100% jitter, and the informer is blind
	// that long. A slow wave is not a stuck one.
	WaveTimeout time.Duration
	Wave        int           // items created (and later deleted) together; default 20
	Lag         time.Duration // base watch lag; default 100ms
	Jitter      func() time.Duration
	// Injected client faults, per write (updates, patches, status writes,
	// and the children's creates and deletes): 409s, 500s, and writes the
	// server applies although the client sees a 500 or a timeout; defaults
	// 0.10, 0.02, 0.01 and 0.01. Negative turns one off.
	Conflict, ServerError, AppliedServerError, AppliedTimeout float64
	// Broken watches: the rate per event at which a watch stream ends, and
	// the rate at which the watch resuming it is answered 410 Gone (the
	// informer relists); defaults 0.002 and 0.5. Negative turns one off.
	WatchBreak, WatchGone float64
	Seed                  uint64
	// The controller runs as two replicas with leader election. Every
	// RestartEvery (default 1m) the leader is stopped, alternately with its
	// lease left to expire (racetest.Expire) and as a clean handover; the standby
	// takes over and a new standby is started, its informers warm before
	// it leads. A replica whose manager exits by itself (a lost lease while
	// the API server is down) is replaced too, as a Deployment would.
	RestartEvery time.Duration
	// Every APIServerRestartEvery kube-apiserver is stopped, seen down, and
	// started again on the same etcd: Restarter does it (see
	// RestartOptions). Zero, or no Restarter, means no API server restarts.
	APIServerRestartEvery time.Duration
	Restarter             *racetest.APIServerRestarter
	// LeaseDuration, RenewDeadline and RetryPeriod of the leader
	// election; default 2s, 1.5s and 300ms. A leader that cannot renew
	// within RenewDeadline (the API server down longer) loses its lease and
	// its manager exits.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	Concurrency                               int // MaxConcurrentReconciles; default 4
	Progress                                  io.Writer
	// Describe, if set, is told, when a wave does not move, what the API
	// server and each replica know of its items; Goroutines, if set, gets
	// a dump of every goroutine's stack then.
	Describe, Goroutines io.Writer
	// HeapProfile, if set, gets a pprof heap profile taken at the end, after
	// the collection that HeapAfter is measured behind, so that the
	// profile's inuse_space names the owner of each byte HeapAfter counts.
	HeapProfile io.Writer
}

// SoakReport is what a soak run counted.
type SoakReport struct {
	Created, Gone, Stuck int
	FinalizersLeft       int // must be 0
	// DuplicateChildren, LeftChildren and DuplicateUninstalls are counted
	// as in Report. DuplicateUninstallsAfterExit are those of them asked
	// for by a replica after the replica told of the same uninstall before
	// had exited by itself (its lease lost): controller-runtime then skips
	// the graceful shutdown and, in a real operator, the process ends, so
	// the release that would have recorded the uninstall may never be sent.
	// No controller can learn of a side effect and write it down in one
	// step; the installer is idempotent per UID, and the new leader's ask
	// is a poll of finished work. All the others must be 0.
	DuplicateChildren, LeftChildren, DuplicateUninstalls int
	DuplicateUninstallsAfterExit                         int
	// Crashes and Handovers count the leaders stopped each way, Crashes
	// those whose lease was left to expire (racetest.Expire); Exits the
	// replicas whose manager ended by itself; APIServerRestarts the times
	// kube-apiserver was down and served again.
	Crashes, Handovers, Exits, APIServerRestarts int
	Injected                                     racetest.FaultCounts
	Watch                                        racetest.WatchFaultCounts
	GoroutinesBefore, GoroutinesAfter            int
	HeapBefore, HeapAfter                        uint64 // live heap bytes after a GC
	Elapsed                                      time.Duration
	// SlowestWave is the longest a wave took from its creation to Failed.
	SlowestWave time.Duration
}

func soakDefaults(o SoakOptions) SoakOptions {
	orDefault(&o.Duration, 5*time.Minute)
	orDefault(&o.Drain, 3*time.Minute)
	orDefault(&o.WaveTimeout, 3*time.Minute)
	orDefault(&o.Wave, 20)
	orDefault(&o.Lag, 100*time.Millisecond)
	rate := func(r *float64, def float64) {
		switch {
		case *r == 0:
			*r = def
		case *r < 0:
			*r = 0
		}
	}
	rate(&o.Conflict, 0.10)
	rate(&o.ServerError, 0.02)
	rate(&o.AppliedServerError, 0.01)
	rate(&o.AppliedTimeout, 0.01)
	rate(&o.WatchBreak, 0.002)
	rate(&o.WatchGone, 0.5)
	orDefault(&o.RestartEvery, time.Minute)
	orDefault(&o.Concurrency, 4)
	return o
}

// Soak churns WorkItems through create -> Failed -> delete against the
// racesafe controller under lag jitter, injected conflicts, server errors
// and ambiguous writes, broken watches, leader failovers and API server
// restarts, then counts what was left.
func Soak(ctx context.Context, cfg *rest.Config, o SoakOptions) (SoakReport, error) {
	o = soakDefaults(o)
	var rep SoakReport
	faults, err := racetest.NewFaults(racetest.FaultOptions{
		Seed: o.Seed, Conflict: o.Conflict, ServerError: o.ServerError,
		AppliedServerError: o.AppliedServerError, AppliedTimeout: o.AppliedTimeout,
		// Every write the controller sends, the children's creates and
		// deletes included: an ambiguous child create is what duplicates
		// children (issue 19 #10).
		Operations: []racetest.Operation{racetest.OpUpdate, racetest.OpPatch, racetest.OpStatusUpdate,
			racetest.OpStatusPatch, racetest.OpCreate, racetest.OpDelete},
	})
	if err != nil {
		return rep, err
	}
	watchFaults, err := racetest.NewWatchFaults(racetest.WatchFaultOptions{Seed: o.Seed + 1, Break: o.WatchBreak, Gone: o.WatchGone})
	if err != nil {
		return rep, err
	}
	c, err := newCluster(ctx, cfg, "soak")
	if err != nil {
		return rep, err
	}
	defer c.close(ctx)
	direct, ns := c.direct, c.ns

	rep.GoroutinesBefore, rep.HeapBefore = runtime.NumGoroutine(), liveHeap()
	m := &managers{
		cluster: c, kind: Racesafe, lag: racetest.LagOptions{Delay: o.Lag, Jitter: o.Jitter, WatchFaults: watchFaults},
		faults: faults, workers: o.Concurrency, warm: true,
		// The install poll comes back before the cache shows the child.
		installer: newInstaller(o.Lag/4, 50*time.Millisecond), cfgs: newSettings(time.Second),
	}
	lease := fmt.Sprintf("workitem-soak-%d", c.run)
	replicas, err := m.startReplicas(ctx, 2, lease, leaderElection{
		LeaseDuration: o.LeaseDuration, RenewDeadline: o.RenewDeadline, RetryPeriod: o.RetryPeriod, Replace: true,
	})
	if err != nil {
		return rep, err
	}
	defer func() { _ = replicas.Stop() }()
	exited := map[string]bool{} // replicas whose manager ended by itself
	// Failovers alternate between a lease left to expire and a handover.
	modes := []racetest.FailoverMode{racetest.Expire, racetest.Handover}
	failoverDue := false

	t0 := time.Now()
	failover := time.NewTicker(o.RestartEvery)
	defer failover.Stop()
	var apiRestart <-chan time.Time
	if o.APIServerRestartEvery > 0 && o.Restarter != nil {
		tk := time.NewTicker(o.APIServerRestartEvery)
		defer tk.Stop()
		apiRestart = tk.C
	}
	var uids []types.UID
	var pending []string // created, not yet deleted
	var waveStart time.Time
	for time.Since(t0) < o.Duration {
		select {
		case <-failover.C:
			failoverDue = true
		case <-apiRestart:
			if _, err := c.restartAPIServer(ctx, o.Restarter); err != nil {
				return rep, err
			}
			rep.APIServerRestarts++
		case <-ctx.Done():
			return rep, ctx.Err()
		default:
		}
		// Replicas that ended by themselves are replaced.
		reaped, err := replicas.Reap(ctx)
		for _, name := range reaped {
			rep.Exits++
			exited[name] = true
		}
		if err != nil {
			return rep, err
		}
		if failoverDue {
			mode := modes[(rep.Crashes+rep.Handovers)%len(modes)]
			// The stopped leader's own error ("leader election lost") is
			// how controller-runtime ends a leader: only a failover that
			// left no leader, or no standby, ends the soak.
			f, err := replicas.Failover(ctx, mode)
			switch {
			case errors.Is(err, racetest.ErrNoLeader):
				// An election under way, after an exit: fail over once it is done.
			case f.New == "" || f.Replacement == "":
				return rep, fmt.Errorf("%s: %w", mode, err)
			case mode == racetest.Handover:
				failoverDue = false
				rep.Handovers++
			default:
				failoverDue = false
				rep.Crashes++
			}
		}
		// Delete the previous wave once it has failed, then create the next.
		if len(pending) > 0 {
			if err := waitPhase(ctx, direct, ns, pending, v1.PhaseFailed, o.WaveTimeout); err != nil {
				if o.Describe != nil {
					describeStuck(ctx, o.Describe, m, replicas, lease, pending, v1.PhaseFailed, o.Goroutines)
				}
				return rep, err
			}
			rep.SlowestWave = max(rep.SlowestWave, time.Since(waveStart))
			for _, name := range pending {
				if err := direct.Delete(ctx, &v1.WorkItem{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}); client.IgnoreNotFound(err) != nil {
					return rep, err
				}
			}
		}
		pending = pending[:0]
		waveStart = time.Now()
		for range o.Wave {
			item := c.item(rep.Created)
			if err := direct.Create(ctx, item); err != nil {
				return rep, err
			}
			rep.Created++
			uids = append(uids, item.UID)
			pending = append(pending, item.Name)
		}
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "  soak %s: created %d, crashes %d, handovers %d, exits %d, API server restarts %d\n",
				time.Since(t0).Round(time.Second), rep.Created, rep.Crashes, rep.Handovers, rep.Exits, rep.APIServerRestarts)
		}
	}
	// The last wave: fail, delete, then drain.
	if err := waitPhase(ctx, direct, ns, pending, v1.PhaseFailed, o.WaveTimeout); err == nil {
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
	_ = replicas.Stop()
	rep.Injected = faults.Injected()
	rep.Watch = watchFaults.Counts()
	counted, err := c.leftovers(ctx, m.installer, nil)
	rep.DuplicateChildren, rep.LeftChildren = counted.DuplicateChildren, counted.LeftChildren
	if err != nil {
		return rep, err
	}
	for _, uid := range uids {
		by := m.installer.UninstalledBy(uid)
		for i := 1; i < len(by); i++ {
			rep.DuplicateUninstalls++
			if exited[by[i-1]] {
				rep.DuplicateUninstallsAfterExit++
			}
		}
	}
	// Goroutines of a stopped manager wind down asynchronously; give them
	// a bounded time before counting.
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return runtime.NumGoroutine() <= rep.GoroutinesBefore, nil
	})
	rep.GoroutinesAfter, rep.HeapAfter = runtime.NumGoroutine(), liveHeap()
	if o.HeapProfile != nil {
		// WriteHeapProfile reports the heap as of the last collection:
		// the one liveHeap just ran.
		if err := pprof.WriteHeapProfile(o.HeapProfile); err != nil {
			return rep, fmt.Errorf("write heap profile: %w", err)
		}
	}
	return rep, nil
}

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
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
