package racetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// ExploreOptions describe the controller Explore tests and the work that
// drives it. Scheme, Setup, Workload and Settled are required; the rest
// are safe at their zero values.
type ExploreOptions struct {
	// Scheme knows the controller's kinds.
	Scheme *runtime.Scheme
	// Setup registers the controller on a manager, as its SetupWithManager
	// does. It is called once per run, and again after a plan's crash, on
	// a new manager: build the controller's state inside it.
	Setup func(mgr manager.Manager) error
	// Workload drives the controller in namespace, through c (a client of
	// the API server, not of the controller's cache): create, update,
	// delete, waiting for what it needs. It must return within
	// PlanTimeout. Its writes are recorded, for the plans that act on
	// someone else's writes; a delete through c reads the object before
	// and after, to know the versions around it.
	Workload func(ctx context.Context, c client.Client, namespace string) error
	// Settled reports whether the work is done in namespace; a run that
	// does not settle within PlanTimeout fails the liveness oracle.
	Settled func(ctx context.Context, c client.Reader, namespace string) (bool, error)
	// Kinds are counted in the end state and compared with the reference
	// run's count; every kind the controller creates is also counted by
	// its Creates. Optional.
	Kinds []client.Object
	// PlanTimeout bounds one run, workload and settling; 10 s when zero.
	PlanTimeout time.Duration
	// Hold is how long a held watch stays held after the controller's read
	// that it made stale, and how long a time travel's older view lasts;
	// 500 ms when zero. A watch held for a read (or, in UnobservedState,
	// a workload's write) that never comes is let go after 3×Hold+1 s or
	// half of PlanTimeout, whichever is longer.
	Hold time.Duration
	// MaxPlans bounds the plans derived from the reference; 64 when zero.
	MaxPlans int
	// Parallel is how many plans run at once, each in its own namespace
	// with its own manager; 2 when zero.
	Parallel int
	// Plans, when set, runs only the plans of these names; so does the
	// environment variable RACESAFE_EXPLORE_PLAN (comma-separated), which
	// the report's replay command sets.
	Plans []string
	// TestName names the go test that runs Explore, for the replay command
	// in the report ("TestExplore"); optional.
	TestName string
	// SideEffects, when set, counts what the controller did outside the
	// API server in namespace (installs run, messages sent); each count
	// must equal the reference run's. It is called once a run has settled
	// or timed out. Nil counts nothing. Count what the workload decides,
	// not what timing does: a count that depends on how many of the
	// workload's writes one reconcile saw at once (a write the workload
	// makes before the controller has acted on the previous one) differs
	// between unperturbed runs too, and fails a plan that changed nothing.
	SideEffects func(namespace string) map[string]int
}

// ErrExploreOptions is matched by errors.Is for every error of options
// Explore refuses.
var ErrExploreOptions = errors.New("invalid ExploreOptions")

// PlanKind is a kind of stale view Explore gives the controller.
type PlanKind string

// The plan kinds.
const (
	// StaleReadAfterWrite: at the controller's write of an object, the
	// watch of its kind is held until the controller has read the object
	// from its cache: the read serves the version before the write (the
	// incident).
	StaleReadAfterWrite PlanKind = "stale-read-after-write"
	// StaleListAfterCreate: at the controller's create of an object, the
	// watch of its kind is held until the controller has Listed the kind:
	// the List lacks the object (duplicate children).
	StaleListAfterCreate PlanKind = "stale-list-after-create"
	// StaleListAfterDelete: as StaleListAfterCreate, for a delete: the
	// List still shows the object.
	StaleListAfterDelete PlanKind = "stale-list-after-delete"
	// CrashAfterWrite: the manager stops right after the controller's
	// write succeeded, and a new one (fresh memory, fresh cache) finishes
	// the work.
	CrashAfterWrite PlanKind = "crash-after-write"
	// AmbiguousWrite: the server applies the controller's write, and the
	// controller is answered with a 500.
	AmbiguousWrite PlanKind = "ambiguous-write"
	// UnobservedState: at the workload's write of an object, the watch of
	// its kind is held; once the workload's next write of the object is
	// answered, the watch breaks, its resumption is answered 410 Gone and
	// the informer relists: the version the first write made is never
	// delivered, only the last (a relist after a broken watch).
	UnobservedState PlanKind = "unobserved-state"
	// TimeTravel: once the controller's informer has delivered the version
	// a write made, its watch breaks and the relist is served at the
	// object's resourceVersion before that write, as a lagging API server
	// serves it, and the watch from there is held for Hold: the
	// controller's view goes back, then forward again.
	TimeTravel PlanKind = "time-travel"
)

// Plan is one perturbation of the controller's view, named so that it can
// be replayed alone: "<kind>/<object kind>/<verb>#<n>", the n-th write of
// that verb on that object kind in the run.
//
// Writes of the workload (UnobservedState, and TimeTravel back from a
// workload's write) have verbs prefixed "workload-".
type Plan struct {
	Name    string
	Kind    PlanKind
	Object  string // the object kind written: "WorkItem"
	Verb    string // create, update, patch, delete, status-update, status-patch
	Ordinal int

	gvk schema.GroupVersionKind
}

// PlanResult is what one run found.
type PlanResult struct {
	Plan Plan
	// Perturbation says what was done to the controller's view, in one
	// sentence; empty when the plan's write never came (the run is then
	// not a test of the plan).
	Perturbation string
	// Known and Served are the resourceVersions the perturbation set
	// apart: the one the controller had been answered (or the informer had
	// delivered, or the workload had written), and the one its cache
	// served instead (or the informer delivered next); empty where the
	// plan serves no version (a crash) or did not happen.
	Known, Served string
	// Failures name each oracle that failed, in one sentence each.
	Failures []string
	Elapsed  time.Duration
	// Namespace is where the run ran; Explore leaves it for inspection.
	Namespace string
	// Replay is the command that runs this plan alone.
	Replay string
}

// Failed reports whether an oracle failed.
func (p PlanResult) Failed() bool { return len(p.Failures) > 0 }

// ExploreReport is the outcome of Explore.
type ExploreReport struct {
	// Reference is the unperturbed run the plans were derived from.
	Reference PlanResult
	Plans     []PlanResult
	Elapsed   time.Duration
}

// Failed returns the plans an oracle failed.
func (r *ExploreReport) Failed() []PlanResult {
	var out []PlanResult
	for _, p := range r.Plans {
		if p.Failed() {
			out = append(out, p)
		}
	}
	return out
}

