// Package scenario runs the incident as an experiment: it creates WorkItems,
// lets a controller drive them to Failed (each install creating one child
// ConfigMap), deletes them all in one burst while the controller's informer
// lags behind the API server, and measures what happens: items stuck, and
// children duplicated or left behind, counted on the server. The demo, the benchmarks and the example's integration tests all
// run it, so the figures they print come from one piece of code.
package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1 "github.com/racesafe/racesafe/examples/workitem/api/v1alpha1"
	"github.com/racesafe/racesafe/examples/workitem/naive"
	"github.com/racesafe/racesafe/examples/workitem/ported"
	"github.com/racesafe/racesafe/examples/workitem/reconciler"
	"github.com/racesafe/racesafe/examples/workitem/settings"
	"github.com/racesafe/racesafe/examples/workitem/sim"
	"github.com/racesafe/racesafe/racetest"
)

// Kind names a controller the scenario can run.
type Kind string

// The controllers a scenario can run.
const (
	Naive     Kind = "naive"      // the incident's code
	NaiveFix1 Kind = "naive+fix1" // default requeues after the configured interval
	NaiveFix2 Kind = "naive+fix2" // phase pinned in a local variable
	NaiveRYW  Kind = "naive+ryw"  // naive on controller-runtime's read-your-writes cache client
	Racesafe  Kind = "racesafe"   // built from this library
	// NaiveClient is the incident's code behind the drop-in port
	// (examples/workitem/ported).
	NaiveClient Kind = "naive+client"
)

// Kinds lists every Kind in the order the benchmarks print them.
var Kinds = []Kind{Naive, NaiveFix1, NaiveFix2, NaiveRYW, Racesafe, NaiveClient}

// ErrUnknownKind is returned for a Kind not in Kinds.
var ErrUnknownKind = errors.New("unknown controller kind")

// Options shape one run.
type Options struct {
	Items   int           // WorkItems created and deleted; default 200
	Lag     time.Duration // watch lag of the controller's informer
	Jitter  func() time.Duration
	Timeout time.Duration // how long deletion may take before items count as stuck; default 60s
	// MaxConcurrentReconciles is the same for every controller; default 4.
	MaxConcurrentReconciles int
	// UninstallDuration is how long the simulated uninstall takes.
	UninstallDuration time.Duration
	// InstallDuration is how long the simulated install takes; default a
	// quarter of the lag, so that the requeue that polls the install comes
	// back before the cache has seen the child the first reconcile created.
	// Negative means none.
	InstallDuration time.Duration
	// CreateEvery paces the creation of the items, one every CreateEvery
	// (default 10ms; negative: all at once). Items then arrive as in a live
	// cluster rather than as one backlog, whose queueing delay alone would
	// hold every install poll past the lag.
	CreateEvery time.Duration
	// SyncStatusCheckInterval is the configured requeue interval; default 2s.
	SyncStatusCheckInterval time.Duration
	// Faults, when set, wraps the controller's client (conflicts, 500s).
	Faults *racetest.Faults
	// RestartAfter, when above 0, stops the manager once that many items are
	// gone and starts a new one, to prove nothing is lost across a restart.
	RestartAfter int
	// Progress receives a line a second while the burst runs; nil for none.
	Progress io.Writer
}

// Report is what one run measured.
type Report struct {
	Controller Kind
	Items      int
	Lag        time.Duration
	Deleted    int // items gone before the deadline
	Stuck      int // items still present at the deadline
	// StuckWithFinalizer counts stuck items still holding the finalizer.
	StuckWithFinalizer int
	// DuplicateChildren counts children created beyond one per item over the
	// whole run, counted on the server by a watch (children later deleted
	// included).
	DuplicateChildren int
	// LeftChildren counts children on the server after the run whose item
	// is gone: the envtest control plane has no garbage collector, so nobody
	// else removes them.
	LeftChildren int
	// DuplicateUninstalls counts uninstalls reported done beyond one per item.
	DuplicateUninstalls int
	P50, P99, Max       time.Duration // delete request to object gone, over deleted items
	Elapsed             time.Duration // from the first delete to the last item gone (or the deadline)
	// Requests are the controller's WorkItem API requests during the delete
	// burst, by verb; ChildRequests its requests for children (ConfigMaps).
	Requests      map[string]int
	ChildRequests map[string]int
	Reconciles    int // reconciles during the delete burst
	// Error, set by callers that keep going, says why a run did not finish.
	Error string
}

