// Package reconciler is the WorkItem controller of the incident, rebuilt from
// racesafe's primitives. Put it beside examples/workitem/naive to see what
// each primitive replaces:
//
//   - the entry read goes through an expectations.Reader, so a cache snapshot
//     older than this controller's last write is refused (and requeued), never
//     acted on;
//   - the owner check (expectations.OwnerTracker) refuses, at the same entry,
//     a cache that has not yet seen a child this controller created or
//     deleted for the item, so the List of children the install decides from
//     never misses one and no child is created twice;
//   - every status and finalizer write goes through a statusupdate.Patcher,
//     which returns what the server wrote and never reads the cache into the
//     caller's object;
//   - the phase is dispatched by a phase.Machine, pinned at entry and moved only
//     by a compare-and-swap write the server acknowledged, so the
//     Failed -> Deleting chain runs in one reconcile whatever a helper reads;
//   - fewer writes: each transition carries the DryRun condition in the same
//     write (phase.TransitionWith), and the delete flow ends by releasing the
//     finalizer (phase.Release) instead of writing a Deleted phase nobody
//     sees: two WorkItem writes per deleted item;
//   - no handler can end in silence: unknown phases and unsettled items come
//     back after the configured interval (requeue), and a write refused
//     because the phase moved is a short requeue (requeue.OnStale);
//   - a new leader primes its tracker with one live List before it acts on
//     any item, so its cache's copies older than the last leader's writes
//     are refused too; a stopping leader finishes the release of an
//     uninstall it saw done, so no uninstall is asked for twice;
//   - the expectations predicate is OR'ed into GenerationChangedPredicate, so
//     an item requeued on a stale read is woken the moment its write reaches
//     the cache; the owner check's source wakes an item whose children's
//     cache caught up.
package reconciler

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	v1 "github.com/racesafe/racesafe/examples/workitem/api/v1alpha1"
	"github.com/racesafe/racesafe/examples/workitem/naive"
	"github.com/racesafe/racesafe/examples/workitem/sim"
	"github.com/racesafe/racesafe/expectations"
	"github.com/racesafe/racesafe/phase"
	"github.com/racesafe/racesafe/requeue"
	"github.com/racesafe/racesafe/statusupdate"
)

// Options configure a Reconciler.
type Options struct {
	// Installer does the (simulated) installs and uninstalls.
	Installer *sim.Installer
	// Interval is how soon an unsettled item is looked at again, read at
	// call time (the incident's ConfigManager.Get().SyncStatusCheckInterval).
	Interval requeue.Interval
	// StaleRequeue is how soon a read the cache served stale, or a write
	// refused because the phase moved, is retried; the expectations
	// predicate and the owner check's source usually wake the item sooner.
	// Default 200ms.
	StaleRequeue time.Duration
	// FinishTimeout bounds how long a reconcile of an item being deleted
	// may go on once the manager stops, so that an uninstall it saw done is
	// written down (the release) rather than left to the next leader to ask
	// again. Default 10s; keep it below the manager's graceful shutdown
	// timeout (30s by default).
	FinishTimeout time.Duration
}

// Reconciler reconciles WorkItems.
type Reconciler struct {
	client    client.Client
	scheme    *runtime.Scheme
	reader    *expectations.Reader
	tracker   *expectations.Tracker
	owners    *expectations.OwnerTracker
	children  *expectations.Client
	patcher   *statusupdate.Patcher[*v1.WorkItem]
	machine   *phase.Machine[*v1.WorkItem, v1.Phase]
	installer *sim.Installer
	stale     time.Duration
	finish    time.Duration
	cache     cache.Cache
	apiReader client.Reader
	// primed is closed once the tracker knows what the cache lags behind
	// the API server (see prime); no item is acted on before.
	primed chan struct{}

	// uninstalled remembers, per item, the incarnation whose uninstall
	// this process saw finish, so that a release that failed (a server
	// error, an API server down) is retried without asking the installer
	// again. Kept in memory only: a restarted or new leader asks once more.
	uninstalled sync.Map // types.NamespacedName -> types.UID
}