// String is the report a user reads: each failing plan with its
// perturbation, its failed oracles and its replay command; each passing
// plan on one line.
func (r *ExploreReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "explored %d plans in %s (reference %s)\n", len(r.Plans), r.Elapsed.Round(time.Millisecond), r.Reference.Elapsed.Round(time.Millisecond))
	for _, p := range r.Plans {
		if !p.Failed() {
			continue
		}
		what := p.Perturbation
		if what == "" {
			what = "none: the run took another path and the plan's perturbation did not happen, so the controller fails this way without it too (rerun the plan)"
		}
		fmt.Fprintf(&b, "FAIL %s (%s)\n  perturbation: %s\n", p.Plan.Name, p.Elapsed.Round(time.Millisecond), what)
		for _, f := range p.Failures {
			fmt.Fprintf(&b, "  oracle: %s\n", f)
		}
		fmt.Fprintf(&b, "  replay: %s\n", p.Replay)
	}
	for _, p := range r.Plans {
		if p.Failed() {
			continue
		}
		what := p.Perturbation
		if what == "" {
			what = "its perturbation did not happen in this run (it took another path)"
		}
		fmt.Fprintf(&b, "ok   %s (%s): %s\n", p.Plan.Name, p.Elapsed.Round(time.Millisecond), what)
	}
	return b.String()
}

func (o ExploreOptions) validate() (ExploreOptions, error) {
	switch {
	case o.Scheme == nil:
		return o, fmt.Errorf("Scheme is nil: %w", ErrExploreOptions)
	case o.Setup == nil:
		return o, fmt.Errorf("Setup is nil: %w", ErrExploreOptions)
	case o.Workload == nil:
		return o, fmt.Errorf("Workload is nil: %w", ErrExploreOptions)
	case o.Settled == nil:
		return o, fmt.Errorf("Settled is nil: %w", ErrExploreOptions)
	case o.PlanTimeout < 0, o.Hold < 0, o.MaxPlans < 0, o.Parallel < 0:
		return o, fmt.Errorf("a negative PlanTimeout, Hold, MaxPlans or Parallel: %w", ErrExploreOptions)
	}
	if o.PlanTimeout == 0 {
		o.PlanTimeout = 10 * time.Second
	}
	if o.Hold == 0 {
		o.Hold = 500 * time.Millisecond
	}
	if o.MaxPlans == 0 {
		o.MaxPlans = 64
	}
	if o.Parallel == 0 {
		o.Parallel = 2
	}
	if env := os.Getenv("RACESAFE_EXPLORE_PLAN"); env != "" {
		o.Plans = append(slices.Clone(o.Plans), strings.Split(env, ",")...)
	}
	return o, nil
}

