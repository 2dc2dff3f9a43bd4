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
	"net/http"
	"reflect"
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
	// SetupTimeout, when above 0, replaces SetupDeadline's computed limit
	// for the create flow.
	SetupTimeout time.Duration
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
	Workers    int // MaxConcurrentReconciles
	Deleted    int // items gone before the deadline
	Stuck      int // items still present at the deadline
	// Setup is how long the create flow took, first create to every item
	// Failed; SetupDeadline the limit it had.
	Setup, SetupDeadline time.Duration
	// BurstDeadline is how long after the first delete the run stopped
	// waiting (Options.Timeout); LastGone when the last removal was seen.
	BurstDeadline, LastGone time.Duration
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
	// ReconcileTime is the time the controller's workers spent in Reconcile
	// during the burst (controller-runtime's reconcile_time_seconds sum).
	ReconcileTime time.Duration
	// RoundTrips and RoundTripTime are the controller's API requests of the
	// burst (watches excepted, every resource) and the time they took.
	RoundTrips    int
	RoundTripTime time.Duration
	// StatusWrites and ObjectWrites split the WorkItem writes of the burst
	// into those of the status subresource and those of the object itself
	// (finalizer removal).
	StatusWrites, ObjectWrites int
	// Reads are the controller's WorkItem Gets through its manager's client
	// during the burst; Waited those that took at least WaitThreshold (a
	// cache Get takes microseconds), WaitP50 and WaitMax over them.
	Reads, Waited    int
	WaitP50, WaitMax time.Duration
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

// Writes is the controller's WorkItem writes during the burst.
func (r Report) Writes() int { return r.StatusWrites + r.ObjectWrites }

// WritesPerSecond is the controller's WorkItem writes per second of the burst.
func (r Report) WritesPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Writes()) / r.Elapsed.Seconds()
}

// WorkersBusy is the share of the burst the workers spent in Reconcile.
func (r Report) WorkersBusy() float64 {
	if r.Elapsed <= 0 || r.Workers <= 0 {
		return 0
	}
	return r.ReconcileTime.Seconds() / (float64(r.Workers) * r.Elapsed.Seconds())
}

// MeanRoundTrip is the mean time of the controller's requests in the burst.
func (r Report) MeanRoundTrip() time.Duration {
	if r.RoundTrips == 0 {
		return 0
	}
	return r.RoundTripTime / time.Duration(r.RoundTrips)
}

// WaitThreshold is the duration from which a Get counts as having waited.
const WaitThreshold = 10 * time.Millisecond

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
	rep := Report{Controller: kind, Items: opts.Items, Lag: opts.Lag, Workers: opts.MaxConcurrentReconciles}
	// A client-side rate limit (client-go's default for QPS 0: 5 QPS, burst 10)
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

	reads := &readTimes{}
	counted, counter := racetest.CountRequests(cfg)
	trips := &roundTrips{}
	counted.Wrap(trips.wrap)
	installer := sim.New(sim.Options{
		InstallDuration:   opts.InstallDuration,
		UninstallDuration: opts.UninstallDuration,
		FailInstall:       func(string) bool { return true },
	})
	cfgs := &settings.Manager{}
	cfgs.Set(settings.Settings{SyncStatusCheckInterval: opts.SyncStatusCheckInterval})
	name := fmt.Sprintf("workitem-%s-%d", kind, n)
	start := func() (stop func() error, err error) {
		return startManager(ctx, counted, scheme, ns, kind, name, opts, installer, cfgs, reads)
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
	setupStart := time.Now()
	rep.SetupDeadline = SetupDeadline(opts)
	rep.BurstDeadline = opts.Timeout
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
	if rep.Setup, err = awaitFailed(ctx, direct, ns, kind, opts, setupStart, rep.SetupDeadline); err != nil {
		return rep, err
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
	reads.reset()
	trips.reset()
	reconciles0 := reconcileTotal(name)
	reconcileTime0 := reconcileSeconds(name)
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
			rep.LastGone = now.Sub(t0)
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
	for r, n := range counter.Snapshot() {
		if !slices.Contains([]string{"patch", "update", "create", "delete"}, r.Verb) {
			continue
		}
		switch r.Resource {
		case "workitems/status":
			rep.StatusWrites += n
		case "workitems":
			rep.ObjectWrites += n
		}
	}
	rep.Reads, rep.Waited, rep.WaitP50, rep.WaitMax = reads.summary()
	rep.Reconciles = reconcileTotal(name) - reconciles0
	rep.ReconcileTime = time.Duration((reconcileSeconds(name) - reconcileTime0) * float64(time.Second))
	rep.RoundTrips, rep.RoundTripTime = trips.total()
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
	opts Options, installer *sim.Installer, cfgs *settings.Manager, reads *readTimes) (func() error, error) {
	mopts := manager.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		NewCache:               racetest.LaggedCache(racetest.LagOptions{Delay: opts.Lag, Jitter: opts.Jitter}),
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	}
	if kind == NaiveRYW {
		mopts.Client.Cache = &client.CacheOptions{}
		if err := readYourWrites(mopts.Client.Cache); err != nil {
			return nil, err
		}
	}
	// Every controller's client times its WorkItem Gets, so the waits of
	// the read-your-writes client are measured rather than assumed.
	var faults interceptor.Funcs
	if opts.Faults != nil {
		faults = opts.Faults.Funcs()
	}
	mopts.NewClient = func(cfg *rest.Config, o client.Options) (client.Client, error) {
		c, err := client.NewWithWatch(cfg, o)
		if err != nil {
			return nil, err
		}
		if opts.Faults != nil {
			c = interceptor.NewClient(c, faults)
		}
		return interceptor.NewClient(c, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, o ...client.GetOption) error {
				t := time.Now()
				err := c.Get(ctx, key, obj, o...)
				if _, ok := obj.(*v1.WorkItem); ok {
					reads.add(time.Since(t))
				}
				return err
			},
		}), nil
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
	return int(controllerMetric("controller_runtime_reconcile_total", name))
}

