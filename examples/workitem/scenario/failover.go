package scenario

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1 "github.com/racesafe/racesafe/examples/workitem/api/v1alpha1"
	"github.com/racesafe/racesafe/examples/workitem/reconciler"
	"github.com/racesafe/racesafe/examples/workitem/settings"
	"github.com/racesafe/racesafe/examples/workitem/sim"
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
	// ReleaseOnCancel makes the stopped leader give up its lease (a clean
	// handover); false leaves the lease to expire, as a crash does.
	ReleaseOnCancel bool
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
	// Stopped is when the scenario cancelled its context, from the first
	// delete; zero for the replica that ran to the end.
	Stopped time.Duration
	// Reconciles during the burst, and the WorkItem object writes it sent
	// then: the finalizer releases, one per item it released plus any
	// retried after a conflict.
	Reconciles, Releases int
}

// FailoverReport is what one failover run measured.
type FailoverReport struct {
	Items, Deleted, Stuck, StuckWithFinalizer int
	// GoneAtStop is how many items were gone when the leader was stopped.
	GoneAtStop int
	// DuplicateChildren, LeftChildren and DuplicateUninstalls as in Report,
	// over both replicas: they share one Installer and one control plane.
	DuplicateChildren, LeftChildren, DuplicateUninstalls int
	// First led from the start and was stopped; Second took over.
	First, Second Replica
	Elapsed       time.Duration // first delete to last item gone (or the deadline)
}

// ErrNotElected is returned when a replica expected to lead never does.
var ErrNotElected = errors.New("replica was not elected")

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
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 1000, 2000
	scheme := Scheme()
	direct, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return rep, err
	}
	n := runs.Add(1)
	ns := fmt.Sprintf("failover-%d-%d", time.Now().UnixNano()%1e6, n)
	if err := direct.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return rep, fmt.Errorf("create namespace: %w", err)
	}
	defer releaseAll(context.WithoutCancel(ctx), direct, ns)
	children, err := watchChildren(ctx, direct, ns)
	if err != nil {
		return rep, err
	}
	defer children.stop()

	installer := sim.New(sim.Options{
		InstallDuration:   opts.Lag / 4,
		UninstallDuration: opts.UninstallDuration,
		FailInstall:       func(string) bool { return true },
	})
	cfgs := &settings.Manager{}
	cfgs.Set(settings.Settings{SyncStatusCheckInterval: settings.Default.SyncStatusCheckInterval})
	lease := fmt.Sprintf("workitem-failover-%d", n)

	// The first replica is elected before the second starts, so which one
	// leads first is decided, not raced.
	first, err := startReplica(ctx, cfg, scheme, ns, fmt.Sprintf("workitem-failover-%d-a", n), lease, opts, installer, cfgs)
	if err != nil {
		return rep, err
	}
	defer first.stop()
	if err := first.awaitElected(ctx, 4*opts.LeaseDuration); err != nil {
		return rep, fmt.Errorf("%w: %s within %s: %w", ErrNotElected, first.name, 4*opts.LeaseDuration, err)
	}
	second, err := startReplica(ctx, cfg, scheme, ns, fmt.Sprintf("workitem-failover-%d-b", n), lease, opts, installer, cfgs)
	if err != nil {
		return rep, err
	}
	defer second.stop()

	setupStart := time.Now()
	sopts := Options{Items: opts.Items, Lag: opts.Lag}
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

	var before v1.WorkItemList
	if err := direct.List(ctx, &before, client.InNamespace(ns)); err != nil {
		return rep, err
	}
	lastRV := before.ResourceVersion
	w, err := direct.Watch(ctx, &v1.WorkItemList{}, client.InNamespace(ns),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: lastRV}})
	if err != nil {
		return rep, err
	}
	defer func() { w.Stop() }()
	for _, r := range []*replica{first, second} {
		r.counter.Reset()
		r.reconciles0 = reconcileTotal(r.name)
	}
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

	gone := map[string]bool{}
	deadline := time.NewTimer(opts.Timeout)
	defer deadline.Stop()
	last := t0
	var stoppedAt time.Time
loop:
	for len(gone) < opts.Items {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				w.Stop()
				if w, err = direct.Watch(ctx, &v1.WorkItemList{}, client.InNamespace(ns),
					&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: lastRV}}); err != nil {
					return rep, fmt.Errorf("resume watch of WorkItems: %w", err)
				}
				continue
			}
			item, ok := ev.Object.(*v1.WorkItem)
			if !ok {
				continue
			}
			lastRV = item.ResourceVersion
			if ev.Type != watch.Deleted {
				continue
			}
			gone[item.Name] = true
			last = time.Now()
			if stoppedAt.IsZero() && len(gone) >= opts.StopAfter {
				rep.GoneAtStop = len(gone)
				stoppedAt = time.Now()
				// The leader's own error on the way out ("leader election
				// lost") is how controller-runtime ends a leader; not a fault.
				_ = first.stop()
			}
		case <-deadline.C:
			last = time.Now()
			break loop
		case <-ctx.Done():
			return rep, ctx.Err()
		}
	}
	rep.Elapsed = last.Sub(t0)
	rep.Deleted = len(gone)
	rep.Stuck = opts.Items - len(gone)
	_ = first.stop()
	_ = second.stop()
	rep.First, rep.Second = first.report(t0), second.report(t0)
	if !stoppedAt.IsZero() {
		rep.First.Stopped = stoppedAt.Sub(t0)
	}

	if rep.StuckWithFinalizer, err = withFinalizer(ctx, direct, ns); err != nil {
		return rep, err
	}
	rep.DuplicateUninstalls = duplicateUninstalls(installer, before.Items)
	if err := children.sync(ctx); err != nil {
		return rep, fmt.Errorf("count children: %w", err)
	}
	rep.DuplicateChildren = children.duplicates()
	if rep.LeftChildren, err = leftChildren(ctx, direct, ns); err != nil {
		return rep, fmt.Errorf("count children left: %w", err)
	}
	return rep, nil
}