// Explore runs the controller Setup registers on the API server cfg
// reaches (envtest), drives it with Workload, and looks for where it breaks
// when its view of the cluster is behind. A reference run records what the
// controller and the workload wrote and what the controller read; the plans
// derived from that trace each give it one stale view a real cluster can
// produce (see PlanKind), in a namespace and a manager of its own, and
// judge the run against the reference: it settles within PlanTimeout
// (liveness), no reconcile panics, it creates no more objects of a kind and
// ends with as many of each of Kinds (safety, end state), it sends no more
// writes with a precondition older than a version already answered (stale
// writes), and each SideEffects count equals the reference's. An error is
// returned for invalid options, a control plane that fails, or five
// unperturbed runs none of which settles without a panic.
func Explore(ctx context.Context, cfg *rest.Config, opts ExploreOptions) (*ExploreReport, error) {
	opts, err := opts.validate()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	id := explorations.Add(1)
	direct, err := client.NewWithWatch(cfg, client.Options{Scheme: opts.Scheme})
	if err != nil {
		return nil, fmt.Errorf("explore: client: %w", err)
	}
	ref, err := reference(ctx, opts, cfg, direct, id)
	if err != nil {
		return nil, err
	}
	report := &ExploreReport{Reference: PlanResult{Plan: Plan{Name: "reference"}, Elapsed: ref.elapsed}}
	plans := derivePlans(ref, opts.MaxPlans)
	if len(opts.Plans) > 0 {
		plans = slices.DeleteFunc(plans, func(p Plan) bool { return !slices.Contains(opts.Plans, p.Name) })
	}
	results := make([]PlanResult, len(plans))
	sem := make(chan struct{}, opts.Parallel)
	var wg sync.WaitGroup
	var firstErr error
	var errMu sync.Mutex
	for i, p := range plans {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r := &exploreRun{opts: opts, cfg: cfg, direct: direct, ns: namespaceFor(id, p.Name, 0), plan: &p}
			if err := r.run(ctx); err != nil {
				errMu.Lock()
				firstErr = cmpErr(firstErr, err)
				errMu.Unlock()
				return
			}
			results[i] = PlanResult{Plan: p, Perturbation: r.evidence, Known: r.known, Served: r.served, Failures: r.failures(ref), Elapsed: r.elapsed, Namespace: r.ns, Replay: replay(opts.TestName, p.Name)}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	report.Plans = results
	report.Elapsed = time.Since(start)
	return report, nil
}

// reference runs the controller unperturbed until two runs have passed
// (at most five runs) and keeps the cleaner: the fewer creates, then the
// fewer writes. Its runs read fresh (exploreRun.fresh): a controller that
// races its own cache would otherwise break in most runs under load (a
// stuck item, a duplicate child) with no perturbation at all; a run can
// still fail for other reasons (a cache more than freshLimit behind,
// someone else's write), and the reference is a run where it did not.
func reference(ctx context.Context, opts ExploreOptions, cfg *rest.Config, direct client.WithWatch, id int64) (*exploreRun, error) {
	size := func(r *exploreRun) (creates, writes int) {
		for _, n := range r.creates {
			creates += n
		}
		return creates, len(r.writes)
	}
	var best *exploreRun
	var failed []string
	passed := 0
	for attempt := 0; attempt < 5 && passed < 2; attempt++ {
		r := &exploreRun{opts: opts, cfg: cfg, direct: direct, ns: namespaceFor(id, "reference", attempt)}
		if err := r.run(ctx); err != nil {
			return nil, err
		}
		if f := r.failures(nil); len(f) > 0 {
			failed = append(failed, strings.Join(f, "; "))
			continue
		}
		passed++
		if best == nil {
			best = r
			continue
		}
		c, w := size(r)
		bc, bw := size(best)
		if c < bc || (c == bc && w < bw) {
			best = r
		}
	}
	if best == nil {
		return nil, fmt.Errorf("explore: no unperturbed run passes, in five: %s", strings.Join(failed, " | "))
	}
	return best, nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func replay(test, plan string) string {
	run := ""
	if test != "" {
		run = fmt.Sprintf(" -run '^%s$'", test)
	}
	return fmt.Sprintf("RACESAFE_EXPLORE_PLAN='%s' go test%s .", plan, run)
}

// explorations numbers the Explore calls of a process, so that two calls
// on one API server never share a namespace.
var explorations atomic.Int64

// namespaceFor names a run's namespace: a DNS label from the exploration
// and the plan name.
func namespaceFor(exploration int64, name string, attempt int) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return fmt.Sprintf("explore-%d-%08x-%d", exploration, h.Sum32(), attempt)
}

// Who wrote: the controller, through its manager's client, or the
// workload, through the client Explore hands it.
const (
	byController = "controller"
	byWorkload   = "workload"
)

type exploreWrite struct {
	seq        int // order among the run's writes and reads
	by         string
	kind, verb string // the workload's verbs are prefixed "workload-"
	gvk        schema.GroupVersionKind
	key        client.ObjectKey
	ordinal    int
	before     string // the object's resourceVersion the writer held; "" for a create
	after      string // resourceVersion answered; "" on error
	reconcile  string // the reconcile that wrote, "" outside one
	at         time.Time
}

type exploreRead struct {
	seq       int
	kind      string
	key       client.ObjectKey
	list      bool
	rv        string
	reconcile string
}

// delivery is a version of an object the controller's informer handed to
// its handlers.
type delivery struct {
	seq int
	rv  string
}

// exploreRun is one run: the reference, or one plan.
type exploreRun struct {
	opts   ExploreOptions
	cfg    *rest.Config
	direct client.WithWatch
	ns     string
	plan   *Plan

	gate *viewGate
	// mapper is the running manager's; a crash replaces it while the
	// workload writes.
	mapperMu sync.Mutex
	mapper   meta.RESTMapper
	ctx      context.Context // ends with the run
	bg       sync.WaitGroup  // the plan's goroutines, ended with the run

	mu         sync.Mutex
	writes     []exploreWrite
	reads      []exploreRead
	ordinals   map[string]int
	creates    map[string]int
	seq        int
	generation int // the manager now running; a crash starts the next
	// answered is, per manager, object and kind, what the controller's
	// writes were answered with: the stale-write oracle's known version, and
	// what a reference run's reads wait for (fresh).
	answered    map[answerKey]answer
	staleWrites []string
	panics      []string
	reconciles  map[string]string // reconcileID -> "reconcile #n of ns/name (controller c)"
	reconcileN  map[string]int
	deliveries  map[client.ObjectKey][]delivery // of the plan's object kind

	// waiting is the read the held stream waits for, nil when none.
	waiting *exploreWrite
	held    string // the resource held
	// unobserved is the workload's write whose version a plan withholds;
	// relisted the seq at which the watch was broken for it.
	unobserved *exploreWrite
	relisted   int
	// travel is the write a TimeTravel plan goes back from; snapshot set
	// once the relist was served at its resourceVersion before.
	travel   *exploreWrite
	snapshot int
	wentBack bool
	evidence string
	known    string
	served   string
	crash    chan struct{}

	settled bool
	counts  map[string]int
	effects map[string]int
	elapsed time.Duration
	runErr  error
}

func (r *exploreRun) run(ctx context.Context) error {
	start := time.Now()
	defer func() { r.elapsed = time.Since(start) }()
	r.gate = newViewGate()
	r.gate.served = r.snapshotServed
	r.ordinals, r.creates, r.counts = map[string]int{}, map[string]int{}, map[string]int{}
	r.answered, r.reconciles, r.reconcileN = map[answerKey]answer{}, map[string]string{}, map[string]int{}
	r.deliveries = map[client.ObjectKey][]delivery{}
	r.crash = make(chan struct{})
	if err := r.direct.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("explore %s: namespace: %w", r.ns, err)
	}
	rctx, cancel := context.WithTimeout(ctx, r.opts.PlanTimeout)
	defer cancel()
	r.ctx = rctx
	defer r.bg.Wait()
	stop, err := r.startManager(ctx)
	if err != nil {
		return err
	}
	defer func() { stop() }()
	defer r.gate.releaseAll()

	work := make(chan error, 1)
	workload := interceptor.NewClient(r.direct, r.funcs(byWorkload, 0, nil))
	go func() { work <- r.opts.Workload(rctx, workload, r.ns) }()
	crashed := r.crash
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
loop:
	for {
		select {
		case <-crashed:
			// The manager stops right after the write; a new one, with
			// fresh memory and a fresh cache, finishes the work.
			stop()
			if stop, err = r.startManager(ctx); err != nil {
				return err
			}
			crashed = nil
		case err := <-work:
			if err != nil && rctx.Err() == nil {
				r.runErr = fmt.Errorf("workload: %w", err)
				break loop
			}
			work = nil
		case <-tick.C:
			if work != nil {
				continue
			}
			if ok, err := r.opts.Settled(rctx, r.direct, r.ns); err == nil && ok {
				r.settled = true
				break loop
			}
		case <-rctx.Done():
			break loop
		}
	}
	// The workload ends with the run: it was handed rctx.
	cancel()
	if work != nil {
		<-work
	}
	for _, obj := range r.opts.Kinds {
		n, err := r.count(ctx, obj)
		if err != nil {
			return fmt.Errorf("explore %s: count: %w", r.ns, err)
		}
		r.counts[kindName(r.opts.Scheme, obj)] = n
	}
	if r.opts.SideEffects != nil {
		r.effects = r.opts.SideEffects(r.ns)
	}
	r.finalEvidence()
	return nil
}

