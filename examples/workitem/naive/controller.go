package naive

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	v1 "github.com/racesafe/racesafe/examples/workitem/api/v1alpha1"
	"github.com/racesafe/racesafe/examples/workitem/settings"
	"github.com/racesafe/racesafe/examples/workitem/sim"
)

// The phase names the post-mortem's code uses.
const (
	PhaseDeleting = v1.PhaseDeleting
	PhaseDeleted  = v1.PhaseDeleted
)

// Variant selects the delete flow: the incident's, or one of its hand fixes.
type Variant int

const (
	// Incident is the code of the incident.
	Incident Variant = iota
	// Fix1 is the post-mortem's first fix: default requeues after
	// SyncStatusCheckInterval, so a stuck item recovers late instead of never.
	Fix1
	// Fix2 is the post-mortem's second fix: the phase is pinned in a local
	// variable before the helpers run (its default also requeues, as written).
	Fix2
)

// String names the variant as the benchmarks print it.
func (v Variant) String() string {
	switch v {
	case Incident:
		return "naive"
	case Fix1:
		return "naive+fix1"
	case Fix2:
		return "naive+fix2"
	}
	return fmt.Sprintf("Variant(%d)", int(v))
}

// Controller reconciles WorkItems the way the incident's controller did.
type Controller struct {
	client.Client
	ConfigManager *settings.Manager
	Installer     *sim.Installer
	Variant       Variant
}

// SetupWithManager registers the controller with the incident's predicates:
// status-only changes do not trigger a reconcile. It owns the items'
// children, so a child's events bring its item back.
func (r *Controller) SetupWithManager(mgr ctrl.Manager, name string, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		For(&v1.WorkItem{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.ConfigMap{}).
		WithOptions(opts).
		Complete(r)
}

// Reconcile reads the item from the cache and runs the delete or create flow.
func (r *Controller) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	item := &v1.WorkItem{}
	if err := r.Get(ctx, req.NamespacedName, item); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !item.DeletionTimestamp.IsZero() {
		log.FromContext(ctx).V(1).Info("entering delete flow, setting phase to Deleting", "phase", item.Status.Phase)
		switch r.Variant {
		case Fix1:
			return r.reconcileDeleteFix1(ctx, item)
		case Fix2:
			return r.reconcileDeleteFix2(ctx, item)
		default:
			return r.reconcileDelete(ctx, item)
		}
	}
	return r.reconcileCreate(ctx, item)
}

// reconcileDelete is the post-mortem's delete state machine.
func (r *Controller) reconcileDelete(ctx context.Context, item *v1.WorkItem) (ctrl.Result, error) {
	if item.Status.Phase != PhaseDeleting && item.Status.Phase != PhaseDeleted {
		if err := r.updateStatus(ctx, item, PhaseDeleting); err != nil {
			return ctrl.Result{}, err
		}
	}

	if err := r.syncDryRunCondition(ctx, item); err != nil {
		return ctrl.Result{}, err
	}

	switch item.Status.Phase {
	case PhaseDeleting:
		return r.executeUninstall(ctx, item)
	case PhaseDeleted:
		return ctrl.Result{}, nil
	default:
		log.FromContext(ctx).Info("unexpected phase during deletion", "phase", item.Status.Phase)
		return ctrl.Result{}, nil
	}
}

// reconcileDeleteFix1 is reconcileDelete with the post-mortem's first fix.
func (r *Controller) reconcileDeleteFix1(ctx context.Context, item *v1.WorkItem) (ctrl.Result, error) {
	if item.Status.Phase != PhaseDeleting && item.Status.Phase != PhaseDeleted {
		if err := r.updateStatus(ctx, item, PhaseDeleting); err != nil {
			return ctrl.Result{}, err
		}
	}

	if err := r.syncDryRunCondition(ctx, item); err != nil {
		return ctrl.Result{}, err
	}

	switch item.Status.Phase {
	case PhaseDeleting:
		return r.executeUninstall(ctx, item)
	case PhaseDeleted:
		return ctrl.Result{}, nil
	default:
		cfg := r.ConfigManager.Get()
		return ctrl.Result{RequeueAfter: cfg.SyncStatusCheckInterval}, nil
	}
}