// New builds a Reconciler on the manager's cache, client and API reader.
func New(mgr ctrl.Manager, opts Options) (*Reconciler, error) {
	if opts.StaleRequeue <= 0 {
		opts.StaleRequeue = 200 * time.Millisecond
	}
	if opts.FinishTimeout <= 0 {
		opts.FinishTimeout = 10 * time.Second
	}
	tracker := expectations.New(expectations.Options{Name: "workitem", Scheme: mgr.GetScheme()})
	owners, err := expectations.NewOwnerTracker(expectations.OwnerOptions{
		Name:   "workitem",
		For:    &v1.WorkItem{},
		Cache:  mgr.GetCache(),
		Scheme: mgr.GetScheme(),
	})
	if err != nil {
		return nil, fmt.Errorf("workitem owner tracker: %w", err)
	}
	// The children are written through the drop-in client: a child Create
	// the server applied but answered with an error (a timeout, a 500) is
	// then followed by one live read of the kind's version, and the owner
	// check waits for the cache to reach it, so the retry cannot create a
	// second child. racetest.Explore's ambiguous-write plan found this.
	children, err := expectations.NewClient(mgr.GetClient(), expectations.ClientOptions{
		Name: "workitem", Owners: owners, APIReader: mgr.GetAPIReader(),
	})
	if err != nil {
		return nil, fmt.Errorf("workitem children client: %w", err)
	}
	r := &Reconciler{
		owners:    owners,
		children:  children,
		client:    mgr.GetClient(),
		scheme:    mgr.GetScheme(),
		reader:    expectations.NewReader(mgr.GetClient(), tracker),
		tracker:   tracker,
		patcher:   statusupdate.New[*v1.WorkItem](mgr.GetClient(), mgr.GetAPIReader(), statusupdate.Options{Name: "workitem", Expectations: tracker}),
		installer: opts.Installer,
		stale:     opts.StaleRequeue,
		finish:    opts.FinishTimeout,
		cache:     mgr.GetCache(),
		apiReader: mgr.GetAPIReader(),
		primed:    make(chan struct{}),
	}
	m, err := phase.New(phase.Options[*v1.WorkItem, v1.Phase]{
		Name:   "workitem",
		Get:    getPhase,
		Set:    func(it *v1.WorkItem, p v1.Phase) { it.Status.Phase = p },
		Writer: r.patcher,
		Handlers: map[v1.Phase]phase.Handler[*v1.WorkItem, v1.Phase]{
			v1.PhasePending:    r.pending,
			v1.PhaseInstalling: r.installing,
			v1.PhaseReady:      settled(v1.PhaseReady),
			v1.PhaseFailed:     settled(v1.PhaseFailed),
			v1.PhaseDeleting:   r.deleting,
			v1.PhaseDeleted:    r.deleted,
		},
		Transitions: map[v1.Phase][]v1.Phase{
			v1.PhasePending:    {v1.PhaseInstalling, v1.PhaseDeleting},
			v1.PhaseInstalling: {v1.PhaseReady, v1.PhaseFailed, v1.PhaseDeleting},
			v1.PhaseReady:      {v1.PhaseDeleting},
			v1.PhaseFailed:     {v1.PhaseDeleting},
		},
		Terminal: []v1.Phase{v1.PhaseReady, v1.PhaseFailed, v1.PhaseDeleted},
		Interval: opts.Interval,
	})
	if err != nil {
		return nil, fmt.Errorf("workitem phase machine: %w", err)
	}
	r.machine = m
	return r, nil
}

// SetupWithManager registers the controller. Status-only changes are
// filtered out as in the incident, except those that satisfy a pending
// expectation: the wake-up an item requeued on a stale read is waiting for.
// It owns the items' children, and the owner check's source enqueues an
// item whose children's cache reached what its check waits for.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, name string, opts controller.Options) error {
	// A leader-election runnable: it runs when this replica is elected.
	if err := mgr.Add(manager.RunnableFunc(r.prime)); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		For(&v1.WorkItem{}, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{},
			expectations.Predicate[client.Object](r.tracker),
		))).
		Owns(&corev1.ConfigMap{}).
		WatchesRawSource(r.owners.Source()).
		WithOptions(opts).
		Complete(r)
}

// What Reconcile, the owner check and the tracker's priming send to the API
// server, for controller-gen's RBAC (examples/workitem/config/rbac): items
// are watched and listed by the cache, read and listed live by the patcher's
// conflict path and by the priming, patched (finalizer) and status-patched
// (phase, condition); children are watched and listed by the cache,
// created and deleted through the expectations client, which reads a child
// live by name (get) or the kind's version (list) when a create or delete
// ended ambiguously. workitems/finalizers: a child's controller
// reference sets blockOwnerDeletion, which an API server running the
// OwnerReferencesPermissionEnforcement admission plugin only lets a client
// that may update the owner's finalizers set.
//
// +kubebuilder:rbac:groups=demo.racesafe.io,resources=workitems,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=demo.racesafe.io,resources=workitems/status,verbs=patch
// +kubebuilder:rbac:groups=demo.racesafe.io,resources=workitems/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;delete

