// Package reconciler is the WorkItem controller of the incident, rebuilt from
// racesafe's primitives. Put it beside examples/workitem/naive to see what
// each primitive replaces:
//
//   - the entry read goes through an expectations.Reader, so a cache snapshot
//     older than this controller's last write is refused (and requeued), never
//     acted on;
//   - every status and finalizer write goes through a statusupdate.Patcher,
//     which returns what the server wrote and never reads the cache into the
//     caller's object;
//   - the phase is dispatched by a phase.Machine, pinned at entry and moved only
//     by a successful write, so the Failed -> Deleting -> Deleted chain runs in
//     one reconcile whatever a helper reads;
//   - no handler can end in silence: unknown phases and unsettled items come
//     back after the configured interval (requeue);
//   - the expectations predicate is OR'ed into GenerationChangedPredicate, so
//     an item requeued on a stale read is woken the moment its write reaches
//     the cache.
package reconciler

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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
)

// Options configure a Reconciler.
type Options struct {
	// Installer does the (simulated) installs and uninstalls.
	Installer *sim.Installer
	// Interval is how soon an unsettled item is looked at again, read at
	// call time (the incident's ConfigManager.Get().SyncStatusCheckInterval).
	Interval requeue.Interval
	// StaleRequeue is how soon a read the cache served stale is retried;
	// the expectations predicate usually wakes the item sooner. Default 200ms.
	StaleRequeue time.Duration
}

// Reconciler reconciles WorkItems.
type Reconciler struct {
	reader    *expectations.Reader
	tracker   *expectations.Tracker
	patcher   *statusupdate.Patcher[*v1.WorkItem]
	machine   *phase.Machine[*v1.WorkItem, v1.Phase]
	installer *sim.Installer
	stale     time.Duration
}

// New builds a Reconciler on the manager's cache, client and API reader.
func New(mgr ctrl.Manager, opts Options) *Reconciler {
	if opts.StaleRequeue <= 0 {
		opts.StaleRequeue = 200 * time.Millisecond
	}
	tracker := expectations.New(expectations.Options{Name: "workitem", Scheme: mgr.GetScheme()})
	r := &Reconciler{
		reader:    expectations.NewReader(mgr.GetClient(), tracker),
		tracker:   tracker,
		patcher:   statusupdate.New[*v1.WorkItem](mgr.GetClient(), mgr.GetAPIReader(), statusupdate.Options{Expectations: tracker}),
		installer: opts.Installer,
		stale:     opts.StaleRequeue,
	}
	deleting := func(p v1.Phase) phase.Handler[*v1.WorkItem, v1.Phase] { return r.settled(p) }
	m, err := phase.New(phase.Options[*v1.WorkItem, v1.Phase]{
		Name:   "workitem",
		Get:    getPhase,
		Set:    func(it *v1.WorkItem, p v1.Phase) { it.Status.Phase = p },
		Writer: r.patcher,
		Handlers: map[v1.Phase]phase.Handler[*v1.WorkItem, v1.Phase]{
			v1.PhasePending:    r.pending,
			v1.PhaseInstalling: r.installing,
			v1.PhaseReady:      deleting(v1.PhaseReady),
			v1.PhaseFailed:     deleting(v1.PhaseFailed),
			v1.PhaseDeleting:   r.deleting,
			v1.PhaseDeleted:    r.deleted,
		},
		Transitions: map[v1.Phase][]v1.Phase{
			v1.PhasePending:    {v1.PhaseInstalling, v1.PhaseDeleting},
			v1.PhaseInstalling: {v1.PhaseReady, v1.PhaseFailed, v1.PhaseDeleting},
			v1.PhaseReady:      {v1.PhaseDeleting},
			v1.PhaseFailed:     {v1.PhaseDeleting},
			v1.PhaseDeleting:   {v1.PhaseDeleted},
		},
		Terminal: []v1.Phase{v1.PhaseReady, v1.PhaseFailed, v1.PhaseDeleted},
		Interval: opts.Interval,
	})
	if err != nil {
		// The table above is static; an error here is a programming error.
		panic(err)
	}
	r.machine = m
	return r
}