func (r *exploreRun) count(ctx context.Context, obj client.Object) (int, error) {
	gvk, err := apiutil.GVKForObject(obj, r.opts.Scheme)
	if err != nil {
		return 0, err
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := r.direct.List(ctx, list, client.InNamespace(r.ns)); err != nil {
		return 0, err
	}
	return len(list.Items), nil
}

// startManager starts a manager on the run's namespace, with the run's
// client and cache, and the controller Setup registers.
func (r *exploreRun) startManager(ctx context.Context) (func(), error) {
	cacheCfg := rest.CopyConfig(r.cfg)
	cacheCfg.Wrap(r.gate.wrap)
	r.mu.Lock()
	gen := r.generation
	r.mu.Unlock()
	starts := &managerStarts{}
	// The manager's context: a crash plan's write waits on it.
	mctx, cancel := context.WithCancel(ctx)
	mgr, err := manager.New(r.cfg, manager.Options{
		Scheme:                 r.opts.Scheme,
		Logger:                 logr.New(&exploreSink{inner: ctrllog.Log.GetSink(), run: r, mgr: starts}),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{r.ns: {}}},
		// A panic is a finding: recovered, it fails the plan instead of
		// the test binary.
		Controller: config.Controller{SkipNameValidation: ptr.To(true), RecoverPanic: ptr.To(true)},
		NewCache: func(_ *rest.Config, o cache.Options) (cache.Cache, error) {
			hc, err := rest.HTTPClientFor(cacheCfg)
			if err != nil {
				return nil, err
			}
			o.HTTPClient = hc
			c, err := cache.New(cacheCfg, o)
			if err != nil {
				return nil, err
			}
			return &recordingCache{Cache: c, run: r}, nil
		},
		NewClient: func(cfg *rest.Config, o client.Options) (client.Client, error) {
			c, err := client.NewWithWatch(cfg, o)
			if err != nil {
				return nil, err
			}
			return interceptor.NewClient(c, r.funcs(byController, gen, mctx.Done())), nil
		},
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("explore %s: manager: %w", r.ns, err)
	}
	r.mapperMu.Lock()
	r.mapper = mgr.GetRESTMapper()
	r.mapperMu.Unlock()
	if err := r.opts.Setup(&setupManager{Manager: mgr, starts: starts}); err != nil {
		cancel()
		return nil, fmt.Errorf("explore %s: setup: %w", r.ns, err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	if !mgr.GetCache().WaitForCacheSync(mctx) {
		cancel()
		return nil, fmt.Errorf("explore %s: cache did not sync: %v", r.ns, <-done)
	}
	if err := wait.PollUntilContextTimeout(mctx, 10*time.Millisecond, r.opts.PlanTimeout, true, func(context.Context) (bool, error) {
		return starts.started.Load() >= starts.controllers.Load(), nil
	}); err != nil {
		cancel()
		return nil, fmt.Errorf("explore %s: %d of %d controllers started: %w", r.ns, starts.started.Load(), starts.controllers.Load(), errors.Join(err, <-done))
	}
	if err := r.watchDeliveries(mctx, mgr.GetCache()); err != nil {
		cancel()
		<-done
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			r.gate.releaseAll()
			cancel()
			<-done
		})
	}, nil
}

// watchDeliveries records, for the plans that withhold versions or go
// back, each version of the plan's object kind the informer delivers.
func (r *exploreRun) watchDeliveries(ctx context.Context, c cache.Cache) error {
	if r.plan == nil || (r.plan.Kind != UnobservedState && r.plan.Kind != TimeTravel) {
		return nil
	}
	o, err := r.opts.Scheme.New(r.plan.gvk)
	if err != nil {
		return fmt.Errorf("explore %s: %s: %w", r.ns, r.plan.gvk, err)
	}
	obj, ok := o.(client.Object)
	if !ok {
		return fmt.Errorf("explore %s: %s is not a client.Object", r.ns, r.plan.gvk)
	}
	inf, err := c.GetInformer(ctx, obj)
	if err != nil {
		return fmt.Errorf("explore %s: informer of %s: %w", r.ns, r.plan.gvk, err)
	}
	record := func(o any) {
		if m, err := meta.Accessor(o); err == nil {
			r.mu.Lock()
			r.seq++
			key := client.ObjectKey{Namespace: m.GetNamespace(), Name: m.GetName()}
			r.deliveries[key] = append(r.deliveries[key], delivery{seq: r.seq, rv: m.GetResourceVersion()})
			// Once the view went back, it stays back for Hold, read or
			// not, then catches up.
			t := r.travel
			back := t != nil && r.snapshot > 0 && !r.wentBack && key == t.key && older(m.GetResourceVersion(), t.after)
			if back {
				r.wentBack = true
			}
			r.mu.Unlock()
			if back {
				resource := r.resourceOf(obj)
				time.AfterFunc(r.opts.Hold, func() { r.gate.release(resource) })
			}
		}
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { record(o) },
		UpdateFunc: func(_, o any) { record(o) },
		DeleteFunc: func(o any) {
			if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			record(o)
		},
	})
	return err
}

func kindName(s *runtime.Scheme, obj runtime.Object) string {
	if gvk := obj.GetObjectKind().GroupVersionKind(); gvk.Kind != "" {
		return strings.TrimSuffix(gvk.Kind, "List")
	}
	gvk, err := apiutil.GVKForObject(obj, s)
	if err != nil {
		return fmt.Sprintf("%T", obj)
	}
	return strings.TrimSuffix(gvk.Kind, "List")
}

// resourceOf returns the plural resource of kind, as the gate names
// watches.
func (r *exploreRun) resourceOf(obj runtime.Object) string {
	gvk, err := apiutil.GVKForObject(obj, r.opts.Scheme)
	r.mapperMu.Lock()
	mapper := r.mapper
	r.mapperMu.Unlock()
	if err == nil && mapper != nil {
		if m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			return m.Resource.Resource
		}
	}
	return strings.ToLower(kindName(r.opts.Scheme, obj)) + "s"
}

