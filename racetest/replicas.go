package racetest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// FailoverMode is how [Replicas.Failover] stops the leader.
type FailoverMode int

const (
	// Crash stops the leader as if its process died: from that moment no
	// request of it reaches the API server, so its lease is not released
	// and the others must wait for it to expire, and every write it still
	// had in flight fails with [ErrReplicaCrashed].
	Crash FailoverMode = iota + 1
	// Handover stops the leader cleanly: its reconciles finish, then it
	// releases its lease, and a standby takes it at its next retry.
	Handover
	// Expire stops the leader cleanly, as Handover does, its reconciles
	// finishing, but does not release its lease, which the others wait out
	// as after a Crash: a manager built without
	// LeaderElectionReleaseOnCancel, controller-runtime's default, stops so.
	Expire
)

// String implements fmt.Stringer.
func (m FailoverMode) String() string {
	switch m {
	case Crash:
		return "crash"
	case Handover:
		return "handover"
	case Expire:
		return "expire"
	default:
		return fmt.Sprintf("FailoverMode(%d)", int(m))
	}
}

var (
	// ErrReplicaCrashed is the error of every request a crashed replica
	// sends: the request is not sent.
	ErrReplicaCrashed = errors.New("replica crashed: request not sent")
	// ErrNotElected is returned when no replica is elected in time.
	ErrNotElected = errors.New("no replica elected")
	// ErrNoStandby is returned by Failover when no replica is left to take
	// over.
	ErrNoStandby = errors.New("no standby replica")
	// ErrNoLeader is returned by Failover when no running replica leads.
	ErrNoLeader = errors.New("no replica leads")
	// ErrLeaseKept is the error of the lease release of a replica stopped
	// with [Expire]: the release is not sent.
	ErrLeaseKept = errors.New("replica stopped with its lease kept: release not sent")
)

// ReplicaOptionsError says which argument of [StartReplicas] or
// [Replicas.Failover], or which field of [ReplicaOptions] (Field
// "ReplicaOptions.Config" and so on), is invalid, with the fields of a
// [FaultOptionsError]: a type of its own, so that errors.As tells which
// options were refused. errors.Is(err, ErrInvalidFaultOptions) is true.
type ReplicaOptionsError FaultOptionsError

// Error implements error.
func (e *ReplicaOptionsError) Error() string { return (*FaultOptionsError)(e).message("") }

// Is makes errors.Is(err, ErrInvalidFaultOptions) true.
func (e *ReplicaOptionsError) Is(target error) bool { return target == ErrInvalidFaultOptions }

// ReplicaOptions configure [StartReplicas]. Zero durations take the
// defaults; invalid values are a [*ReplicaOptionsError].
type ReplicaOptions struct {
	// Config reaches the API server; it must not be nil.
	Config *rest.Config
	// Manager is the base of every replica's manager.Options. racetest sets
	// its leader election fields (LeaderElection, LeaderElectionID,
	// LeaderElectionNamespace, LeaderElectionReleaseOnCancel,
	// LeaderElectionResourceLockInterface, LeaderElectionConfig,
	// LeaseDuration, RenewDeadline, RetryPeriod). A replica's manager is
	// built on a copy of Config through which a crash cuts it off: a
	// NewClient or NewCache must build on the config it is given. An
	// empty Metrics.BindAddress becomes "0" (off), so that replicas do not
	// race for a port, and a nil Controller.SkipNameValidation becomes
	// true, so that replicas may name their controllers alike.
	Manager manager.Options
	// Setup, if set, adds the replica's controllers to mgr; name is the
	// replica's, LeaderElectionID-0, -1 and on in the order they start, and
	// its identity on the Lease.
	Setup func(mgr manager.Manager, name string) error

	// LeaderElectionID names the Lease, in LeaderElectionNamespace; both
	// are required.
	LeaderElectionID, LeaderElectionNamespace string
	// LeaseDuration, RenewDeadline and RetryPeriod of the election;
	// default 2s, 1.5s and 300ms. LeaseDuration must exceed RenewDeadline,
	// and RenewDeadline 1.2 RetryPeriods, as client-go requires.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Timeout bounds each wait for an election; default 5 LeaseDurations.
	Timeout time.Duration
	// Replace makes Failover start a new standby once a new leader is
	// elected, so that the number of replicas stays the same.
	Replace bool
}

