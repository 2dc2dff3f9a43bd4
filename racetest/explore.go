package racetest

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/config"
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
	// PlanTimeout.
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
	// that it made stale; 500 ms when zero.
	Hold time.Duration
	// MaxPlans bounds the plans derived from the reference; 16 when zero.
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
)

// Plan is one perturbation of the controller's view, named so that it can
// be replayed alone: "<kind>/<object kind>/<verb>#<n>", the n-th write of
// that verb on that object kind in the run.
type Plan struct {
	Name    string
	Kind    PlanKind
	Object  string // the object kind written: "WorkItem"
	Verb    string // create, update, patch, delete, status-update, status-patch
	Ordinal int
}

// PlanResult is what one run found.
type PlanResult struct {
	Plan Plan
	// Perturbation says what was done to the controller's view, in one
	// sentence; empty when the plan's write never came (the run is then
	// not a test of the plan).
	Perturbation string
	// Failures name each oracle that failed, in one sentence each.
	Failures []string
	Elapsed  time.Duration
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
		fmt.Fprintf(&b, "FAIL %s (%s)\n  perturbation: %s\n", p.Plan.Name, p.Elapsed.Round(time.Millisecond), p.Perturbation)
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
			what = "its write did not come in this run"
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
		o.MaxPlans = 16
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
// when its cache is behind. A reference run records what the controller
// wrote and read; the plans derived from that trace each give it one stale
// view a real cluster can produce (see PlanKind), in a namespace and a
// manager of its own, and judge the run against the reference: it settles
// within PlanTimeout (liveness), creates no more objects of a kind and
// ends with as many of each of Kinds (safety). An error is returned for
// invalid options, a control plane that fails, or a reference that does
// not settle three times.
func Explore(ctx context.Context, cfg *rest.Config, opts ExploreOptions) (*ExploreReport, error) {
	opts, err := opts.validate()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	id := explorations.Add(1)
	direct, err := client.New(cfg, client.Options{Scheme: opts.Scheme})
	if err != nil {
		return nil, fmt.Errorf("explore: client: %w", err)
	}
	var ref *exploreRun
	for attempt := range 3 {
		ref = &exploreRun{opts: opts, cfg: cfg, direct: direct, ns: namespaceFor(id, "reference", attempt)}
		if err := ref.run(ctx); err != nil {
			return nil, err
		}
		if len(ref.failures(nil)) == 0 {
			break
		}
		if attempt == 2 {
			return nil, fmt.Errorf("explore: the reference run does not settle without any perturbation: %s", strings.Join(ref.failures(nil), "; "))
		}
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
			results[i] = PlanResult{Plan: p, Perturbation: r.evidence, Failures: r.failures(ref), Elapsed: r.elapsed, Replay: replay(opts.TestName, p.Name)}
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

type exploreWrite struct {
	seq        int // order among the run's writes and reads
	kind, verb string
	key        client.ObjectKey
	ordinal    int
	after      string // resourceVersion answered; "" on error
}

type exploreRead struct {
	seq  int
	kind string
	key  client.ObjectKey
	list bool
	rv   string
}

// exploreRun is one run: the reference, or one plan.
type exploreRun struct {
	opts   ExploreOptions
	cfg    *rest.Config
	direct client.Client
	ns     string
	plan   *Plan

	gate   *viewGate
	mapper meta.RESTMapper

	mu       sync.Mutex
	writes   []exploreWrite
	reads    []exploreRead
	ordinals map[string]int
	creates  map[string]int
	seq      int
	// waiting is the read the held stream waits for, nil when none.
	waiting  *exploreWrite
	held     string // the resource held
	evidence string
	crash    chan struct{}

	settled bool
	counts  map[string]int
	elapsed time.Duration
	runErr  error
}

func (r *exploreRun) run(ctx context.Context) error {
	start := time.Now()
	defer func() { r.elapsed = time.Since(start) }()
	r.gate = newViewGate()
	r.ordinals, r.creates, r.counts = map[string]int{}, map[string]int{}, map[string]int{}
	r.crash = make(chan struct{})
	if err := r.direct.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("explore %s: namespace: %w", r.ns, err)
	}
	rctx, cancel := context.WithTimeout(ctx, r.opts.PlanTimeout)
	defer cancel()
	stop, err := r.startManager(ctx)
	if err != nil {
		return err
	}
	defer func() { stop() }()
	defer r.gate.releaseAll()

	work := make(chan error, 1)
	go func() { work <- r.opts.Workload(rctx, r.direct, r.ns) }()
	crashed := r.crash
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
			continue
		case err := <-work:
			if err != nil && rctx.Err() == nil {
				r.runErr = fmt.Errorf("workload: %w", err)
			}
			work = nil
		case <-rctx.Done():
		}
		if work == nil || rctx.Err() != nil {
			break
		}
	}
	if r.runErr == nil {
		_ = wait.PollUntilContextCancel(rctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			ok, err := r.opts.Settled(ctx, r.direct, r.ns)
			if err != nil {
				return false, nil
			}
			r.settled = ok
			return ok, nil
		})
	}
	for _, obj := range r.opts.Kinds {
		n, err := r.count(ctx, obj)
		if err != nil {
			return fmt.Errorf("explore %s: count: %w", r.ns, err)
		}
		r.counts[kindName(r.opts.Scheme, obj)] = n
	}
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
	mgr, err := manager.New(r.cfg, manager.Options{
		Scheme:                 r.opts.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{r.ns: {}}},
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
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
			return interceptor.NewClient(c, r.funcs()), nil
		},
	})
	if err != nil {
		return nil, fmt.Errorf("explore %s: manager: %w", r.ns, err)
	}
	r.mapper = mgr.GetRESTMapper()
	if err := r.opts.Setup(mgr); err != nil {
		return nil, fmt.Errorf("explore %s: setup: %w", r.ns, err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	if !mgr.GetCache().WaitForCacheSync(mctx) {
		cancel()
		return nil, fmt.Errorf("explore %s: cache did not sync: %v", r.ns, <-done)
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
	if err == nil && r.mapper != nil {
		if m, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			return m.Resource.Resource
		}
	}
	return strings.ToLower(kindName(r.opts.Scheme, obj)) + "s"
}

// funcs intercept the controller's writes: they record them and carry out
// the plan at its write.
func (r *exploreRun) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return r.write("create", obj, func() error { return c.Create(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return r.write("update", obj, func() error { return c.Update(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return r.write("patch", obj, func() error { return c.Patch(ctx, obj, patch, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return r.write("delete", obj, func() error { return c.Delete(ctx, obj, opts...) })
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return r.write(sub+"-update", obj, func() error { return c.SubResource(sub).Update(ctx, obj, opts...) })
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			return r.write(sub+"-patch", obj, func() error { return c.SubResource(sub).Patch(ctx, obj, patch, opts...) })
		},
	}
}

func (r *exploreRun) write(verb string, obj client.Object, do func() error) error {
	kind := kindName(r.opts.Scheme, obj)
	r.mu.Lock()
	r.ordinals[kind+"/"+verb]++
	ord := r.ordinals[kind+"/"+verb]
	r.mu.Unlock()
	p := r.plan
	match := p != nil && p.Object == kind && p.Verb == verb && p.Ordinal == ord
	stale := match && (p.Kind == StaleReadAfterWrite || p.Kind == StaleListAfterCreate || p.Kind == StaleListAfterDelete)
	resource := r.resourceOf(obj)
	if stale {
		// Held before the write is sent: its event cannot slip through.
		r.gate.hold(resource)
	}
	err := do()
	w := exploreWrite{kind: kind, verb: verb, key: client.ObjectKeyFromObject(obj), ordinal: ord}
	if err == nil {
		w.after = obj.GetResourceVersion()
		if verb == "create" {
			r.mu.Lock()
			r.creates[kind]++
			r.mu.Unlock()
		}
	}
	r.mu.Lock()
	r.seq++
	w.seq = r.seq
	r.writes = append(r.writes, w)
	r.mu.Unlock()
	switch {
	case stale && err != nil:
		r.gate.release(resource)
	case stale:
		r.mu.Lock()
		r.waiting, r.held = &w, resource
		r.mu.Unlock()
		time.AfterFunc(3*r.opts.Hold+time.Second, func() { r.gate.release(resource) })
	case match && p.Kind == AmbiguousWrite && err == nil:
		r.setEvidence(fmt.Sprintf("the server applied the controller's %s of %s %s (resourceVersion %s) and answered it with a 500", verb, kind, w.key, w.after))
		return apierrors.NewInternalError(fmt.Errorf("racetest explore: %s applied, answer lost", verb))
	case match && p.Kind == CrashAfterWrite && err == nil:
		r.setEvidence(fmt.Sprintf("the manager stopped right after the controller's %s of %s %s, and a new one (fresh memory and cache) took over", verb, kind, w.key))
		close(r.crash)
	}
	return err
}

func (r *exploreRun) setEvidence(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.evidence == "" {
		r.evidence = s
	}
}

// read records a read served by the cache and, when it is the read the
// held stream waits for, releases the stream after Hold.
func (r *exploreRun) read(kind string, key client.ObjectKey, list bool, rv string, items int, shows bool) {
	r.mu.Lock()
	r.seq++
	r.reads = append(r.reads, exploreRead{seq: r.seq, kind: kind, key: key, list: list, rv: rv})
	w, resource := r.waiting, r.held
	var evidence string
	if w != nil && w.kind == kind {
		switch {
		case !list && r.plan.Kind == StaleReadAfterWrite && key == w.key:
			if older(rv, w.after) {
				evidence = fmt.Sprintf("after the controller's %s of %s %s answered resourceVersion %s, its cache served that object at resourceVersion %s", w.verb, kind, w.key, w.after, rv)
			}
		case list && r.plan.Kind == StaleListAfterCreate && !shows:
			evidence = fmt.Sprintf("after the controller created %s %s, its cached List of %s (%d items) did not show it", kind, w.key, kind, items)
		case list && r.plan.Kind == StaleListAfterDelete && shows:
			evidence = fmt.Sprintf("after the controller deleted %s %s, its cached List of %s (%d items) still showed it", kind, w.key, kind, items)
		}
	}
	if evidence != "" {
		r.waiting = nil
		if r.evidence == "" {
			r.evidence = evidence
		}
	}
	r.mu.Unlock()
	if evidence != "" {
		time.AfterFunc(r.opts.Hold, func() { r.gate.release(resource) })
	}
}

func older(rv, than string) bool {
	cmp, err := resourceversion.CompareResourceVersion(rv, than)
	return err == nil && cmp < 0
}

// failures judges the run against the reference (nil: the reference
// itself, judged on liveness only).
func (r *exploreRun) failures(ref *exploreRun) []string {
	var out []string
	if r.runErr != nil {
		out = append(out, r.runErr.Error())
	}
	if !r.settled {
		out = append(out, fmt.Sprintf("liveness: the work did not settle within %s", r.opts.PlanTimeout))
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
	return out
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
// List of its kind a stale-list plan, and the first write of each kind and
// verb an ambiguous-write and a crash plan.
func derivePlans(ref *exploreRun, max int) []Plan {
	var plans []Plan
	seen := map[string]bool{}
	add := func(k PlanKind, w exploreWrite) {
		p := Plan{Kind: k, Object: w.kind, Verb: w.verb, Ordinal: w.ordinal}
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
	for _, w := range writes {
		if w.after == "" || w.ordinal > 3 {
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
	for _, k := range []PlanKind{AmbiguousWrite, CrashAfterWrite} {
		for _, w := range writes {
			if w.after != "" && w.ordinal == 1 {
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
	err := c.Cache.Get(ctx, key, obj, opts...)
	if err == nil {
		c.run.read(kindName(c.run.opts.Scheme, obj), key, false, obj.GetResourceVersion(), 1, true)
	}
	return err
}

func (c *recordingCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	err := c.Cache.List(ctx, list, opts...)
	if err != nil {
		return err
	}
	kind := kindName(c.run.opts.Scheme, list)
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
	c.run.read(kind, client.ObjectKey{}, true, list.GetResourceVersion(), meta.LenList(list), shows)
	return nil
}