// reconcileDeleteFix2 is the post-mortem's second fix, as written there.
func (r *Controller) reconcileDeleteFix2(ctx context.Context, item *v1.WorkItem) (ctrl.Result, error) {
	effectivePhase := item.Status.Phase
	if effectivePhase != PhaseDeleting && effectivePhase != PhaseDeleted {
		if err := r.updateStatus(ctx, item, PhaseDeleting); err != nil {
			return ctrl.Result{}, err
		}
		effectivePhase = PhaseDeleting
	}

	if err := r.syncDryRunCondition(ctx, item); err != nil {
		return ctrl.Result{}, err
	}

	switch effectivePhase {
	case PhaseDeleting:
		return r.executeUninstall(ctx, item)
	case PhaseDeleted:
		return ctrl.Result{}, nil
	default:
		cfg := r.ConfigManager.Get()
		return ctrl.Result{RequeueAfter: cfg.SyncStatusCheckInterval}, nil
	}
}

// updateStatus is the post-mortem's: Get into the caller's pointer, then patch.
func (r *Controller) updateStatus(ctx context.Context, item *v1.WorkItem, phase v1.Phase) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := r.Get(ctx, client.ObjectKeyFromObject(item), item); err != nil {
			return err
		}

		before := item.DeepCopy()
		item.Status.Phase = phase
		return r.Status().Patch(ctx, item, client.MergeFrom(before))
	})
}

// syncDryRunCondition goes through the same Get-then-patch logic. When the
// condition is already in sync it has nothing to write, so the snapshot the
// Get put into item is what the caller's switch reads next.
func (r *Controller) syncDryRunCondition(ctx context.Context, item *v1.WorkItem) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := r.Get(ctx, client.ObjectKeyFromObject(item), item); err != nil {
			return err
		}
		log.FromContext(ctx).V(1).Info("delete admission check passed", "phase", item.Status.Phase)

		before := item.DeepCopy()
		if !meta.SetStatusCondition(&item.Status.Conditions, DryRunCondition(item)) {
			return nil
		}
		return r.Status().Patch(ctx, item, client.MergeFrom(before))
	})
}

// executeUninstall deletes the children, runs the uninstall, marks the item Deleted and releases it.
func (r *Controller) executeUninstall(ctx context.Context, item *v1.WorkItem) (ctrl.Result, error) {
	if err := r.uninstallChildren(ctx, item); err != nil {
		return ctrl.Result{}, err
	}
	done, wait, err := r.Installer.Uninstall(item.UID, item.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !done {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if err := r.updateStatus(ctx, item, PhaseDeleted); err != nil {
		return ctrl.Result{}, err
	}
	controllerutil.RemoveFinalizer(item, v1.Finalizer)
	return ctrl.Result{}, r.Update(ctx, item)
}

// reconcileCreate is the create flow in the same style:
// Pending -> Installing -> Ready or Failed. Installing creates the item's
// child unless the cached List shows one. The finalizer goes on with a
// merge patch, as many operators add it: no resourceVersion is sent, so a
// stale cache copy does not conflict, and item then holds the server's answer.
func (r *Controller) reconcileCreate(ctx context.Context, item *v1.WorkItem) (ctrl.Result, error) {
	before := item.DeepCopy()
	if controllerutil.AddFinalizer(item, v1.Finalizer) {
		if err := r.Patch(ctx, item, client.MergeFrom(before)); err != nil {
			return ctrl.Result{}, err
		}
	}
	if item.Status.Phase == "" || item.Status.Phase == v1.PhasePending {
		if err := r.updateStatus(ctx, item, v1.PhaseInstalling); err != nil {
			return ctrl.Result{}, err
		}
	}

	if err := r.syncDryRunCondition(ctx, item); err != nil {
		return ctrl.Result{}, err
	}

	switch item.Status.Phase {
	case v1.PhaseInstalling:
		if err := r.installChild(ctx, item); err != nil {
			return ctrl.Result{}, err
		}
		done, wait, err := r.Installer.Install(item.UID, item.Name)
		if !done {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		if err != nil {
			return ctrl.Result{}, r.updateStatus(ctx, item, v1.PhaseFailed)
		}
		return ctrl.Result{}, r.updateStatus(ctx, item, v1.PhaseReady)
	default:
		return ctrl.Result{}, nil
	}
}

// DryRunCondition is the DryRun condition an item's spec asks for.
func DryRunCondition(item *v1.WorkItem) metav1.Condition {
	c := metav1.Condition{
		Type:    v1.ConditionDryRun,
		Status:  metav1.ConditionFalse,
		Reason:  "DryRunDisabled",
		Message: "install and uninstall change the target",
	}
	if item.Spec.DryRun {
		c.Status = metav1.ConditionTrue
		c.Reason = "DryRunEnabled"
		c.Message = "install and uninstall only pretend"
	}
	return c
}