// Failover is what one [Replicas.Failover] observed.
type Failover struct {
	Mode FailoverMode
	// Stopped is when Old was stopped: the crash, or the start of its clean
	// stop.
	Stopped time.Time
	// Old is the replica that led and was stopped, New the one elected
	// after it.
	Old, New string
	// Gap runs from the stop of Old (the crash, or the start of its clean
	// stop) to the election of New: the time no replica led. For Crash it
	// is about LeaseDuration; for Handover, Old's shutdown and a retry.
	Gap time.Duration
	// LeaseHolder is the Lease's holder as the API server had it once Old
	// had stopped: Old for Crash and Expire, whose lease is left to expire;
	// empty or New for Handover, whose lease was released.
	LeaseHolder string
	// Replacement is the standby started after New was elected, with
	// ReplicaOptions.Replace; empty without.
	Replacement string
}

// Replicas are manager replicas with leader election on one Lease, of
// which one leads and the others stand by; [Replicas.Failover] stops the
// leader. Its methods are safe for concurrent use; they run one at a time.
//
// Every replica is built with LeaderElectionReleaseOnCancel set, so any
// mode can stop any of them: ReleaseOnCancel is fixed when a manager is
// built, and replicas built per mode could not crash the leader one time and
// hand it over the next. A crash instead cuts the replica off the API server
// before stopping it, so the release it attempts fails, as a dead process
// releases nothing, and its last writes fail as well. Its events pass, so
// that its event broadcaster can flush and end. An Expire refuses only the
// release ([ErrLeaseKept]): its other requests, lease renewals among them,
// are sent until its manager has stopped.
//
// Each replica's Lease identity is its name, so the Lease's holderIdentity
// names the leader. No leader election events are recorded.
type Replicas struct {
	ctx    context.Context
	opts   ReplicaOptions
	leases coordinationv1client.LeaseInterface
	hc     *http.Client // of leases

	mu      sync.Mutex
	next    int // index of the next replica's name
	running []*replica
	started []*replica // every replica, running or not, in the order started
}

// ReplicaState is what [Replicas] know of one replica, running or stopped.
type ReplicaState struct {
	Name string
	// Elected is when it was elected; zero if it never led.
	Elected time.Time
	// Running is false once it was stopped, or found exited by [Replicas.Reap].
	Running bool
	// Exited is true when its manager returned before it was stopped: a
	// leader that could not renew its lease, as when the API server was
	// down longer than RenewDeadline, ends so.
	Exited bool
	// Requests counts every request it sent, from its start: its
	// controllers', its cache's and its lease's. A crashed replica's
	// requests that were not sent are not counted.
	Requests *Counter
}

// StartReplicas starts n replicas, each a manager on its own context from
// ctx, as are the replacements Failover starts: replica 0 first, and the others once it leads, so that which one
// leads first is decided, not raced. It returns once every replica's cache
// has synced. On an error, the replicas it started are stopped.
func StartReplicas(ctx context.Context, n int, opts ReplicaOptions) (*Replicas, error) {
	opts, err := replicaDefaults(n, opts)
	if err != nil {
		return nil, err
	}
	hc, err := rest.HTTPClientFor(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("racetest: HTTP client for the Lease: %w", err)
	}
	coord, err := coordinationv1client.NewForConfigAndClient(opts.Config, hc)
	if err != nil {
		return nil, fmt.Errorf("racetest: client for the Lease: %w", err)
	}
	r := &Replicas{ctx: ctx, opts: opts, leases: coord.Leases(opts.LeaderElectionNamespace), hc: hc}
	for i := range n {
		rep, err := r.start(ctx)
		if err == nil && i == 0 {
			_, err = r.awaitElected(ctx, func(p *replica) bool { return p == rep })
		}
		if err != nil {
			return nil, errors.Join(err, r.Stop())
		}
	}
	return r, nil
}