// SetupWithManager registers the controller. Status-only changes are
// filtered out as in the incident, except those that satisfy a pending
// expectation: the wake-up an item requeued on a stale read is waiting for.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, name string, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		For(&v1.WorkItem{}, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{},
			expectations.Predicate[client.Object](r.tracker),
		))).
		WithOptions(opts).
		Complete(r)
}

// Reconcile reads the item (refusing a stale cache entry) and runs the machine.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	item := &v1.WorkItem{}
	if err := r.reader.Get(ctx, req.NamespacedName, item); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
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

// syncDryRun is the incident's syncDryRunCondition: a second status write,
// made only when the condition is out of sync, that cannot move the phase.
func syncDryRun(ctx context.Context, s *phase.Step[*v1.WorkItem, v1.Phase]) error {
	return s.Patch(ctx, func(it *v1.WorkItem) error {
		meta.SetStatusCondition(&it.Status.Conditions, naive.DryRunCondition(it))
		return nil
	})
}

func (r *Reconciler) pending(ctx context.Context, s *phase.Step[*v1.WorkItem, v1.Phase]) (phase.Decision, error) {
	if deletingRequested(s.Object()) {
		return phase.Transition(v1.PhaseDeleting), nil
	}
	if err := syncDryRun(ctx, s); err != nil {
		return phase.Decision{}, err
	}
	return phase.Transition(v1.PhaseInstalling), nil
}

func (r *Reconciler) installing(ctx context.Context, s *phase.Step[*v1.WorkItem, v1.Phase]) (phase.Decision, error) {
	it := s.Object()
	if deletingRequested(it) {
		return phase.Transition(v1.PhaseDeleting), nil
	}
	done, wait, err := r.installer.Install(it.UID, it.Name)
	switch {
	case !done:
		return phase.RequeueAfter(wait), nil
	case err != nil:
		return phase.Transition(v1.PhaseFailed), nil
	default:
		return phase.Transition(v1.PhaseReady), nil
	}
}

// settled is Ready's and Failed's handler: nothing to do until the item is
// deleted or its spec changes, both of which bump its generation.
func (r *Reconciler) settled(p v1.Phase) phase.Handler[*v1.WorkItem, v1.Phase] {
	return func(ctx context.Context, s *phase.Step[*v1.WorkItem, v1.Phase]) (phase.Decision, error) {
		if deletingRequested(s.Object()) {
			return phase.Transition(v1.PhaseDeleting), nil
		}
		return phase.WaitForEvent("spec change or deletion of a " + string(p) + " item"), nil
	}
}

func (r *Reconciler) deleting(ctx context.Context, s *phase.Step[*v1.WorkItem, v1.Phase]) (phase.Decision, error) {
	if err := syncDryRun(ctx, s); err != nil {
		return phase.Decision{}, err
	}
	it := s.Object()
	done, wait, err := r.installer.Uninstall(it.UID, it.Name)
	switch {
	case err != nil:
		return phase.Decision{}, err
	case !done:
		return phase.RequeueAfter(wait), nil
	default:
		return phase.Transition(v1.PhaseDeleted), nil
	}
}

func (r *Reconciler) deleted(ctx context.Context, s *phase.Step[*v1.WorkItem, v1.Phase]) (phase.Decision, error) {
	if !controllerutil.ContainsFinalizer(s.Object(), v1.Finalizer) {
		return phase.WaitForEvent("the API server removes the released item"), nil
	}
	if _, err := r.patcher.PatchObject(ctx, s.Object(), func(it *v1.WorkItem) error {
		controllerutil.RemoveFinalizer(it, v1.Finalizer)
		return nil
	}); err != nil {
		return phase.Decision{}, err
	}
	return phase.Done(), nil
}
