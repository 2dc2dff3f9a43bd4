package scenario

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"runtime/pprof"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
	// RestartEvery (default 1m) the leader is stopped, alternately as a
	// crash (its lease left to expire) and as a clean handover; the standby
	// takes over and a new standby is started, its informers warm before
	// it leads. A replica whose manager exits by itself (a lost lease while
	// the API server is down) is replaced too, as a Deployment would.
	RestartEvery time.Duration
	// Every APIServerRestartEvery kube-apiserver is stopped, a request is
	// seen failing, and it is started again on the same etcd:
	// StopAPIServer and StartAPIServer do it (see RestartOptions). Zero,
	// or either func nil, means no API server restarts.
	APIServerRestartEvery         time.Duration
	StopAPIServer, StartAPIServer func() error
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
	// Crashes and Handovers count the leaders stopped each way; Exits the
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
	if o.Duration <= 0 {
		o.Duration = 5 * time.Minute
	}
	if o.Drain <= 0 {
		o.Drain = 3 * time.Minute
	}
	if o.WaveTimeout <= 0 {
		o.WaveTimeout = 3 * time.Minute
	}
	if o.Wave <= 0 {
		o.Wave = 20
	}
	if o.Lag <= 0 {
		o.Lag = 100 * time.Millisecond
	}
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
	if o.RestartEvery <= 0 {
		o.RestartEvery = time.Minute
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
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
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 1000, 2000
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
	watches := []*childWatch{children}
	defer func() {
		for _, w := range watches {
			w.stop()
		}
	}()

	rep.GoroutinesBefore, rep.HeapBefore = runtime.NumGoroutine(), liveHeap()
	installer := sim.New(sim.Options{
		FailInstall:       func(string) bool { return true },
		InstallDuration:   o.Lag / 4, // the install poll comes back before the cache shows the child
		UninstallDuration: 50 * time.Millisecond,
	})
	cfgs := &settings.Manager{}
	cfgs.Set(settings.Settings{SyncStatusCheckInterval: time.Second})
	fopts := failoverDefaults(FailoverOptions{
		Lag: o.Lag, Jitter: o.Jitter, Faults: faults, WatchFaults: watchFaults,
		MaxConcurrentReconciles: o.Concurrency, WarmStandby: true,
		LeaseDuration: o.LeaseDuration, RenewDeadline: o.RenewDeadline, RetryPeriod: o.RetryPeriod,
	})
	exited := map[string]bool{} // replicas whose manager ended by itself
	lease := fmt.Sprintf("workitem-soak-%d", n)
	replicas := 0
	start := func(release bool) (*replica, error) {
		replicas++
		opts := fopts
		opts.ReleaseOnCancel = release
		name := fmt.Sprintf("workitem-soak-%d-%d", n, replicas)
		return startReplica(ctx, cfg, scheme, ns, name, lease, opts, installer.As(name), cfgs)
	}
	leader, err := start(false)
	if err != nil {
		return rep, err
	}
	if err := leader.awaitElected(ctx, 4*fopts.LeaseDuration); err != nil {
		_ = leader.stop()
		return rep, fmt.Errorf("%w: %s: %w", ErrNotElected, leader.name, err)
	}
	standby, err := start(true)
	if err != nil {
		_ = leader.stop()
		return rep, err
	}
	stopAll := func() {
		_ = leader.stop()
		_ = standby.stop()
	}
	defer stopAll()
	// replace starts a new standby for the one that became leader or
	// exited. It stops the other way than the leader does, so that
	// failovers alternate between crashes and handovers.
	replace := func() error {
		var err error
		standby, err = start(!leader.releaseOnCancel)
		return err
	}

	t0 := time.Now()
	failover := time.NewTicker(o.RestartEvery)
	defer failover.Stop()
	var apiRestart <-chan time.Time
	if o.APIServerRestartEvery > 0 && o.StopAPIServer != nil && o.StartAPIServer != nil {
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
			crash := !leader.releaseOnCancel
			_ = leader.stop() // "leader election lost" is how a leader ends
			if crash {
				rep.Crashes++
			} else {
				rep.Handovers++
			}
			leader = standby
			if err := replace(); err != nil {
				return rep, fmt.Errorf("start standby: %w", err)
			}
		case <-apiRestart:
			// A watch cannot be resumed across the restart: count children
			// with a new one after it.
			watches[len(watches)-1].stop()
			if err := restartAPIServer(ctx, direct, ns, o.StopAPIServer, o.StartAPIServer, time.Minute); err != nil {
				return rep, err
			}
			rep.APIServerRestarts++
			w, err := watchChildren(ctx, direct, ns)
			if err != nil {
				return rep, err
			}
			watches = append(watches, w)
		case <-ctx.Done():
			return rep, ctx.Err()
		default:
		}
		// Replicas that ended by themselves are replaced.
		for _, r := range []**replica{&leader, &standby} {
			select {
			case <-(*r).exited:
				_ = (*r).stop()
				rep.Exits++
				exited[(*r).name] = true
				if *r == leader {
					leader = standby
				}
				if err := replace(); err != nil {
					return rep, fmt.Errorf("replace exited replica: %w", err)
				}
			default:
			}
		}
		// Delete the previous wave once it has failed, then create the next.
		if len(pending) > 0 {
			if err := waitPhase(ctx, direct, ns, pending, v1.PhaseFailed, o.WaveTimeout); err != nil {
				if o.Describe != nil {
					describeStuck(ctx, o.Describe, direct, ns, lease, pending, v1.PhaseFailed, []*replica{leader, standby}, o.Goroutines)
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
			item := &v1.WorkItem{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("soak-%06d", rep.Created), Namespace: ns},
				Spec:       v1.WorkItemSpec{Payload: "soak", DryRun: rep.Created%2 == 0},
			}
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
	stopAll()
	rep.Injected = faults.Injected()
	rep.Watch = watchFaults.Counts()
	if err := watches[len(watches)-1].sync(ctx); err != nil {
		return rep, fmt.Errorf("count children: %w", err)
	}
	rep.DuplicateChildren = mergedDuplicates(watches...)
	for _, uid := range uids {
		by := installer.UninstalledBy(uid)
		for i := 1; i < len(by); i++ {
			rep.DuplicateUninstalls++
			if exited[by[i-1]] {
				rep.DuplicateUninstallsAfterExit++
			}
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

// SeededJitter returns a lag jitter uniform in [0, max) from seed, safe for
// the concurrent calls of racetest.LagOptions.Jitter.
func SeededJitter(seed uint64, max time.Duration) func() time.Duration {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return func() time.Duration {
		if max <= 0 {
			return 0
		}
		mu.Lock()
		defer mu.Unlock()
		return time.Duration(rng.Int64N(int64(max)))
	}
}

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// restartAPIServer stops kube-apiserver, waits until a request fails, starts
// it again and waits until it serves.
func restartAPIServer(ctx context.Context, c client.Client, ns string, stop, start func() error, timeout time.Duration) error {
	if err := stop(); err != nil {
		return fmt.Errorf("stop API server: %w", err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		return c.List(ctx, &v1.WorkItemList{}, client.InNamespace(ns)) != nil, nil
	}); err != nil {
		return fmt.Errorf("API server still serving after its stop: %w", err)
	}
	if err := start(); err != nil {
		return fmt.Errorf("start API server again: %w", err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		return c.List(ctx, &v1.WorkItemList{}, client.InNamespace(ns)) == nil, nil
	}); err != nil {
		return fmt.Errorf("API server did not serve again: %w", err)
	}
	return nil
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