func reconcileSeconds(name string) float64 {
	return controllerMetric("controller_runtime_reconcile_time_seconds", name)
}

// controllerMetric sums a counter's values, or a histogram's sums, over the
// series of the named controller.
func controllerMetric(family, name string) float64 {
	return metricSum(family, "controller", name)
}

// metricSum sums the values of a metric family's series whose label is
// value: counters and gauges, and histograms' sums.
func metricSum(family, label, value string) float64 {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return 0
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					total += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	return total
}

// roundTrips times the requests a client sends, watches excepted.
type roundTrips struct {
	mu sync.Mutex
	n  int
	d  time.Duration
}

func (t *roundTrips) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		start := time.Now()
		resp, err := next.RoundTrip(req)
		if req.URL.Query().Get("watch") != "true" {
			t.mu.Lock()
			t.n++
			t.d += time.Since(start)
			t.mu.Unlock()
		}
		return resp, err
	})
}

func (t *roundTrips) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n, t.d = 0, 0
}

func (t *roundTrips) total() (int, time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n, t.d
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

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

// awaitFailed polls until every item is Failed with the finalizer, and says
// how far the create flow got when the deadline passes first.
func awaitFailed(ctx context.Context, c client.Client, ns string, kind Kind, opts Options, start time.Time, deadline time.Duration) (time.Duration, error) {
	reached, lastAt := -1, time.Duration(0)
	lastPrint := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, deadline-time.Since(start), true,
		func(ctx context.Context) (bool, error) {
			var list v1.WorkItemList
			if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
				return false, nil // the deadline, not one failed List, ends the wait
			}
			failed := 0
			for _, it := range list.Items {
				if it.Status.Phase == v1.PhaseFailed && controllerutil.ContainsFinalizer(&it, v1.Finalizer) {
					failed++
				}
			}
			if failed > reached {
				reached, lastAt = failed, time.Since(start)
			}
			if opts.Progress != nil && time.Since(lastPrint) >= 5*time.Second {
				lastPrint = time.Now()
				fmt.Fprintf(opts.Progress, "  %-11s setup %4d/%d Failed after %s\n", kind, failed, opts.Items, time.Since(start).Round(100*time.Millisecond))
			}
			return failed == opts.Items, nil
		})
	if err != nil {
		return 0, &SetupError{Controller: kind, Items: opts.Items, Reached: max(reached, 0), LastReachedAt: lastAt, Deadline: deadline, Err: err}
	}
	return time.Since(start), nil
}

// readTimes collects how long Gets took.
type readTimes struct {
	mu sync.Mutex
	d  []time.Duration
}

// add records d; a nil *readTimes records nothing (the soak does not time reads).
func (r *readTimes) add(d time.Duration) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.d = append(r.d, d)
}

func (r *readTimes) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.d = nil
}

// summary returns the reads, those that took WaitThreshold or longer, and
// the median and maximum of those.
func (r *readTimes) summary() (reads, waited int, p50, top time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var w []time.Duration
	for _, d := range r.d {
		if d >= WaitThreshold {
			w = append(w, d)
		}
	}
	p50, _, top = quantiles(w)
	return len(r.d), len(w), p50, top
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

// readYourWrites turns on controller-runtime's read-your-writes cache
// option for the NaiveRYW peer. The option exists from controller-runtime
// v0.25; racesafe supports v0.23 and v0.24 too, so it is set by name, and
// the peer is refused where it does not exist.
func readYourWrites(o *client.CacheOptions) error {
	f := reflect.ValueOf(o).Elem().FieldByName("EnableReadYourWritesConsistency")
	if !f.IsValid() || f.Type() != reflect.TypeFor[*bool]() {
		return fmt.Errorf("the %s peer needs controller-runtime v0.25 or later (CacheOptions.EnableReadYourWritesConsistency)", NaiveRYW)
	}
	f.Set(reflect.ValueOf(ptr.To(true)))
	return nil
}
