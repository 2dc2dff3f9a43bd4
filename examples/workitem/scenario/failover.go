package scenario

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/rest"

	"github.com/racesafe/racesafe/examples/workitem/settings"
	"github.com/racesafe/racesafe/racetest"
)

// FailoverOptions shape one failover run.
type FailoverOptions struct {
	Items   int           // WorkItems created and deleted; default 30
	Lag     time.Duration // watch lag of both replicas' informers
	Timeout time.Duration // how long deletion may take; default 60s
	// StopAfter is how many items are gone when the leader is stopped;
	// default a third of Items.
	StopAfter int
	// UninstallDuration is how long the simulated uninstall takes, so that
	// uninstalls are in flight when the leader stops.
	UninstallDuration time.Duration
	// MaxConcurrentReconciles of each replica; default 4.
	MaxConcurrentReconciles int
	// LeaseDuration, RenewDeadline and RetryPeriod of the leader election;
	// default 2s, 1.5s and 300ms.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Mode is how the leader is stopped: racetest.Expire (the default), its
	// reconciles finishing but its lease left to expire, as a manager built
	// without LeaderElectionReleaseOnCancel stops; racetest.Handover, its
	// lease released; or racetest.Crash, cut off the API server at once.
	Mode racetest.FailoverMode
	// WarmStandby starts each replica's WorkItem informer before it leads,
	// as a field index registered at setup does. Otherwise controller-runtime
	// starts it when the controller starts, on election, with a List as
	// fresh as the API server; a warm standby's cache instead lags the old
	// leader's last writes by up to Lag.
	WarmStandby bool
	// Jitter, Faults and WatchFaults, if set, apply to both replicas as in
	// Options: lag jitter, injected client faults, broken watches.
	Jitter      func() time.Duration
	Faults      *racetest.Faults
	WatchFaults *racetest.WatchFaults
}

// Replica is what one manager replica did during a failover run.
type Replica struct {
	Name string // its controller's name
	// Elected is when it became leader, from the first delete of the burst
	// (negative: before the burst); Led says whether it ever did.
	Elected time.Duration
	Led     bool
	// Stopped is when the scenario stopped it (racetest.Failover.Stopped),
	// from the first delete; zero for the replica that ran to the end.
	Stopped time.Duration
	// Reconciles during the burst, and the WorkItem object writes it sent
	// then: the finalizer releases, one per item it released plus any
	// retried after a conflict.
	Reconciles, Releases int
}

// FailoverReport is what one failover run measured.
type FailoverReport struct {
	Items, Deleted, Stuck int
	// GoneAtStop is how many items were gone when the leader was stopped.
	GoneAtStop int
	// Leftovers as in Report, over both replicas: they share one Installer
	// and one control plane.
	Leftovers
	// First led from the start and was stopped; Second took over.
	First, Second Replica
	Elapsed       time.Duration // first delete to last item gone (or the deadline)
}

// ErrNotElected is matched by the error of a run whose replica expected to
// lead never does.
//
// Deprecated: use racetest.ErrNotElected, which it is.
var ErrNotElected = racetest.ErrNotElected