func replicaDefaults(n int, o ReplicaOptions) (ReplicaOptions, error) {
	invalid := func(field string, value any, reason string) (ReplicaOptions, error) {
		return o, &ReplicaOptionsError{Field: field, Value: value, Reason: reason}
	}
	switch {
	case n < 1:
		return invalid("n", n, "at least 1 replica")
	case o.Config == nil:
		return invalid("ReplicaOptions.Config", nil, "required")
	case o.LeaderElectionID == "":
		return invalid("ReplicaOptions.LeaderElectionID", `""`, "required")
	case o.LeaderElectionNamespace == "":
		return invalid("ReplicaOptions.LeaderElectionNamespace", `""`, "required")
	}
	for _, d := range []struct {
		field string
		value *time.Duration
		def   time.Duration
	}{
		{"LeaseDuration", &o.LeaseDuration, 2 * time.Second},
		{"RenewDeadline", &o.RenewDeadline, 1500 * time.Millisecond},
		{"RetryPeriod", &o.RetryPeriod, 300 * time.Millisecond},
		{"Timeout", &o.Timeout, 0},
	} {
		if *d.value < 0 {
			return invalid("ReplicaOptions."+d.field, *d.value, "must not be negative")
		}
		if *d.value == 0 {
			*d.value = d.def
		}
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * o.LeaseDuration
	}
	// client-go's checks, reported before a manager is built.
	if o.LeaseDuration <= o.RenewDeadline {
		return invalid("ReplicaOptions.RenewDeadline", o.RenewDeadline, fmt.Sprintf("must be less than LeaseDuration %s", o.LeaseDuration))
	}
	if o.RenewDeadline <= time.Duration(1.2*float64(o.RetryPeriod)) {
		return invalid("ReplicaOptions.RetryPeriod", o.RetryPeriod, fmt.Sprintf("1.2 times it must be less than RenewDeadline %s", o.RenewDeadline))
	}
	return o, nil
}

// replica is one running manager.
type replica struct {
	name    string
	mgr     manager.Manager
	clients []*http.Client
	crashed atomic.Bool
	// keepLease refuses its lease release: set by an Expire.
	keepLease atomic.Bool
	requests  *Counter

	cancel  context.CancelFunc
	stopped atomic.Bool   // we cancelled it
	done    chan struct{} // closed when Start returned; err is then set
	err     error
	watched chan struct{} // closed when the election watcher returned

	elected   chan struct{} // closed when it leads; electedAt is then set
	electedAt time.Time
}

// start builds and starts the next replica and waits for its cache to sync.
func (r *Replicas) start(ctx context.Context) (*replica, error) {
	name := fmt.Sprintf("%s-%d", r.opts.LeaderElectionID, r.next)
	r.next++
	p := &replica{name: name, done: make(chan struct{}), watched: make(chan struct{}), elected: make(chan struct{})}

	// Counted inside the crash: a request not sent is not counted.
	cfg, counter := CountRequests(r.opts.Config)
	p.requests = counter
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &crashTransport{next: rt, crashed: &p.crashed} })
	// As controller-runtime's: no single hung renew may cost the lease.
	lockCfg := rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	lockCfg.Timeout = max(r.opts.RenewDeadline/2, time.Second)
	lockHC, err := rest.HTTPClientFor(lockCfg)
	if err != nil {
		return nil, fmt.Errorf("racetest: HTTP client of %s's lease: %w", name, err)
	}
	p.clients = []*http.Client{lockHC}
	coord, err := coordinationv1client.NewForConfigAndClient(lockCfg, lockHC)
	if err != nil {
		return nil, fmt.Errorf("racetest: lease client of %s: %w", name, err)
	}

	mopts := r.opts.Manager
	mopts.LeaderElection = true
	mopts.LeaderElectionID = r.opts.LeaderElectionID
	mopts.LeaderElectionNamespace = r.opts.LeaderElectionNamespace
	mopts.LeaderElectionReleaseOnCancel = true
	mopts.LeaderElectionConfig = nil
	mopts.LeaderElectionResourceLockInterface = &keepLeaseLock{Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: r.opts.LeaderElectionID, Namespace: r.opts.LeaderElectionNamespace},
		Client:     coord,
		LockConfig: resourcelock.ResourceLockConfig{Identity: name},
		Labels:     mopts.LeaderElectionLabels,
	}, keep: &p.keepLease}
	mopts.LeaseDuration = ptr.To(r.opts.LeaseDuration)
	mopts.RenewDeadline = ptr.To(r.opts.RenewDeadline)
	mopts.RetryPeriod = ptr.To(r.opts.RetryPeriod)
	if mopts.Metrics.BindAddress == "" {
		mopts.Metrics.BindAddress = "0"
	}
	if mopts.Controller.SkipNameValidation == nil {
		mopts.Controller.SkipNameValidation = ptr.To(true)
	}
	mgr, err := manager.New(cfg, mopts)
	if err != nil {
		p.closeIdle()
		return nil, fmt.Errorf("racetest: manager of %s: %w", name, err)
	}
	p.mgr = mgr
	p.clients = append(p.clients, mgr.GetHTTPClient())
	if r.opts.Setup != nil {
		if err := r.opts.Setup(mgr, name); err != nil {
			p.closeIdle()
			return nil, fmt.Errorf("racetest: set up %s: %w", name, err)
		}
	}

	mctx, cancel := context.WithCancel(ctx)
	p.cancel = cancel
	go func() {
		p.err = mgr.Start(mctx)
		if !p.stopped.Load() {
			// A manager that returns by itself (its lease lost, say) ends
			// its process: main returns the error and every goroutine
			// dies with it. Here they would live on beside the next
			// leader, reconciles that outlast a lost lease included, so
			// the replica is cut off the API server as that process
			// would be.
			p.crashed.Store(true)
		}
		close(p.done)
	}()
	go func() {
		defer close(p.watched)
		select {
		case <-mgr.Elected():
			p.electedAt = time.Now()
			close(p.elected)
		case <-p.done:
		}
	}()
	r.running = append(r.running, p)
	r.started = append(r.started, p)

	// WaitForCacheSync returns when its context ends, not when the
	// manager fails: end it then too.
	syncCtx, cancelSync := context.WithTimeout(mctx, r.opts.Timeout)
	defer cancelSync()
	go func() {
		select {
		case <-p.done:
			cancelSync()
		case <-syncCtx.Done():
		}
	}()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		select {
		case <-p.done:
			return nil, fmt.Errorf("racetest: %s stopped before its cache synced: %w", name, p.err)
		default:
			return nil, fmt.Errorf("racetest: cache of %s not synced within %s: %w", name, r.opts.Timeout, syncCtx.Err())
		}
	}
	return p, nil
}