// Reconcile reads the item (refusing a stale cache entry), checks that the
// cache has seen every child this controller created or deleted for it, and
// runs the machine. A stale read, a stale children's cache, and a write the
// machine refused because the item's phase moved (a *phase.PhaseMovedError)
// end in a short requeue that does not feed the rate limiter's backoff.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	select {
	case <-r.primed:
	default:
		return ctrl.Result{RequeueAfter: r.stale}, nil
	}
	item := &v1.WorkItem{}
	if err := r.reader.Get(ctx, req.NamespacedName, item); err != nil {
		if apierrors.IsNotFound(err) {
			// Gone: its children's records go with it.
			r.owners.Forget(&v1.WorkItem{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name}})
			r.uninstalled.Delete(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return requeue.OnStale(err, r.stale)
	}
	// Before any List of children.
	if err := r.owners.Check(ctx, item); err != nil {
		return requeue.OnStale(err, r.stale)
	}
	// The finalizer goes on before anything is installed, outside the
	// machine: it is metadata, not a phase, and the machine then starts from
	// the object this write returned.
	if !deletingRequested(item) && !controllerutil.ContainsFinalizer(item, v1.Finalizer) {
		written, err := r.patcher.PatchObject(ctx, item, func(it *v1.WorkItem) error {
			controllerutil.AddFinalizer(it, v1.Finalizer)
			return nil
		})
		if err != nil {
			return requeue.OnStale(err, r.stale)
		}
		item = written
	}
	if deletingRequested(item) {
		// The uninstall is outside the API server: once it may be seen
		// done, a stopping manager must not cancel the release that
		// records it. Every write is compare-and-swap, so one that lands
		// after another replica took over is refused, never doubled.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), r.finish)
		defer cancel()
	}
	res, err := r.machine.Reconcile(ctx, item)
	if err != nil {
		return requeue.OnStale(err, r.stale)
	}
	return res, nil
}

// prime runs once this replica leads, before any item is acted on: its
// tracker starts empty, and its cache (a standby's, watching all along, or
// a new process's) may lag the last writes of the leader before it. One
// live List makes every cached item older than the server's copy stale
// until the cache has caught up (expectations.Tracker.Prime). It retries
// until it succeeds or the manager stops.
func (r *Reconciler) prime(ctx context.Context) error {
	if !r.cache.WaitForCacheSync(ctx) {
		return nil // stopping
	}
	log := ctrl.LoggerFrom(ctx).WithName("prime")
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		res, err := r.tracker.Prime(ctx, r.apiReader, r.client, &v1.WorkItemList{})
		if err != nil {
			log.Error(err, "priming the tracker, retrying")
			return false, nil
		}
		log.V(1).Info("tracker primed", "listed", res.Listed, "behind", res.Behind, "gone", res.Gone, "resourceVersion", res.ResourceVersion)
		return true, nil
	})
	if err != nil {
		return nil // stopping
	}
	close(r.primed)
	return nil
}

func getPhase(it *v1.WorkItem) v1.Phase {
	if it.Status.Phase == "" {
		return v1.PhasePending
	}
	return it.Status.Phase
}

func deletingRequested(it *v1.WorkItem) bool { return !it.DeletionTimestamp.IsZero() }

// withDryRun sets the DryRun condition the item's spec asks for: the
// incident's syncDryRunCondition, riding in a transition's write.
func withDryRun(it *v1.WorkItem) error {
	meta.SetStatusCondition(&it.Status.Conditions, naive.DryRunCondition(it))
	return nil
}

// toDeleting is the start of the delete flow: Deleting and the DryRun
// condition in one write.
func toDeleting() phase.Decision { return phase.TransitionWith(v1.PhaseDeleting, withDryRun) }

func (r *Reconciler) pending(ctx context.Context, s *phase.Step[*v1.WorkItem, v1.Phase]) (phase.Decision, error) {
	if deletingRequested(s.Object()) {
		return toDeleting(), nil
	}
	return phase.TransitionWith(v1.PhaseInstalling, withDryRun), nil
}

func (r *Reconciler) installing(ctx context.Context, s *phase.Step[*v1.WorkItem, v1.Phase]) (phase.Decision, error) {
	it := s.Object()
	if deletingRequested(it) {
		return toDeleting(), nil
	}
	if err := r.installChild(ctx, it); err != nil {
		return phase.Decision{}, err
	}
	done, wait, err := r.installer.Install(it.UID, it.Name)
	switch {
	case !done:
		return phase.RequeueAfter(wait), nil
	case err != nil:
		return phase.TransitionWith(v1.PhaseFailed, withDryRun), nil
	default:
		return phase.TransitionWith(v1.PhaseReady, withDryRun), nil
	}
}