// RunFailover runs the delete burst of Run for the racesafe controller on
// two manager replicas with leader election: the first replica leads, is
// stopped once opts.StopAfter items are gone, and the second takes over
// and finishes.
//
// What the new leader can and cannot know. Its expectations tracker and
// owner tracker start empty: it knows nothing of the old leader's writes
// except what it reads. Its cache may lag them: controller-runtime starts
// an informer when the controller starts, on election, with a List as
// fresh as the API server, but a warm standby (WarmStandby) has watched
// all along, up to Lag behind. So before acting on any item the new leader
// primes its tracker with one live List (expectations.Tracker.Prime):
// every cached item older than the server's copy, or deleted on the
// server, is refused until the cache has caught up. What it cannot know
// are writes that land after that List (another replica still writing)
// and side effects the old leader ran without writing them down. Every
// write is conditional, so the first cannot be doubled: a phase transition
// is a compare-and-swap on the phase, and every patch carries a
// resourceVersion precondition, so a write decided on an old copy is
// refused and decided again on the live object; an item is released at
// most once. For the second, a stopping leader finishes the reconciles in
// flight of items being deleted on a context the stop does not cancel
// (reconciler.Options.FinishTimeout), so an uninstall it saw done is
// released rather than left for the new leader to ask again. A process
// killed outright between the two cannot be helped: the new leader asks
// the installer again (it is idempotent per UID), and DuplicateUninstalls
// counts it.
func RunFailover(ctx context.Context, cfg *rest.Config, opts FailoverOptions) (FailoverReport, error) {
	opts = failoverDefaults(opts)
	rep := FailoverReport{Items: opts.Items}
	c, err := newCluster(ctx, cfg, "failover")
	if err != nil {
		return rep, err
	}
	defer c.close(ctx)

	m := &managers{
		cluster: c, kind: Racesafe, lag: racetest.LagOptions{Delay: opts.Lag, Jitter: opts.Jitter, WatchFaults: opts.WatchFaults},
		faults: opts.Faults, workers: opts.MaxConcurrentReconciles, warm: opts.WarmStandby,
		installer: newInstaller(opts.Lag/4, opts.UninstallDuration), cfgs: newSettings(settings.Default.SyncStatusCheckInterval),
	}
	// Replica 0 is elected before replica 1 starts, so which one leads
	// first is decided, not raced.
	replicas, err := m.startReplicas(ctx, 2, fmt.Sprintf("workitem-failover-%d", c.run), leaderElection{
		LeaseDuration: opts.LeaseDuration, RenewDeadline: opts.RenewDeadline, RetryPeriod: opts.RetryPeriod,
	})
	if err != nil {
		return rep, err
	}
	defer func() { _ = replicas.Stop() }()
	names := replicas.Names()
	first, second := names[0], names[1]

	// Created at once, with the setup deadline of items created at the
	// burst's pace.
	sopts := Options{Items: opts.Items, Lag: opts.Lag}
	setupDeadline := SetupDeadline(sopts)
	sopts.CreateEvery = -1
	if _, err := c.setup(ctx, Racesafe, defaults(sopts), setupDeadline); err != nil {
		return rep, err
	}
	removed, before, err := c.watchRemovals(ctx)
	if err != nil {
		return rep, err
	}
	defer removed.stop()
	type baseline struct{ reconciles, releases int }
	base := map[string]baseline{}
	for _, name := range names {
		base[name] = baseline{reconcileTotal(name), releases(replicas, name)}
	}
	t0 := time.Now()
	if _, err := c.deleteAll(ctx, opts.Items); err != nil {
		return rep, err
	}

	// The leader is stopped from a goroutine of its own: Failover returns
	// once the other replica is elected, and the removals of the stop go
	// on being counted meanwhile.
	type failover struct {
		racetest.Failover
		err error
	}
	var failed chan failover
	gone, last, err := removed.await(ctx, opts.Items, t0, opts.Timeout, func(_ removal, n int) error {
		if failed == nil && n >= opts.StopAfter {
			rep.GoneAtStop = n
			failed = make(chan failover, 1)
			go func() {
				f, err := replicas.Failover(ctx, opts.Mode)
				failed <- failover{f, err}
			}()
		}
		return nil
	}, nil)
	if err != nil {
		return rep, err
	}
	rep.Elapsed = last.Sub(t0)
	rep.Deleted = gone
	rep.Stuck = opts.Items - gone
	var stopped time.Time
	if failed != nil {
		f := <-failed
		// The leader's own error on the way out ("leader election lost")
		// is how controller-runtime ends a leader; not a fault. No new
		// leader is.
		if f.New == "" {
			return rep, f.err
		}
		stopped = f.Stopped
	}
	if err := replicas.Stop(); err != nil {
		return rep, err
	}
	report := func(name string) Replica {
		out := Replica{
			Name:       name,
			Reconciles: reconcileTotal(name) - base[name].reconciles,
			Releases:   releases(replicas, name) - base[name].releases,
		}
		if st, _ := replicas.State(name); !st.Elected.IsZero() {
			out.Led, out.Elected = true, st.Elected.Sub(t0)
		}
		return out
	}
	rep.First, rep.Second = report(first), report(second)
	if !stopped.IsZero() {
		rep.First.Stopped = stopped.Sub(t0)
	}
	rep.Leftovers, err = c.leftovers(ctx, m.installer, before)
	return rep, err
}

// releases counts the WorkItem object writes the named replica sent: the
// finalizer releases, one per item it released plus any retried.
func releases(replicas *racetest.Replicas, name string) int {
	st, ok := replicas.State(name)
	if !ok {
		return 0
	}
	return st.Requests.Count("patch", "workitems") + st.Requests.Count("update", "workitems")
}

func failoverDefaults(o FailoverOptions) FailoverOptions {
	orDefault(&o.Items, 30)
	orDefault(&o.Timeout, 60*time.Second)
	if o.StopAfter <= 0 || o.StopAfter > o.Items {
		o.StopAfter = max(o.Items/3, 1)
	}
	orDefault(&o.MaxConcurrentReconciles, 4)
	if o.Mode == 0 {
		o.Mode = racetest.Expire
	}
	return o
}