// exited reports whether p's manager returned before p was stopped.
func (p *replica) exited() bool {
	select {
	case <-p.done:
		return !p.stopped.Load()
	default:
		return false
	}
}

func (p *replica) leads() bool {
	select {
	case <-p.done:
		return false
	default:
	}
	select {
	case <-p.elected:
		return true
	default:
		return false
	}
}

// stop stops p and waits for its manager to return. A leader's "leader
// election lost" on the way out is how controller-runtime ends one, not an
// error; an exit before the stop is, whatever it returned.
func (p *replica) stop() error {
	defer p.closeIdle()
	if p.cancel == nil {
		return nil
	}
	select {
	case <-p.done:
		p.cancel()
		if !p.stopped.Load() && p.err != nil {
			return fmt.Errorf("racetest: %s exited before it was stopped: %w", p.name, p.err)
		}
		return nil
	default:
	}
	p.stopped.Store(true)
	p.cancel()
	<-p.done
	<-p.watched
	if p.err != nil && !strings.Contains(p.err.Error(), "leader election lost") {
		return fmt.Errorf("racetest: %s: %w", p.name, p.err)
	}
	return nil
}

// closeIdle closes p's idle connections, so that their goroutines end with
// it.
func (p *replica) closeIdle() {
	for _, hc := range p.clients {
		utilnet.CloseIdleConnectionsFor(hc.Transport)
	}
}

// Leader returns the name of the replica that leads, or "" if none does.
func (r *Replicas) Leader() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.leader(); p != nil {
		return p.name
	}
	return ""
}

func (r *Replicas) leader() *replica {
	for _, p := range r.running {
		if p.leads() {
			return p
		}
	}
	return nil
}

// Names returns the names of the running replicas, in the order they were
// started.
func (r *Replicas) Names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, 0, len(r.running))
	for _, p := range r.running {
		names = append(names, p.name)
	}
	return names
}

// State returns what is known of the named replica, running or stopped,
// and false for a name no replica had.
func (r *Replicas) State(name string) (ReplicaState, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.started {
		if p.name != name {
			continue
		}
		st := ReplicaState{Name: p.name, Running: slices.Contains(r.running, p), Exited: p.exited(), Requests: p.requests}
		select {
		case <-p.elected:
			st.Elected = p.electedAt
		default:
		}
		return st, true
	}
	return ReplicaState{}, false
}

// Reap removes the running replicas whose manager returned by itself, a
// leader that lost its lease among them, and with ReplicaOptions.Replace
// starts one in each one's place, as a Deployment would. It returns the
// names of those it removed, in the order they were started. Their exit
// is what Reap is for, not an error; an error is one of starting a
// replacement. A replica whose manager returned by itself was cut off the
// API server at that moment, as its process would have ended: what its
// goroutines still send (a reconcile that outlived the lost lease) fails
// with ErrReplicaCrashed and never reaches the server.
func (r *Replicas) Reap(ctx context.Context) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var reaped []string
	for _, p := range slices.Clone(r.running) {
		if !p.exited() {
			continue
		}
		_ = p.stop() // that it exited is known; how is in its manager's log
		r.remove(p)
		reaped = append(reaped, p.name)
		if r.opts.Replace {
			if _, err := r.start(r.ctx); err != nil {
				return reaped, fmt.Errorf("racetest: replace %s, which exited: %w", p.name, err)
			}
		}
	}
	return reaped, nil
}