// Throughput is items deleted per second of the burst.
func (r Report) Throughput() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Deleted) / r.Elapsed.Seconds()
}

// RequestsPerItem is the controller's API requests of one verb per item.
func (r Report) RequestsPerItem(verb string) float64 {
	if r.Items == 0 {
		return 0
	}
	return float64(r.Requests[verb]) / float64(r.Items)
}

// WritesPerItem is the controller's write requests (patch, update, create,
// delete) per item.
func (r Report) WritesPerItem() float64 {
	return r.RequestsPerItem("patch") + r.RequestsPerItem("update") +
		r.RequestsPerItem("create") + r.RequestsPerItem("delete")
}

// Scheme knows core types and WorkItem.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err) // static registration; cannot fail at run time
	}
	if err := v1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

var runs atomic.Int64

// Run runs the scenario once for the controller kind against the API server
// cfg reaches. It makes its own namespace and leaves no finalizer behind.
func Run(ctx context.Context, cfg *rest.Config, kind Kind, opts Options) (Report, error) {
	if !slices.Contains(Kinds, kind) {
		return Report{}, fmt.Errorf("%w: %q", ErrUnknownKind, kind)
	}
	opts = defaults(opts)
	rep := Report{Controller: kind, Items: opts.Items, Lag: opts.Lag}
	// client-go's default client-side limit (controller-runtime: 20 QPS)
	// would set the pace of every controller alike; lift it so the API
	// server and the controller's own round trips do.
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 1000, 2000
	scheme := Scheme()
	direct, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return rep, err
	}
	n := runs.Add(1)
	ns := fmt.Sprintf("scenario-%d-%d", time.Now().UnixNano()%1e6, n)
	if err := direct.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return rep, fmt.Errorf("create namespace: %w", err)
	}
	defer releaseAll(context.WithoutCancel(ctx), direct, ns)

	children, err := watchChildren(ctx, direct, ns)
	if err != nil {
		return rep, err
	}
	defer children.stop()

	counted, counter := racetest.CountRequests(cfg)
	installer := sim.New(sim.Options{
		InstallDuration:   opts.InstallDuration,
		UninstallDuration: opts.UninstallDuration,
		FailInstall:       func(string) bool { return true },
	})
	cfgs := &settings.Manager{}
	cfgs.Set(settings.Settings{SyncStatusCheckInterval: opts.SyncStatusCheckInterval})
	name := fmt.Sprintf("workitem-%s-%d", kind, n)
	start := func() (stop func() error, err error) {
		return startManager(ctx, counted, scheme, ns, kind, name, opts, installer, cfgs)
	}
	stop, err := start()
	if err != nil {
		return rep, err
	}
	defer func() {
		if stop != nil {
			_ = stop()
		}
	}()

	// Create the items and let the controller's create flow fail them all.
	pace := time.NewTicker(max(opts.CreateEvery, time.Nanosecond))
	defer pace.Stop()
	for i := range opts.Items {
		if i > 0 && opts.CreateEvery > 0 {
			select {
			case <-pace.C:
			case <-ctx.Done():
				return rep, ctx.Err()
			}
		}
		item := &v1.WorkItem{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("item-%04d", i), Namespace: ns},
			Spec:       v1.WorkItemSpec{Payload: fmt.Sprintf("payload-%d", i), DryRun: i%2 == 0},
		}
		if err := direct.Create(ctx, item); err != nil {
			return rep, fmt.Errorf("create %s: %w", item.Name, err)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, opts.Timeout+time.Duration(opts.Items)*50*time.Millisecond, true,
		func(ctx context.Context) (bool, error) {
			var list v1.WorkItemList
			if err := direct.List(ctx, &list, client.InNamespace(ns)); err != nil {
				return false, err
			}
			failed := 0
			for _, it := range list.Items {
				if it.Status.Phase == v1.PhaseFailed && controllerutil.ContainsFinalizer(&it, v1.Finalizer) {
					failed++
				}
			}
			return failed == opts.Items, nil
		})
	if err != nil {
		return rep, fmt.Errorf("%s: items did not all reach Failed: %w", kind, err)
	}

	// The burst: watch for removals, then delete everything at once.
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
	counter.Reset()
	reconciles0 := reconcileTotal(name)
	deletedAt := make(map[string]time.Time, opts.Items)
	var mu sync.Mutex
	t0 := time.Now()
	var g sync.WaitGroup
	errs := make(chan error, opts.Items)
	for i := range opts.Items {
		g.Go(func() {
			item := &v1.WorkItem{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("item-%04d", i), Namespace: ns}}
			at := time.Now()
			if err := direct.Delete(ctx, item); err != nil {
				errs <- err
				return
			}
			mu.Lock()
			deletedAt[item.Name] = at
			mu.Unlock()
		})
	}
	g.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return rep, fmt.Errorf("delete: %w", err)
	}

	gone := map[string]time.Duration{}
	deadline := time.NewTimer(opts.Timeout)
	defer deadline.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	restarted := false
	last := t0