// funcs intercept the writes of by: they record them and carry out the
// plan at its write.
func (r *exploreRun) funcs(by string, gen int, stopped <-chan struct{}) interceptor.Funcs {
	return interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return r.write(ctx, by, gen, stopped, "create", obj, "", func() error { return c.Create(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return r.write(ctx, by, gen, stopped, "update", obj, obj.GetResourceVersion(), func() error { return c.Update(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return r.write(ctx, by, gen, stopped, "patch", obj, patchPrecondition(obj, patch), func() error { return c.Patch(ctx, obj, patch, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if by == byWorkload {
				return r.workloadDelete(ctx, c, obj, opts...)
			}
			return r.write(ctx, by, gen, stopped, "delete", obj, "", func() error { return c.Delete(ctx, obj, opts...) })
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return r.write(ctx, by, gen, stopped, sub+"-update", obj, obj.GetResourceVersion(), func() error { return c.SubResource(sub).Update(ctx, obj, opts...) })
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			return r.write(ctx, by, gen, stopped, sub+"-patch", obj, patchPrecondition(obj, patch), func() error { return c.SubResource(sub).Patch(ctx, obj, patch, opts...) })
		},
	}
}

// workloadDelete records the workload's delete with the versions around
// it, read live: a delete answers no resourceVersion, and an object with
// finalizers lives on with a deletionTimestamp, a version a TimeTravel
// plan can go back from.
func (r *exploreRun) workloadDelete(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
	o, err := r.opts.Scheme.New(r.gvkOf(obj))
	live, ok := o.(client.Object)
	if err != nil || !ok {
		return r.write(ctx, byWorkload, 0, nil, "delete", obj, "", func() error { return c.Delete(ctx, obj, opts...) })
	}
	key := client.ObjectKeyFromObject(obj)
	if err := c.Get(ctx, key, live); err == nil {
		obj = obj.DeepCopyObject().(client.Object)
		obj.SetResourceVersion(live.GetResourceVersion())
	}
	return r.write(ctx, byWorkload, 0, nil, "delete", obj, "", func() error {
		if err := c.Delete(ctx, obj, opts...); err != nil {
			return err
		}
		if err := c.Get(ctx, key, live); err == nil {
			obj.SetResourceVersion(live.GetResourceVersion())
		}
		return nil
	})
}

func (r *exploreRun) gvkOf(obj runtime.Object) schema.GroupVersionKind {
	gvk, _ := apiutil.GVKForObject(obj, r.opts.Scheme)
	return gvk
}

// patchPrecondition returns the resourceVersion a patch sends (an
// optimistic lock), "" when it sends none.
func patchPrecondition(obj client.Object, patch client.Patch) string {
	if patch.Type() == types.JSONPatchType {
		return ""
	}
	data, err := patch.Data(obj)
	if err != nil {
		return ""
	}
	var p struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if json.Unmarshal(data, &p) != nil {
		return ""
	}
	return p.Metadata.ResourceVersion
}

func (r *exploreRun) write(ctx context.Context, by string, gen int, stopped <-chan struct{}, verb string, obj client.Object, precondition string, do func() error) error {
	r.mu.Lock()
	crashed := by == byController && gen != r.generation
	r.mu.Unlock()
	if crashed {
		// A crashed manager's process is gone: what it still tries to
		// write never reaches the server.
		return errCrashed
	}
	kind := kindName(r.opts.Scheme, obj)
	gvk, _ := apiutil.GVKForObject(obj, r.opts.Scheme)
	if by == byWorkload {
		verb = "workload-" + verb
	}
	reconcile := r.reconcileOf(ctx)
	before := obj.GetResourceVersion()
	r.mu.Lock()
	r.ordinals[kind+"/"+verb]++
	ord := r.ordinals[kind+"/"+verb]
	r.mu.Unlock()
	p := r.plan
	match := p != nil && p.Object == kind && p.Verb == verb && p.Ordinal == ord
	// The controller is never told the answer to an ambiguous write.
	told := !(match && p.Kind == AmbiguousWrite)
	hold := match && (p.Kind == StaleReadAfterWrite || p.Kind == StaleListAfterCreate || p.Kind == StaleListAfterDelete || p.Kind == UnobservedState)
	resource := r.resourceOf(obj)
	if hold {
		// Held before the write is sent: its event cannot slip through.
		r.gate.hold(resource)
	}
	err := do()
	w := exploreWrite{by: by, kind: kind, verb: verb, gvk: gvk, key: client.ObjectKeyFromObject(obj), ordinal: ord, before: before, reconcile: reconcile, at: time.Now()}
	if strings.HasSuffix(verb, "create") {
		w.before = ""
	}
	if err == nil {
		w.after = obj.GetResourceVersion()
	}
	r.mu.Lock()
	r.seq++
	w.seq = r.seq
	r.writes = append(r.writes, w)
	if by == byController {
		if err == nil && verb == "create" {
			r.creates[kind]++
		}
		id := answerKey{gen: gen, kind: kind, key: w.key}
		known := r.answered[id].rv
		if precondition != "" && known != "" && older(precondition, known) {
			r.staleWrites = append(r.staleWrites, fmt.Sprintf("%s sent resourceVersion %s as the precondition of its %s of %s %s, after a write of that object had been answered %s", orController(reconcile), precondition, verb, kind, w.key, known))
		}
		switch {
		case err == nil && verb == "delete":
			r.answered[id] = answer{gvk: gvk, rv: known, gone: true}
		case err == nil && told && (known == "" || older(known, w.after)):
			r.answered[id] = answer{gvk: gvk, rv: w.after}
		}
	}
	// The workload's next write of the withheld object ends the hold:
	// the watch breaks and the informer relists the present.
	u := r.unobserved
	next := by == byWorkload && err == nil && u != nil && u.key == w.key && u.kind == kind && u.seq < w.seq
	if next {
		r.relisted = r.seq
		r.unobserved = nil
	}
	r.mu.Unlock()
	if next {
		r.gate.relist(resource, "")
		r.gate.release(resource)
	}
	switch {
	case hold && err != nil:
		r.gate.release(resource)
	case hold && p.Kind == UnobservedState:
		r.mu.Lock()
		r.unobserved, r.held = &w, resource
		r.mu.Unlock()
		// Without a next write the version is not intermediate: it is
		// delivered late, and the run is not a test of the plan.
		time.AfterFunc(r.holdLimit(), func() {
			r.mu.Lock()
			if r.unobserved == &w {
				r.unobserved = nil
			}
			r.mu.Unlock()
			r.gate.release(resource)
		})
	case hold:
		r.mu.Lock()
		r.waiting, r.held = &w, resource
		r.mu.Unlock()
		time.AfterFunc(r.holdLimit(), func() { r.gate.release(resource) })
	case match && p.Kind == TimeTravel && err == nil && w.before != "":
		r.bg.Add(1)
		go func() {
			defer r.bg.Done()
			r.travelBack(w, resource)
		}()
	case match && p.Kind == AmbiguousWrite && err == nil:
		r.setEvidence(fmt.Sprintf("the server applied %s of %s %s (resourceVersion %s) and answered it with a 500", writer(&w), kind, w.key, w.after), w.after, "")
		return apierrors.NewInternalError(fmt.Errorf("racetest explore: %s applied, answer lost", verb))
	case match && p.Kind == CrashAfterWrite && err == nil:
		r.mu.Lock()
		r.generation++
		r.mu.Unlock()
		r.setEvidence(fmt.Sprintf("the manager stopped right after %s of %s %s was answered resourceVersion %s, and a new one (fresh memory and cache) took over", writer(&w), kind, w.key, w.after), w.after, "")
		close(r.crash)
		// A crashed process runs nothing after the write: the reconcile
		// waits here until its manager is stopping, and then ends by a
		// panic controller-runtime recovers (not a finding), so that no
		// line after the write runs, and no external system is called, as
		// none would be after a real crash. Outside a reconcile the write
		// returns an error instead.
		select {
		case <-ctx.Done():
		case <-stopped:
		}
		if reconcile != "" {
			panic(errCrashed)
		}
		return errCrashed
	}
	return err
}

// errCrashed ends a crashed manager's reconcile and refuses its writes.
var errCrashed = fmt.Errorf("racetest explore: the manager crashed: %w", context.Canceled)

// holdLimit is how long a held watch waits for the read (or the write)
// that ends it: a controller that reads only when it is woken, or requeued,
// may take a while.
func (r *exploreRun) holdLimit() time.Duration {
	return max(3*r.opts.Hold+time.Second, r.opts.PlanTimeout/2)
}

// travelBack waits until the informer has delivered the version w made,
// then breaks the watch and serves the relist from the snapshot at the
// resourceVersion before w, holding the watch that follows.
func (r *exploreRun) travelBack(w exploreWrite, resource string) {
	err := wait.PollUntilContextTimeout(r.ctx, 10*time.Millisecond, 3*r.opts.Hold, true, func(context.Context) (bool, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		return slices.ContainsFunc(r.deliveries[w.key], func(d delivery) bool { return !older(d.rv, w.after) }), nil
	})
	if err != nil {
		return
	}
	r.mu.Lock()
	r.travel = &w
	r.mu.Unlock()
	r.gate.hold(resource)
	r.gate.relist(resource, w.before)
	// The reflector relists after a backoff of about a second.
	time.AfterFunc(3*r.opts.Hold+3*time.Second, func() { r.gate.release(resource) })
}

// snapshotServed is told by the gate that a relist was served at rv.
func (r *exploreRun) snapshotServed(_, rv string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.travel != nil && r.travel.before == rv && r.snapshot == 0 {
		r.seq++
		r.snapshot = r.seq
	}
}

func (r *exploreRun) setEvidence(s, known, served string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setEvidenceLocked(s, known, served)
}

func (r *exploreRun) setEvidenceLocked(s, known, served string) {
	if r.evidence == "" {
		r.evidence, r.known, r.served = s, known, served
	}
}

func orController(reconcile string) string {
	if reconcile == "" {
		return "the controller"
	}
	return reconcile
}

// writer names a write: "the workload's delete", "the status-patch in
// reconcile #2 of ns/item (controller c)".
func writer(w *exploreWrite) string {
	if w.by == byWorkload {
		return fmt.Sprintf("the workload's %s", strings.TrimPrefix(w.verb, "workload-"))
	}
	if w.reconcile == "" {
		return fmt.Sprintf("the controller's %s", w.verb)
	}
	return fmt.Sprintf("the %s in %s", w.verb, w.reconcile)
}

// read records a read served by the cache and, when it is the read the
// held stream waits for, releases the stream after Hold.
func (r *exploreRun) read(ctx context.Context, kind string, key client.ObjectKey, list bool, rv string, items int, shows bool) {
	reconcile := r.reconcileOf(ctx)
	r.mu.Lock()
	r.seq++
	r.reads = append(r.reads, exploreRead{seq: r.seq, kind: kind, key: key, list: list, rv: rv, reconcile: reconcile})
	w, resource := r.waiting, r.held
	var evidence string
	if w != nil && w.kind == kind {
		switch {
		case !list && r.plan.Kind == StaleReadAfterWrite && key == w.key:
			if older(rv, w.after) {
				evidence = fmt.Sprintf("%s read %s %s from its cache at resourceVersion %s, after %s of it had been answered resourceVersion %s", orController(reconcile), kind, w.key, rv, writer(w), w.after)
			}
		case list && r.plan.Kind == StaleListAfterCreate && !shows:
			evidence = fmt.Sprintf("%s Listed %s from its cache (%d items) without %s, after %s of it had been answered resourceVersion %s", orController(reconcile), kind, items, w.key, writer(w), w.after)
		case list && r.plan.Kind == StaleListAfterDelete && shows:
			evidence = fmt.Sprintf("%s Listed %s from its cache (%d items) still showing %s, after %s of it had succeeded", orController(reconcile), kind, items, w.key, writer(w))
		}
	}
	if evidence != "" {
		r.waiting = nil
		r.setEvidenceLocked(evidence, w.after, rv)
	}
	if t := r.travel; t != nil && r.snapshot > 0 && !list && t.kind == kind && t.key == key && older(rv, t.after) && r.evidence == "" {
		r.setEvidenceLocked(fmt.Sprintf("after its informer had delivered resourceVersion %s of %s %s (%s), the watch broke and the relist was served from the snapshot at resourceVersion %s, as a lagging API server serves it; %s read that object from its cache at resourceVersion %s",
			t.after, kind, key, writer(t), t.before, orController(reconcile), rv), t.after, rv)
		evidence, resource = r.evidence, r.resourceOf(r.schemeObject(t.gvk))
	}
	r.mu.Unlock()
	if evidence != "" {
		time.AfterFunc(r.opts.Hold, func() { r.gate.release(resource) })
	}
}

func (r *exploreRun) schemeObject(gvk schema.GroupVersionKind) runtime.Object {
	o, err := r.opts.Scheme.New(gvk)
	if err != nil {
		u := &metav1.PartialObjectMetadata{}
		u.SetGroupVersionKind(gvk)
		return u
	}
	return o
}

// finalEvidence says, once the run is over, whether the withheld
// version was never delivered, and what the relist delivered instead;
// and, for a time travel the controller did not read, what the informer
// went back to.
func (r *exploreRun) finalEvidence() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.plan; p != nil && p.Kind == UnobservedState && r.relisted > 0 {
		var w *exploreWrite
		for i := range r.writes {
			if x := &r.writes[i]; x.by == byWorkload && x.kind == p.Object && x.verb == p.Verb && x.ordinal == p.Ordinal {
				w = x
			}
		}
		if w == nil || w.after == "" {
			return
		}
		ds := r.deliveries[w.key]
		if slices.ContainsFunc(ds, func(d delivery) bool { return d.rv == w.after }) {
			return
		}
		next := "no version of it"
		served := ""
		for _, d := range ds {
			if d.seq > r.relisted {
				next, served = "resourceVersion "+d.rv, d.rv
				break
			}
		}
		r.setEvidenceLocked(fmt.Sprintf("%s of %s %s made resourceVersion %s, which the controller's informer never delivered: its watch broke before the workload's next write, and the relist delivered %s", writer(w), w.kind, w.key, w.after, next), w.after, served)
	}
	if t := r.travel; t != nil && r.snapshot > 0 && r.evidence == "" {
		for _, d := range r.deliveries[t.key] {
			if d.seq > r.snapshot && older(d.rv, t.after) {
				r.setEvidenceLocked(fmt.Sprintf("after its informer had delivered resourceVersion %s of %s %s (%s), the watch broke and the relist was served from the snapshot at resourceVersion %s, as a lagging API server serves it: the informer went back to resourceVersion %s, and the controller did not read the object before it caught up",
					t.after, t.kind, t.key, writer(t), t.before, d.rv), t.after, d.rv)
				return
			}
		}
	}
}

func older(rv, than string) bool {
	cmp, err := resourceversion.CompareResourceVersion(rv, than)
	return err == nil && cmp < 0
}

// failures judges the run against the reference (nil: the reference
// itself, judged on liveness and panics only).
func (r *exploreRun) failures(ref *exploreRun) []string {
	var out []string
	if r.runErr != nil {
		out = append(out, r.runErr.Error())
	}
	if !r.settled {
		out = append(out, fmt.Sprintf("liveness: the work did not settle within %s", r.opts.PlanTimeout))
	}
	r.mu.Lock()
	panics, stale := slices.Clone(r.panics), slices.Clone(r.staleWrites)
	r.mu.Unlock()
	if len(panics) > 0 {
		out = append(out, fmt.Sprintf("panic: %s%s", panics[0], more(len(panics)-1, "panics")))
	}
	if ref == nil {
		return out
	}
	kinds := map[string]bool{}
	for k := range r.creates {
		kinds[k] = true
	}
	var names []string
	for k := range kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if r.creates[k] > ref.creates[k] {
			out = append(out, fmt.Sprintf("safety: the controller created %d %s, the reference %d (a duplicate)", r.creates[k], k, ref.creates[k]))
		}
	}
	for _, k := range sortedKeys(ref.counts) {
		if r.counts[k] != ref.counts[k] {
			out = append(out, fmt.Sprintf("end state: %d %s in the namespace, the reference ends with %d", r.counts[k], k, ref.counts[k]))
		}
	}
	if len(stale) > len(ref.staleWrites) {
		out = append(out, fmt.Sprintf("stale write: %s%s (the reference sent %d such writes)", stale[0], more(len(stale)-1, "stale writes"), len(ref.staleWrites)))
	}
	effects := maps.Clone(ref.effects)
	if effects == nil {
		effects = map[string]int{}
	}
	maps.Copy(effects, r.effects)
	for _, k := range sortedKeys(effects) {
		if r.effects[k] != ref.effects[k] {
			out = append(out, fmt.Sprintf("side effect: %s counted %d, the reference %d", k, r.effects[k], ref.effects[k]))
		}
	}
	return out
}

func more(n int, what string) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(", and %d more %s", n, what)
}

func sortedKeys(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// derivePlans reads the reference's trace: a write followed by a cached Get
// of its object gives a stale-read plan, a create or delete followed by a
// List of its kind a stale-list plan; a workload's write followed within
// Hold by its next write of the same object an unobserved-state plan; a write of an
// existing object the controller reads again (the workload's, and the
// controller's first of each verb) a time-travel plan; and each of the
// controller's first five writes of a kind and verb an ambiguous-write and
// a crash plan.
func derivePlans(ref *exploreRun, max int) []Plan {
	var plans []Plan
	seen := map[string]bool{}
	add := func(k PlanKind, w exploreWrite) {
		p := Plan{Kind: k, Object: w.kind, Verb: w.verb, Ordinal: w.ordinal, gvk: w.gvk}
		p.Name = fmt.Sprintf("%s/%s/%s#%d", k, w.kind, w.verb, w.ordinal)
		if !seen[p.Name] {
			seen[p.Name] = true
			plans = append(plans, p)
		}
	}
	ref.mu.Lock()
	writes, reads := slices.Clone(ref.writes), slices.Clone(ref.reads)
	ref.mu.Unlock()
	readAfter := func(w exploreWrite, list bool) bool {
		return slices.ContainsFunc(reads, func(rd exploreRead) bool {
			return rd.seq > w.seq && rd.kind == w.kind && rd.list == list && (list || rd.key == w.key)
		})
	}
	var controller, workload []exploreWrite
	for _, w := range writes {
		if w.after == "" {
			continue
		}
		if w.by == byWorkload {
			workload = append(workload, w)
		} else {
			controller = append(controller, w)
		}
	}
	for _, w := range controller {
		if w.ordinal > 5 {
			continue
		}
		switch w.verb {
		case "create":
			if readAfter(w, true) {
				add(StaleListAfterCreate, w)
			}
		case "delete":
			if readAfter(w, true) {
				add(StaleListAfterDelete, w)
			}
		default:
			if readAfter(w, false) {
				add(StaleReadAfterWrite, w)
			}
		}
	}
	for i, w := range workload {
		read := slices.ContainsFunc(reads, func(rd exploreRead) bool { return rd.kind == w.kind })
		j := slices.IndexFunc(workload[i+1:], func(x exploreWrite) bool { return x.kind == w.kind && x.key == w.key })
		if !read || j < 0 {
			continue
		}
		// A workload that waits for the controller between its two
		// writes would wait for ever on a version never delivered: the
		// writes must have followed each other within Hold.
		if next := workload[i+1+j]; next.at.Sub(w.at) < ref.opts.Hold {
			add(UnobservedState, w)
		}
	}
	for _, w := range append(workload, controller...) {
		if w.before != "" && !strings.HasSuffix(w.verb, "delete") && (w.by == byWorkload || w.ordinal == 1) && readAfter(w, false) {
			add(TimeTravel, w)
		}
	}
	for _, w := range workload {
		if w.before != "" && strings.HasSuffix(w.verb, "delete") && readAfter(w, false) {
			add(TimeTravel, w)
		}
	}
	for _, k := range []PlanKind{AmbiguousWrite, CrashAfterWrite} {
		for _, w := range controller {
			if w.ordinal <= 5 {
				add(k, w)
			}
		}
	}
	if len(plans) > max {
		plans = plans[:max]
	}
	return plans
}

// recordingCache records what the controller's cache serves.
type recordingCache struct {
	cache.Cache
	run *exploreRun
}

func (c *recordingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	kind := kindName(c.run.opts.Scheme, obj)
	if c.run.fresh() {
		c.catchUp(ctx, kind, func(k client.ObjectKey) bool { return k == key }, func(schema.GroupVersionKind) client.Object {
			o, _ := obj.DeepCopyObject().(client.Object)
			return o
		})
	}
	err := c.Cache.Get(ctx, key, obj, opts...)
	if err == nil {
		c.run.read(ctx, kind, key, false, obj.GetResourceVersion(), 1, true)
	}
	return err
}

func (c *recordingCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	kind := kindName(c.run.opts.Scheme, list)
	if c.run.fresh() {
		ns := (&client.ListOptions{}).ApplyOptions(opts).Namespace
		c.catchUp(ctx, kind, func(k client.ObjectKey) bool { return ns == "" || k.Namespace == ns }, func(gvk schema.GroupVersionKind) client.Object {
			return itemLike(list, gvk, c.run.opts.Scheme)
		})
	}
	err := c.Cache.List(ctx, list, opts...)
	if err != nil {
		return err
	}
	c.run.mu.Lock()
	w := c.run.waiting
	c.run.mu.Unlock()
	shows := false
	if w != nil {
		_ = meta.EachListItem(list, func(o runtime.Object) error {
			if m, err := meta.Accessor(o); err == nil && m.GetNamespace() == w.key.Namespace && m.GetName() == w.key.Name {
				shows = shows || m.GetDeletionTimestamp() == nil
			}
			return nil
		})
	}
	c.run.read(ctx, kind, client.ObjectKey{}, true, list.GetResourceVersion(), meta.LenList(list), shows)
	return nil
}

// freshLimit bounds how long a reference run's cached read waits for the
// cache to show the controller's own writes; past it, the read is served
// as the cache has it.
const freshLimit = 2 * time.Second

// fresh reports whether r is a reference run (it has no plan): its cached
// reads first wait, up to freshLimit, until the cache shows what the
// controller's own writes were answered with (catchUp).
func (r *exploreRun) fresh() bool { return r.plan == nil }

// answerKey and answer: what the controller of one manager (gen) wrote of
// an object, and what the server answered.
type answerKey struct {
	gen  int
	kind string
	key  client.ObjectKey
}

type answer struct {
	gvk  schema.GroupVersionKind
	rv   string // the newest version a write was answered with
	gone bool   // deleted by the controller since: gone, or marked for deletion
}

// catchUp makes a reference run's read a fresh one: it waits until the
// cache shows, for each object of kind matching that the controller wrote,
// the version its newest write was answered with (or, after its delete,
// the object gone or terminating). It reads each object in the form of
// the read (empty returns a new one), so that it starts no informer the
// controller did not. The reference is then the controller's behaviour
// with a cache never behind its own writes, the run its author had in
// mind, and not one where it raced its cache and lost: the plans bring
// the stale views in one at a time.
func (c *recordingCache) catchUp(ctx context.Context, kind string, matching func(client.ObjectKey) bool, empty func(schema.GroupVersionKind) client.Object) {
	r := c.run
	r.mu.Lock()
	var keys []answerKey
	for k := range r.answered {
		if k.gen == r.generation && k.kind == kind && matching(k.key) {
			keys = append(keys, k)
		}
	}
	r.mu.Unlock()
	if len(keys) == 0 {
		return
	}
	// What the API server has of an object the cache does not show as
	// written, read once: it tells a lag from a change made since.
	live := map[answerKey]client.Object{}
	_ = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, freshLimit, true, func(ctx context.Context) (bool, error) {
		for _, k := range keys {
			r.mu.Lock()
			want := r.answered[k]
			r.mu.Unlock()
			if !c.shows(ctx, k, want, empty, live) {
				return false, nil
			}
		}
		return true, nil
	})
}

// shows reports whether the cache shows want of the object at k: the
// version (or a newer one), or the object gone or terminating; or else
// what the API server had when first asked (the object since deleted by
// someone else, or made anew under its name), kept in live. A read that
// fails for another reason than NotFound is not a lag and is not waited on.
func (c *recordingCache) shows(ctx context.Context, k answerKey, want answer, empty func(schema.GroupVersionKind) client.Object, live map[answerKey]client.Object) bool {
	cached := empty(want.gvk)
	if cached == nil {
		return true
	}
	err := c.Cache.Get(ctx, k.key, cached)
	if err != nil && !apierrors.IsNotFound(err) {
		return true
	}
	found := err == nil
	if want.gone && (!found || cached.GetDeletionTimestamp() != nil) || !want.gone && found && !older(cached.GetResourceVersion(), want.rv) {
		return true
	}
	now, asked := live[k]
	if !asked {
		o := empty(want.gvk)
		switch lerr := c.run.direct.Get(ctx, k.key, o); {
		case apierrors.IsNotFound(lerr):
		case lerr != nil:
			return true
		default:
			now = o
		}
		live[k] = now
	}
	if now == nil {
		return !found
	}
	return found && !older(cached.GetResourceVersion(), now.GetResourceVersion())
}

// itemLike returns an empty object of gvk in the form of list's items:
// metadata-only, unstructured or typed.
func itemLike(list client.ObjectList, gvk schema.GroupVersionKind, s *runtime.Scheme) client.Object {
	switch list.(type) {
	case *metav1.PartialObjectMetadataList:
		o := &metav1.PartialObjectMetadata{}
		o.SetGroupVersionKind(gvk)
		return o
	case *unstructured.UnstructuredList:
		o := &unstructured.Unstructured{}
		o.SetGroupVersionKind(gvk)
		return o
	}
	o, err := s.New(gvk)
	if err != nil {
		return nil
	}
	obj, _ := o.(client.Object)
	return obj
}
