// Package reconciler is the WorkItem controller of the incident, rebuilt from
// racesafe's primitives. Put it beside examples/workitem/naive to see what
// each primitive replaces:
//
//   - it is wired by wire.ControllerManagedBy, the drop-in port's one call:
//     the entry read goes through its expectations.Client, which serves
//     this controller's own writes where the cache lags them, never an
//     older copy; its owner guard refuses, at the same entry, a cache that
//     has not yet seen a child this controller created or deleted for the
//     item, so the List of children the install decides from never misses
//     one and no child is created twice; a refusal is a short requeue, and
//     the guard's source wakes the item when the children's cache catches
//     up;
//   - every status and finalizer write goes through a statusupdate.Patcher
//     over that client, which returns what the server wrote and never reads
//     the cache into the caller's object;
//   - the phase is dispatched by a phase.Machine, pinned at entry and moved only
//     by a compare-and-swap write the server acknowledged, so the
//     Failed -> Deleting chain runs in one reconcile whatever a helper reads;
//   - fewer writes: each transition carries the DryRun condition in the same
//     write (phase.TransitionWith), and the delete flow ends by releasing the
//     finalizer (phase.Release) instead of writing a Deleted phase nobody
//     sees: two WorkItem writes per deleted item;
//   - no handler can end in silence: unknown phases and unsettled items come
//     back after the configured interval (requeue), and a write refused
//     because the phase moved is a short requeue;
//   - a new leader primes the client with one live List before it acts on
//     any item (wire does it at election), so it reads its predecessor's
//     last writes, not what its cache still shows; a stopping leader
//     finishes the release of an uninstall it saw done
//     (wire.Options.FinishDeletion), so no uninstall is asked for twice.
package reconciler

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	v1 "github.com/racesafe/racesafe/examples/workitem/api/v1alpha1"
	"github.com/racesafe/racesafe/examples/workitem/naive"
	"github.com/racesafe/racesafe/examples/workitem/sim"
	"github.com/racesafe/racesafe/expectations"
	"github.com/racesafe/racesafe/phase"
	"github.com/racesafe/racesafe/requeue"
	"github.com/racesafe/racesafe/statusupdate"
	"github.com/racesafe/racesafe/wire"
)

// Options configure a Reconciler.
type Options struct {
	// Installer does the (simulated) installs and uninstalls.
	Installer *sim.Installer
	// Interval is how soon an unsettled item is looked at again, read at
	// call time (the incident's ConfigManager.Get().SyncStatusCheckInterval).
	Interval requeue.Interval
	// StaleRequeue is how soon a reconcile refused because the children's
	// cache lags, or a write refused because the phase moved, is retried;
	// the guard's source usually wakes the item sooner. Default 200ms.
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
	opts    Options
	scheme  *runtime.Scheme
	live    client.Reader
	cache   client.Reader
	client  *expectations.Client
	patcher *statusupdate.Patcher[*v1.WorkItem]
	machine *phase.Machine[*v1.WorkItem, v1.Phase]
	// acting is set by the first reconcile: wire runs none before this
	// replica leads and has primed its client.
	acting atomic.Bool

	// uninstalled remembers, per item, the incarnation whose uninstall
	// this process saw finish, so that a release that failed (a server
	// error, an API server down) is retried without asking the installer
	// again. Kept in memory only: a restarted or new leader asks once more.
	uninstalled sync.Map // types.NamespacedName -> types.UID
}

// New builds a Reconciler for mgr; SetupWithManager wires it.
func New(mgr ctrl.Manager, opts Options) (*Reconciler, error) {
	if opts.StaleRequeue <= 0 {
		opts.StaleRequeue = 200 * time.Millisecond
	}
	if opts.FinishTimeout <= 0 {
		opts.FinishTimeout = 10 * time.Second
	}
	if opts.Installer == nil {
		return nil, fmt.Errorf("workitem reconciler: no Installer")
	}
	return &Reconciler{opts: opts, scheme: mgr.GetScheme(), live: mgr.GetAPIReader(), cache: mgr.GetCache()}, nil
}

