package scenario

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/racesafe/racesafe/examples/workitem/settings"
	"github.com/racesafe/racesafe/racetest"
)

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
	// Leftovers are what the run left: items holding the finalizer,
	// children doubled or left behind, uninstalls run twice.
	Leftovers
	P50, P99, Max time.Duration // delete request to object gone, over deleted items
	Elapsed       time.Duration // from the first delete to the last item gone (or the deadline)
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
	// WaitedInStalls are the Waited that took under WaitThreshold outside
	// the process's stalls: a goroutine of the controller's process that
	// sleeps a millisecond at a time woke up late (by 2 ms or more) for
	// the rest. Stalls are such late wake-ups of WaitThreshold or longer
	// during the burst, StallMax the longest. A Get of a client that
	// waits for its cache waits whether or not the process stalls.
	WaitedInStalls int
	Stalls         int
	StallMax       time.Duration
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

// Run runs the scenario once for the controller kind against the API server
// cfg reaches. It makes its own namespace and leaves no finalizer behind.
func Run(ctx context.Context, cfg *rest.Config, kind Kind, opts Options) (Report, error) {
	if !slices.Contains(Kinds, kind) {
		return Report{}, fmt.Errorf("%w: %q", ErrUnknownKind, kind)
	}
	opts = defaults(opts)
	rep := Report{Controller: kind, Items: opts.Items, Lag: opts.Lag, Workers: opts.MaxConcurrentReconciles}
	c, err := newCluster(ctx, cfg, "scenario")
	if err != nil {
		return rep, err
	}
	defer c.close(ctx)

	counted, counter := racetest.CountRequests(c.cfg)
	trips := &roundTrips{}
	counted.Wrap(trips.wrap)
	m := &managers{
		cluster: c, kind: kind, lag: racetest.LagOptions{Delay: opts.Lag, Jitter: opts.Jitter}, faults: opts.Faults,
		reads: &readTimes{}, workers: opts.MaxConcurrentReconciles,
		installer: newInstaller(opts.InstallDuration, opts.UninstallDuration), cfgs: newSettings(opts.SyncStatusCheckInterval),
	}
	name := fmt.Sprintf("workitem-%s-%d", kind, c.run)
	stop, err := m.start(ctx, counted, name)
	if err != nil {
		return rep, err
	}
	defer func() {
		if stop != nil {
			_ = stop()
		}
	}()

	// Create the items and let the controller's create flow fail them all.
	rep.SetupDeadline = SetupDeadline(opts)
	rep.BurstDeadline = opts.Timeout
	if rep.Setup, err = c.setup(ctx, kind, opts, rep.SetupDeadline); err != nil {
		return rep, err
	}

	// The burst: watch for removals, then delete everything at once.
	removed, before, err := c.watchRemovals(ctx)
	if err != nil {
		return rep, err
	}
	defer removed.stop()
	counter.Reset()
	m.reads.reset()
	defer m.reads.finish()
	trips.reset()
	reconciles0 := reconcileTotal(name)
	reconcileTime0 := reconcileSeconds(name)
	t0 := time.Now()
	deletedAt, err := c.deleteAll(ctx, opts.Items)
	if err != nil {
		return rep, err
	}

	gone := map[string]time.Duration{}
	var progress func(int)
	if opts.Progress != nil {
		progress = func(n int) {
			fmt.Fprintf(opts.Progress, "  %-11s %4d/%d gone after %s\n", kind, n, opts.Items, time.Since(t0).Round(100*time.Millisecond))
		}
	}
	restarted := false
	_, last, err := removed.await(ctx, opts.Items, t0, opts.Timeout, func(r removal, n int) error {
		gone[r.name] = r.at.Sub(deletedAt[r.name])
		rep.LastGone = r.at.Sub(t0)
		if opts.RestartAfter > 0 && !restarted && n >= opts.RestartAfter {
			restarted = true
			if err := stop(); err != nil {
				return fmt.Errorf("stop manager: %w", err)
			}
			var err error
			if stop, err = m.start(ctx, counted, name); err != nil {
				return fmt.Errorf("restart manager: %w", err)
			}
		}
		return nil
	}, progress)
	if err != nil {
		return rep, err
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
	sum := m.reads.summary()
	rep.Reads, rep.Waited, rep.WaitP50, rep.WaitMax = sum.reads, sum.waited, sum.p50, sum.top
	rep.WaitedInStalls, rep.Stalls, rep.StallMax = sum.waitedInStalls, sum.stalls, sum.stallMax
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
	rep.Leftovers, err = c.leftovers(ctx, m.installer, before)
	return rep, err
}

func defaults(o Options) Options {
	orDefault(&o.Items, 200)
	orDefault(&o.Timeout, 60*time.Second)
	orDefault(&o.MaxConcurrentReconciles, 4)
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
	orDefault(&o.SyncStatusCheckInterval, settings.Default.SyncStatusCheckInterval)
	return o
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

// readTimes collects when Gets started and ended, and from reset to finish
// the process's stalls (stallWitness).
type readTimes struct {
	mu      sync.Mutex
	d       []span
	witness *stallWitness
	stalls  []span
}

// add records a Get from start to end; a nil *readTimes records nothing
// (the soak does not time reads).
func (r *readTimes) add(start, end time.Time) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.d = append(r.d, span{Start: start, End: end})
}

// reset forgets the Gets and stalls so far and starts watching for stalls.
func (r *readTimes) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.witness.stop()
	r.d, r.stalls, r.witness = nil, nil, startStallWitness()
}

// finish stops watching for stalls; it may be called more than once.
func (r *readTimes) finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.witness != nil {
		r.stalls, r.witness = r.witness.stop(), nil
	}
}

// readSummary is what summary returns.
type readSummary struct {
	reads, waited, waitedInStalls int
	p50, top                      time.Duration
	stalls                        int
	stallMax                      time.Duration
}

// summary stops watching for stalls and returns the reads, those that took
// WaitThreshold or longer, how many of those were under it outside the
// process's stalls, the median and maximum of the waited, and the stalls of
// WaitThreshold or longer with the longest.
func (r *readTimes) summary() readSummary {
	r.finish()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out readSummary
	var w []time.Duration
	for _, s := range r.d {
		d := s.duration()
		if d < WaitThreshold {
			continue
		}
		w = append(w, d)
		if d-s.overlap(r.stalls) < WaitThreshold {
			out.waitedInStalls++
		}
	}
	for _, s := range r.stalls {
		if d := s.duration(); d >= WaitThreshold {
			out.stalls++
			out.stallMax = max(out.stallMax, d)
		}
	}
	out.p50, _, out.top = quantiles(w)
	out.reads, out.waited = len(r.d), len(w)
	return out
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