loop:
	for len(gone) < opts.Items {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				// The server ends watches when it likes; resume from the last
				// event seen, so no removal is missed.
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
			now := time.Now()
			mu.Lock()
			gone[item.Name] = now.Sub(deletedAt[item.Name])
			mu.Unlock()
			last = now
			if opts.RestartAfter > 0 && !restarted && len(gone) >= opts.RestartAfter {
				restarted = true
				if err := stop(); err != nil {
					return rep, fmt.Errorf("stop manager: %w", err)
				}
				if stop, err = start(); err != nil {
					return rep, fmt.Errorf("restart manager: %w", err)
				}
			}
		case <-tick.C:
			if opts.Progress != nil {
				fmt.Fprintf(opts.Progress, "  %-11s %4d/%d gone after %s\n", kind, len(gone), opts.Items, time.Since(t0).Round(100*time.Millisecond))
			}
		case <-deadline.C:
			last = time.Now()
			break loop
		case <-ctx.Done():
			return rep, ctx.Err()
		}
	}
	rep.Elapsed = last.Sub(t0)
	rep.Requests = byVerb(counter, "workitems", "workitems/status")
	rep.ChildRequests = byVerb(counter, "configmaps")
	rep.Reconciles = reconcileTotal(name) - reconciles0
	rep.Deleted = len(gone)
	rep.Stuck = opts.Items - len(gone)
	lat := make([]time.Duration, 0, len(gone))
	for _, d := range gone {
		lat = append(lat, d)
	}
	rep.P50, rep.P99, rep.Max = quantiles(lat)

	if err := stop(); err != nil {
		return rep, fmt.Errorf("stop manager: %w", err)
	}
	stop = nil
	var left v1.WorkItemList
	if err := direct.List(ctx, &left, client.InNamespace(ns)); err != nil {
		return rep, err
	}
	for _, it := range left.Items {
		if controllerutil.ContainsFinalizer(&it, v1.Finalizer) {
			rep.StuckWithFinalizer++
		}
	}
	for _, it := range before.Items {
		if n := installer.Uninstalled(it.UID); n > 1 {
			rep.DuplicateUninstalls += n - 1
		}
	}
	if err := children.sync(ctx); err != nil {
		return rep, fmt.Errorf("count children: %w", err)
	}
	rep.DuplicateChildren = children.duplicates()
	if rep.LeftChildren, err = leftChildren(ctx, direct, ns); err != nil {
		return rep, fmt.Errorf("count children left: %w", err)
	}
	return rep, nil
}