func failoverDefaults(o FailoverOptions) FailoverOptions {
	if o.Items <= 0 {
		o.Items = 30
	}
	if o.Timeout <= 0 {
		o.Timeout = 60 * time.Second
	}
	if o.StopAfter <= 0 || o.StopAfter > o.Items {
		o.StopAfter = max(o.Items/3, 1)
	}
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = 4
	}
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = 2 * time.Second
	}
	if o.RenewDeadline <= 0 {
		o.RenewDeadline = 1500 * time.Millisecond
	}
	if o.RetryPeriod <= 0 {
		o.RetryPeriod = 300 * time.Millisecond
	}
	return o
}

// replica is one running manager of the racesafe controller.
type replica struct {
	name        string
	counter     *racetest.Counter
	reconciles0 int
	elected     chan struct{} // closed when it became leader
	exited      chan struct{} // closed when its manager returned
	// releaseOnCancel: stopping it hands the lease over.
	releaseOnCancel bool
	rec             *reconciler.Reconciler // for describing a stuck item

	mu        sync.Mutex
	electedAt time.Time
	stop      func() error
}

func (r *replica) report(t0 time.Time) Replica {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := Replica{
		Name:       r.name,
		Reconciles: reconcileTotal(r.name) - r.reconciles0,
		Releases:   r.counter.Count("patch", "workitems") + r.counter.Count("update", "workitems"),
	}
	if !r.electedAt.IsZero() {
		out.Led, out.Elected = true, r.electedAt.Sub(t0)
	}
	return out
}

// startReplica starts a leader-electing manager whose cache lags opts.Lag
// behind the server, running the racesafe controller under name.
func startReplica(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, ns, name, lease string,
	opts FailoverOptions, installer *sim.Installer, cfgs *settings.Manager) (*replica, error) {
	counted, counter := racetest.CountRequests(cfg)
	mopts := manager.Options{
		Scheme:                        scheme,
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		NewCache:                      racetest.LaggedCache(racetest.LagOptions{Delay: opts.Lag, Jitter: opts.Jitter, WatchFaults: opts.WatchFaults}),
		Cache:                         cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Controller:                    config.Controller{SkipNameValidation: ptr.To(true)},
		LeaderElection:                true,
		LeaderElectionID:              lease,
		LeaderElectionNamespace:       ns,
		LeaderElectionReleaseOnCancel: opts.ReleaseOnCancel,
		LeaseDuration:                 ptr.To(opts.LeaseDuration),
		RenewDeadline:                 ptr.To(opts.RenewDeadline),
		RetryPeriod:                   ptr.To(opts.RetryPeriod),
	}
	if opts.Faults != nil {
		mopts.NewClient = opts.Faults.NewClient
	}
	mgr, err := ctrl.NewManager(counted, mopts)
	if err != nil {
		return nil, err
	}
	r, err := reconciler.New(mgr, reconciler.Options{Installer: installer, Interval: cfgs.SyncStatusCheckInterval})
	if err != nil {
		return nil, err
	}
	if err := r.SetupWithManager(mgr, name, controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles}); err != nil {
		return nil, err
	}
	if opts.WarmStandby {
		if _, err := mgr.GetCache().GetInformer(ctx, &v1.WorkItem{}); err != nil {
			return nil, fmt.Errorf("warm the WorkItem informer of %s: %w", name, err)
		}
	}
	rep := &replica{name: name, counter: counter, elected: make(chan struct{}), exited: make(chan struct{}), releaseOnCancel: opts.ReleaseOnCancel, rec: r}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- mgr.Start(mctx)
		close(rep.exited)
	}()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-mgr.Elected():
			rep.mu.Lock()
			rep.electedAt = time.Now()
			rep.mu.Unlock()
			close(rep.elected)
		case <-mctx.Done():
		}
	}()
	if !mgr.GetCache().WaitForCacheSync(mctx) {
		cancel()
		<-watched
		return nil, fmt.Errorf("cache of %s did not sync: %w", name, <-done)
	}
	var once sync.Once
	var stopErr error
	rep.stop = func() error {
		once.Do(func() {
			cancel()
			stopErr = <-done
			<-watched
		})
		return stopErr
	}
	return rep, nil
}

// awaitElected polls until r leads or timeout passes.
func (r *replica) awaitElected(ctx context.Context, timeout time.Duration) error {
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		select {
		case <-r.elected:
			return true, nil
		default:
			return false, nil
		}
	})
}