// settled is Ready's and Failed's handler: nothing to do until the item is
// deleted or its spec changes, both of which bump its generation.
func settled(p v1.Phase) phase.Handler[*v1.WorkItem, v1.Phase] {
	return func(ctx context.Context, s *phase.Step[*v1.WorkItem, v1.Phase]) (phase.Decision, error) {
		if deletingRequested(s.Object()) {
			return toDeleting(), nil
		}
		return phase.WaitForEvent("spec change or deletion of a " + string(p) + " item"), nil
	}
}

func (r *Reconciler) deleting(ctx context.Context, s *phase.Step[*v1.WorkItem, v1.Phase]) (phase.Decision, error) {
	// An item that entered Deleting through toDeleting has its condition in
	// sync, and this Patch sends nothing; one written by an older version
	// gets it here.
	if err := s.Patch(ctx, withDryRun); err != nil {
		return phase.Decision{}, err
	}
	it := s.Object()
	key := types.NamespacedName{Namespace: it.Namespace, Name: it.Name}
	if uid, ok := r.uninstalled.Load(key); ok && uid == it.UID {
		return release(it), nil
	}
	if err := r.uninstallChildren(ctx, it); err != nil {
		return phase.Decision{}, err
	}
	done, wait, err := r.installer.Uninstall(it.UID, it.Name)
	switch {
	case err != nil:
		return phase.Decision{}, err
	case !done:
		return phase.RequeueAfter(wait), nil
	default:
		r.uninstalled.Store(key, it.UID)
		return release(it), nil
	}
}

// deleted handles items an older version of this controller left in
// Deleted (it wrote that phase before removing the finalizer): their
// uninstall is done, so they are released like Deleting ones.
func (r *Reconciler) deleted(ctx context.Context, s *phase.Step[*v1.WorkItem, v1.Phase]) (phase.Decision, error) {
	return release(s.Object()), nil
}

// release ends the delete flow: the finalizer removed, compare-and-swap on
// the phase. An item already without it waits for the API server.
func release(it *v1.WorkItem) phase.Decision {
	if !controllerutil.ContainsFinalizer(it, v1.Finalizer) {
		return phase.WaitForEvent("the API server removes the released item")
	}
	return phase.Release(func(it *v1.WorkItem) error {
		controllerutil.RemoveFinalizer(it, v1.Finalizer)
		return nil
	})
}

// installChild creates the item's child unless the cached List shows one,
// with the List-then-Create of the naive controller, and records the
// Create: until the cache shows the child, the owner check at Reconcile's
// entry refuses the item, so no List can miss it.
func (r *Reconciler) installChild(ctx context.Context, it *v1.WorkItem) error {
	child, err := naive.EnsureChild(ctx, r.children, r.scheme, it)
	if err != nil || child == nil {
		return err
	}
	return r.owners.ExpectWrite(ctx, it, child)
}

// uninstallChildren deletes the children the cached List shows, recording
// each deletion for the owner check.
func (r *Reconciler) uninstallChildren(ctx context.Context, it *v1.WorkItem) error {
	deleted, err := naive.DeleteChildren(ctx, r.children, it)
	for i := range deleted {
		if rerr := r.owners.ExpectDeletion(ctx, it, &deleted[i]); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

// State is what a Reconciler knows of one item: for a report of an item
// that did not move, not for deciding anything.
type State struct {
	// Primed says whether this replica's tracker was primed (it leads and
	// acts on items).
	Primed bool
	// Cached is the cache's copy of the item; nil if the cache has none.
	Cached *v1.WorkItem
	// Refused is why the entry read would refuse the cached copy (a
	// *expectations.StaleError), or the cache's error; nil if it would act.
	Refused error
	// Expectations and OwnerRecords count what the trackers hold for all
	// items: expectations of the item tracker, records of the owner check.
	Expectations, OwnerRecords int
}

// State reports what r knows of the item under key.
func (r *Reconciler) State(ctx context.Context, key types.NamespacedName) State {
	s := State{Expectations: r.tracker.Pending(), OwnerRecords: r.owners.Pending()}
	select {
	case <-r.primed:
		s.Primed = true
	default:
	}
	item := &v1.WorkItem{}
	if err := r.cache.Get(ctx, key, item); err != nil {
		s.Refused = err
		return s
	}
	s.Cached = item
	s.Refused = r.tracker.Check(item.DeepCopy())
	return s
}