func defaults(o Options) Options {
	if o.Items <= 0 {
		o.Items = 200
	}
	if o.Timeout <= 0 {
		o.Timeout = 60 * time.Second
	}
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = 4
	}
	switch {
	case o.CreateEvery == 0:
		o.CreateEvery = 10 * time.Millisecond
	case o.CreateEvery < 0:
		o.CreateEvery = 0
	}
	switch {
	case o.InstallDuration == 0:
		o.InstallDuration = o.Lag / 4
	case o.InstallDuration < 0:
		o.InstallDuration = 0
	}
	if o.SyncStatusCheckInterval <= 0 {
		o.SyncStatusCheckInterval = settings.Default.SyncStatusCheckInterval
	}
	return o
}

// startManager starts a manager whose cache sees watch events opts.Lag late,
// while its writes and live reads go straight to the server.
func startManager(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, ns string, kind Kind, name string,
	opts Options, installer *sim.Installer, cfgs *settings.Manager) (func() error, error) {
	mopts := manager.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		NewCache:               racetest.LaggedCache(racetest.LagOptions{Delay: opts.Lag, Jitter: opts.Jitter}),
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	}
	if kind == NaiveRYW {
		mopts.Client.Cache = &client.CacheOptions{EnableReadYourWritesConsistency: ptr.To(true)}
	}
	if opts.Faults != nil {
		funcs := opts.Faults.Funcs()
		mopts.NewClient = func(cfg *rest.Config, o client.Options) (client.Client, error) {
			c, err := client.NewWithWatch(cfg, o)
			if err != nil {
				return nil, err
			}
			return interceptor.NewClient(c, funcs), nil
		}
	}
	mgr, err := ctrl.NewManager(cfg, mopts)
	if err != nil {
		return nil, err
	}
	copts := controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles}
	switch kind {
	case NaiveClient:
		err = ported.SetupWithManager(mgr, &naive.Controller{Client: mgr.GetClient(), ConfigManager: cfgs, Installer: installer, Variant: naive.Incident},
			name, copts)
	case Racesafe:
		var r *reconciler.Reconciler
		if r, err = reconciler.New(mgr, reconciler.Options{Installer: installer, Interval: cfgs.SyncStatusCheckInterval}); err == nil {
			err = r.SetupWithManager(mgr, name, copts)
		}
	default:
		variant := map[Kind]naive.Variant{Naive: naive.Incident, NaiveRYW: naive.Incident, NaiveFix1: naive.Fix1, NaiveFix2: naive.Fix2}[kind]
		err = (&naive.Controller{Client: mgr.GetClient(), ConfigManager: cfgs, Installer: installer, Variant: variant}).
			SetupWithManager(mgr, name, copts)
	}
	if err != nil {
		return nil, err
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	if !mgr.GetCache().WaitForCacheSync(mctx) {
		cancel()
		return nil, fmt.Errorf("cache of %s did not sync: %w", name, <-done)
	}
	var once sync.Once
	var stopErr error
	return func() error {
		once.Do(func() {
			cancel()
			stopErr = <-done
		})
		return stopErr
	}, nil
}

// releaseAll removes the finalizers a stuck run leaves behind, so a
// namespace never outlives the scenario holding objects.
func releaseAll(ctx context.Context, c client.Client, ns string) {
	var list v1.WorkItemList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return
	}
	for i := range list.Items {
		it := &list.Items[i]
		if controllerutil.RemoveFinalizer(it, v1.Finalizer) {
			if err := c.Update(ctx, it); err != nil && !apierrors.IsNotFound(err) {
				continue
			}
		}
		_ = c.Delete(ctx, it)
	}
}

func reconcileTotal(name string) int {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return 0
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == name {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return int(total)
}

func quantiles(d []time.Duration) (p50, p99, top time.Duration) {
	if len(d) == 0 {
		return 0, 0, 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	at := func(q float64) time.Duration {
		i := int(q*float64(len(d))+0.5) - 1
		return d[min(max(i, 0), len(d)-1)]
	}
	return at(0.50), at(0.99), d[len(d)-1]
}

// byVerb sums the requests for the resources (subresources named as
// "workitems/status") by verb.
func byVerb(c *racetest.Counter, resources ...string) map[string]int {
	out := map[string]int{}
	for r, n := range c.Snapshot() {
		if slices.Contains(resources, r.Resource) {
			out[r.Verb] += n
		}
	}
	return out
}