// SetupWithManager registers the controller with wire: status-only changes
// are filtered out as in the incident (the client serves this controller's
// own writes, so no reconcile waits for their events); it owns the items'
// children; the guard's source wakes an item whose children's cache
// reached what it waits for.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, name string, opts controller.Options) error {
	b := wire.ControllerManagedBy(mgr)
	r.client = b.Client()
	r.patcher = statusupdate.New[*v1.WorkItem](r.client, mgr.GetAPIReader(), statusupdate.Options{Name: name})
	m, err := phase.New(phase.Options[*v1.WorkItem, v1.Phase]{
		Name:   name,
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
		Interval: r.opts.Interval,
	})
	if err != nil {
		return fmt.Errorf("workitem phase machine: %w", err)
	}
	r.machine = m
	return b.Named(name).
		For(&v1.WorkItem{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.ConfigMap{}).
		WithOptions(opts).
		WithWiring(wire.Options{StaleRequeue: r.opts.StaleRequeue, FinishDeletion: r.opts.FinishTimeout}).
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

// Reconcile reads the item through the wired client (the newer of the
// cache's copy and this controller's own last write) and runs the machine.
// wire has already refused the item if its children's cache lags this
// controller's writes; an error matching expectations.ErrStale (a write
// the machine refused because the item's phase moved, a
// *phase.PhaseMovedError) becomes, in wire, a short requeue that does not
// feed the rate limiter's backoff.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.acting.Store(true)
	item := &v1.WorkItem{}
	if err := r.client.Get(ctx, req.NamespacedName, item); err != nil {
		if apierrors.IsNotFound(err) {
			r.uninstalled.Delete(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
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
			return ctrl.Result{}, err
		}
		item = written
	}
	return r.machine.Reconcile(ctx, item)
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
	done, wait, err := r.opts.Installer.Install(it.UID, it.Name)
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
	done, wait, err := r.opts.Installer.Uninstall(it.UID, it.Name)
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

// installChild creates the item's child unless the List shows one, with
// the List-then-Create of the naive controller, through the wired client:
// it records the Create for the item, and until the cache shows the child
// wire's guard refuses the item, so no List can miss it.
func (r *Reconciler) installChild(ctx context.Context, it *v1.WorkItem) error {
	_, err := naive.EnsureChild(ctx, r.client, r.scheme, it)
	return err
}

// uninstallChildren deletes the children the List shows, through the wired
// client, which records each deletion for the item's guard.
func (r *Reconciler) uninstallChildren(ctx context.Context, it *v1.WorkItem) error {
	_, err := naive.DeleteChildren(ctx, r.client, it)
	return err
}

// State is what a Reconciler knows of one item: for a report of an item
// that did not move, not for deciding anything.
type State struct {
	// Acting says whether this replica has reconciled since it started:
	// wire runs no reconcile before the replica leads and has primed.
	Acting bool
	// Cached is the cache's copy of the item; nil if the cache has none.
	Cached *v1.WorkItem
	// Refused is why the guard would refuse the item (its children's
	// cache lags), or the cache's error; nil if it would act.
	Refused error
	// Pending counts the writes the client keeps for caches that have not
	// shown them, for all items.
	Pending int
}

// State reports what r knows of the item under key.
func (r *Reconciler) State(ctx context.Context, key types.NamespacedName) State {
	s := State{Acting: r.acting.Load()}
	if r.client != nil {
		s.Pending = r.client.Pending()
	}
	item := &v1.WorkItem{}
	if err := r.cache.Get(ctx, key, item); err != nil {
		s.Refused = err
		return s
	}
	s.Cached = item
	if r.client != nil {
		s.Refused = r.client.CheckOwner(ctx, key)
	}
	return s
}