func (r *Replicas) remove(old *replica) {
	r.running = slices.DeleteFunc(r.running, func(p *replica) bool { return p == old })
}

// awaitElected polls until a running replica that ok accepts leads.
func (r *Replicas) awaitElected(ctx context.Context, ok func(*replica) bool) (*replica, error) {
	var elected *replica
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, r.opts.Timeout, true, func(context.Context) (bool, error) {
		for _, p := range r.running {
			if ok(p) && p.leads() {
				elected = p
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w within %s: %w", ErrNotElected, r.opts.Timeout, err)
	}
	return elected, nil
}

// Failover stops the leader the way mode says and waits for another replica
// to be elected; with ReplicaOptions.Replace it then starts a new standby.
// An error of the stopped leader is returned with the Failover, once the
// new leader is elected.
func (r *Replicas) Failover(ctx context.Context, mode FailoverMode) (Failover, error) {
	if mode != Crash && mode != Handover && mode != Expire {
		return Failover{}, &ReplicaOptionsError{Field: "mode", Value: mode, Reason: "Crash, Handover or Expire"}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.leader()
	if old == nil {
		return Failover{}, ErrNoLeader
	}
	if len(r.running) < 2 {
		return Failover{}, fmt.Errorf("%w to take over from %s", ErrNoStandby, old.name)
	}
	out := Failover{Mode: mode, Old: old.name, Stopped: time.Now()}
	switch mode {
	case Crash:
		old.crashed.Store(true)
	case Expire:
		old.keepLease.Store(true)
	}
	stopErr := old.stop()
	r.remove(old)
	lease, err := r.leases.Get(ctx, r.opts.LeaderElectionID, metav1.GetOptions{})
	if err != nil {
		return out, errors.Join(stopErr, fmt.Errorf("racetest: read the Lease after stopping %s: %w", old.name, err))
	}
	out.LeaseHolder = ptr.Deref(lease.Spec.HolderIdentity, "")

	elected, err := r.awaitElected(ctx, func(*replica) bool { return true })
	if err != nil {
		return out, errors.Join(stopErr, fmt.Errorf("racetest: after the %s of %s: %w", mode, old.name, err))
	}
	out.New, out.Gap = elected.name, elected.electedAt.Sub(out.Stopped)
	if r.opts.Replace {
		p, err := r.start(r.ctx)
		if err != nil {
			return out, errors.Join(stopErr, fmt.Errorf("racetest: replace %s: %w", old.name, err))
		}
		out.Replacement = p.name
	}
	return out, stopErr
}

// Stop stops every replica, standbys first so that none is elected on the
// way, and waits for their managers to return. It returns their errors
// joined; a replica that exited before it was stopped is one.
func (r *Replicas) Stop() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer utilnet.CloseIdleConnectionsFor(r.hc.Transport)
	var errs []error
	leader := r.leader()
	for _, p := range r.running {
		if p != leader {
			errs = append(errs, p.stop())
		}
	}
	if leader != nil {
		errs = append(errs, leader.stop())
	}
	r.running = nil
	return errors.Join(errs...)
}

// keepLeaseLock refuses the release of the lease once keep is set: the
// Update that client-go's leader elector sends on its way out, whose
// record names no holder. Renewals pass, so that a leader stopping with
// Expire keeps leading until its reconciles have finished, as one built
// without ReleaseOnCancel does.
type keepLeaseLock struct {
	resourcelock.Interface
	keep *atomic.Bool
}

// Update implements resourcelock.Interface.
func (l *keepLeaseLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	if l.keep.Load() && rec.HolderIdentity == "" {
		return ErrLeaseKept
	}
	return l.Interface.Update(ctx, rec)
}

// crashTransport fails every request once crashed is set, events aside:
// those a dead process would not send either, but an event broadcaster that
// cannot write retries for minutes and outlives the manager.
type crashTransport struct {
	next    http.RoundTripper
	crashed *atomic.Bool
}

// WrappedRoundTripper lets utilnet.CloseIdleConnectionsFor reach the
// transport underneath.
func (t *crashTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

// RoundTrip implements http.RoundTripper.
func (t *crashTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.crashed.Load() && Classify(req.Method, req.URL).Resource != "events" {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, ErrReplicaCrashed
	}
	return t.next.RoundTrip(req)
}
