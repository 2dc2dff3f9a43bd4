package wire

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/racesafe/racesafe/expectations"
	"github.com/racesafe/racesafe/internal/objcopy"
)

// DefaultStaleRequeue is how soon a reconcile refused as stale runs again
// when Options.StaleRequeue is zero.
const DefaultStaleRequeue = 500 * time.Millisecond

// ErrBuilder is matched by errors.Is for every error of a Builder that is
// misused: no manager, no For, no reconciler, Complete called twice, or
// Options out of range.
var ErrBuilder = errors.New("invalid wire.Builder use")

// Options tune what a Builder adds to the controller. The zero value is
// ready to use.
type Options struct {
	// StaleRequeue is how soon a reconcile that was refused (an error that
	// matches expectations.ErrStale, from the owner guard or from the
	// reconciler) runs again, as a RequeueAfter that does not feed the rate
	// limiter's backoff. DefaultStaleRequeue when zero; negative is refused
	// by Complete.
	StaleRequeue time.Duration

	// FinishDeletion, when positive, lets a reconcile of a For object that
	// is marked for deletion run on after the manager is told to stop, for
	// at most FinishDeletion: its context is not cancelled by the stop. A
	// deletion often does work outside the API server (an uninstall, a
	// cloud resource) and then writes that it is done (the finalizer
	// released); cancelling between the two leaves the next leader to ask
	// for the work again. controller-runtime waits for running reconciles
	// up to the manager's GracefulShutdownTimeout (30 s by default): keep
	// FinishDeletion below it. Zero (the default) leaves every reconcile's
	// context as controller-runtime gives it; negative is refused by
	// Complete.
	FinishDeletion time.Duration
}

// Builder builds a controller as controller-runtime's builder does, with
// the drop-in expectations.Client, the owner guard and the owner source
// wired in. Make one with ControllerManagedBy; a Builder is for one
// controller and one goroutine.
type Builder struct {
	mgr    manager.Manager
	inner  *builder.Builder
	c      *expectations.Client
	err    error
	name   string
	forObj client.Object
	// owns are the Owns objects in the forms the controller caches them.
	owns    []client.Object
	opts    Options
	started bool
}

// ControllerManagedBy returns a Builder for a controller that mgr runs,
// like ctrl.NewControllerManagedBy. A nil mgr is reported by Complete.
func ControllerManagedBy(mgr manager.Manager) *Builder {
	b := &Builder{mgr: mgr}
	if objcopy.IsNil(mgr) {
		b.mgr = nil
		b.err = fmt.Errorf("ControllerManagedBy of a nil manager: %w", ErrBuilder)
		return b
	}
	b.inner = ctrl.NewControllerManagedBy(mgr)
	c, err := expectations.ForManager(mgr, expectations.ClientOptions{})
	if err != nil {
		b.err = fmt.Errorf("wire: %w", err)
		return b
	}
	b.c = c
	return b
}

// Client returns the drop-in client the controller reads and writes
// through: assign it to the reconciler's client before Complete. Its Gets
// and Lists serve its own writes; Complete gives it the controller's name
// and the owner tracker of the For kind. It is nil only after
// ControllerManagedBy(nil).
func (b *Builder) Client() *expectations.Client { return b.c }

// Named names the controller, as the builder's Named does; the name is also
// the controller label of racesafe's metrics.
func (b *Builder) Named(name string) *Builder {
	b.name = name
	if b.inner != nil {
		b.inner.Named(name)
	}
	return b
}

// For sets the kind the controller reconciles, as the builder's For does.
// Its objects are the owners the guard checks.
func (b *Builder) For(obj client.Object, opts ...builder.ForOption) *Builder {
	b.forObj = obj
	if b.inner != nil {
		b.inner.For(obj, opts...)
	}
	return b
}

// Owns watches a kind the For objects own, as the builder's Owns does. The
// owner guard waits on the informer of the form it declares (with
// builder.OnlyMetadata, the metadata-only one), whatever form the
// reconciler writes; with at least one Owns, the guard reads no other
// informer and starts none of its own.
func (b *Builder) Owns(obj client.Object, opts ...builder.OwnsOption) *Builder {
	if b.inner != nil {
		b.inner.Owns(obj, opts...)
	}
	if objcopy.IsNil(obj) {
		return b
	}
	form := obj
	for _, o := range opts {
		if o == builder.OwnsOption(builder.OnlyMetadata) {
			m := &metav1.PartialObjectMetadata{}
			if b.mgr != nil {
				if gvk, err := apiutil.GVKForObject(obj, b.mgr.GetScheme()); err == nil {
					m.SetGroupVersionKind(gvk)
				}
			}
			form = m
		}
	}
	b.owns = append(b.owns, form)
	return b
}

// Watches passes through to the builder's Watches.
func (b *Builder) Watches(obj client.Object, h handler.EventHandler, opts ...builder.WatchesOption) *Builder {
	if b.inner != nil {
		b.inner.Watches(obj, h, opts...)
	}
	return b
}

// WatchesRawSource passes through to the builder's WatchesRawSource.
func (b *Builder) WatchesRawSource(src source.Source) *Builder {
	if b.inner != nil {
		b.inner.WatchesRawSource(src)
	}
	return b
}

// WithEventFilter passes through to the builder's WithEventFilter.
func (b *Builder) WithEventFilter(p predicate.Predicate) *Builder {
	if b.inner != nil {
		b.inner.WithEventFilter(p)
	}
	return b
}

// WithOptions passes through to the builder's WithOptions.
func (b *Builder) WithOptions(o controller.Options) *Builder {
	if b.inner != nil {
		b.inner.WithOptions(o)
	}
	return b
}

// WithLogConstructor passes through to the builder's WithLogConstructor.
func (b *Builder) WithLogConstructor(f func(*reconcile.Request) logr.Logger) *Builder {
	if b.inner != nil {
		b.inner.WithLogConstructor(f)
	}
	return b
}

// WithWiring sets what the Builder adds; see Options.
func (b *Builder) WithWiring(o Options) *Builder {
	b.opts = o
	return b
}

// Complete builds the controller and adds it to the manager; see Build.
func (b *Builder) Complete(r reconcile.Reconciler) error {
	_, err := b.Build(r)
	return err
}

// Build builds the controller with r behind the owner guard and returns
// it. It names the Client (Named, or the For kind in lower case, as the
// builder does), makes the OwnerTracker of the For kind on the manager's
// cache and scheme, gives it to the Client, and watches its Source.
func (b *Builder) Build(r reconcile.Reconciler) (controller.Controller, error) {
	if b.err != nil {
		return nil, b.err
	}
	if b.started {
		return nil, fmt.Errorf("Complete or Build called twice: %w", ErrBuilder)
	}
	if b.forObj == nil || objcopy.IsNil(b.forObj) {
		return nil, fmt.Errorf("no For object: %w", ErrBuilder)
	}
	if objcopy.IsNil(r) {
		return nil, fmt.Errorf("nil reconciler: %w", ErrBuilder)
	}
	if b.opts.StaleRequeue < 0 {
		return nil, fmt.Errorf("Options.StaleRequeue %v is negative: %w", b.opts.StaleRequeue, ErrBuilder)
	}
	if b.opts.FinishDeletion < 0 {
		return nil, fmt.Errorf("Options.FinishDeletion %v is negative: %w", b.opts.FinishDeletion, ErrBuilder)
	}
	b.started = true
	name := b.name
	if name == "" {
		gvk, err := apiutil.GVKForObject(b.forObj, b.mgr.GetScheme())
		if err != nil {
			return nil, fmt.Errorf("the kind of the For object: %w", err)
		}
		name = strings.ToLower(gvk.Kind)
	}
	owners, err := expectations.NewOwnerTracker(expectations.OwnerOptions{
		Name: name, For: b.forObj, Cache: b.mgr.GetCache(), Scheme: b.mgr.GetScheme(),
		Owns: b.owns, RESTMapper: b.mgr.GetRESTMapper(), AwaitPrime: len(b.owns) > 0,
	})
	if err != nil {
		return nil, fmt.Errorf("wire %s: %w", name, err)
	}
	forList, err := listFor(b.forObj, b.mgr.GetScheme())
	if err != nil {
		return nil, fmt.Errorf("wire %s: %w", name, err)
	}
	primed := make(chan struct{})
	// Once this replica leads (at once without leader election), learn
	// what of its predecessor's last writes the cache lags, before any
	// object is acted on: the For kind's objects (kept by the Client) and,
	// with Owns, the owned kinds (recorded for their owners). The guard
	// refuses until it is done.
	apiReader := b.mgr.GetAPIReader()
	if err := b.mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		defer close(primed)
		logger := b.mgr.GetLogger().WithValues("controller", name)
		if !b.mgr.GetCache().WaitForCacheSync(ctx) {
			return nil // stopping
		}
		b.primeFor(ctx, logger, forList, apiReader)
		if len(b.owns) > 0 {
			res, err := owners.Prime(ctx, apiReader)
			if err != nil {
				logger.Error(err, "priming the owned kinds failed; owners are checked against this replica's own writes only")
				return nil
			}
			logger.V(1).Info("owned kinds primed", "listed", res.Listed, "missing", res.Missing, "behind", res.Behind, "gone", res.Gone)
		}
		return nil
	})); err != nil {
		return nil, fmt.Errorf("wire %s: %w", name, err)
	}
	b.c.Named(name).WithOwners(owners)
	stale := b.opts.StaleRequeue
	if stale == 0 {
		stale = DefaultStaleRequeue
	}
	empty, err := objcopy.EmptyLike(b.forObj)
	if err != nil {
		return nil, fmt.Errorf("wire %s: %w", name, err)
	}
	g := &guarded{r: r, c: b.c, owners: owners, empty: empty, stale: stale, finish: b.opts.FinishDeletion, primed: primed}
	return b.inner.WatchesRawSource(owners.Source()).Build(g)
}

// guarded is the reconciler Build registers: the owner guard at entry,
// Forget of an owner that is gone, and refusals as short requeues.
type guarded struct {
	r      reconcile.Reconciler
	c      *expectations.Client
	owners *expectations.OwnerTracker
	empty  client.Object
	stale  time.Duration
	finish time.Duration
	primed <-chan struct{}
}

func (g *guarded) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	select {
	case <-g.primed:
	default:
		log.FromContext(ctx).V(1).Info("not primed yet, requeued", "after", g.stale)
		return reconcile.Result{RequeueAfter: g.stale}, nil
	}
	owner := g.empty.DeepCopyObject().(client.Object)
	switch err := g.c.Get(ctx, req.NamespacedName, owner); {
	case apierrors.IsNotFound(err):
		// The owner is gone: what was recorded for it can never be
		// satisfied by it, so drop it now rather than at the TTL. An
		// empty UID matches whatever incarnation was recorded.
		owner.SetNamespace(req.Namespace)
		owner.SetName(req.Name)
		g.owners.Forget(owner)
	case err != nil:
		return g.refused(ctx, req, err)
	default:
		var err error
		if ctx, err = g.c.GuardOwner(ctx, owner); err != nil {
			return g.refused(ctx, req, err)
		}
		if g.finish > 0 && !owner.GetDeletionTimestamp().IsZero() {
			// Values (the logger, LiveReadRequired) stay; the stop's
			// cancellation does not.
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), g.finish)
			defer cancel()
		}
	}
	res, err := g.r.Reconcile(ctx, req)
	if err != nil && errors.Is(err, expectations.ErrStale) {
		return g.refused(ctx, req, err)
	}
	return res, err
}

// refused turns a refusal into a short requeue that does not feed the
// rate limiter's backoff: the cache is behind, the item is not failing.
// Any other error is returned as it is.
func (g *guarded) refused(ctx context.Context, req reconcile.Request, err error) (reconcile.Result, error) {
	if !errors.Is(err, expectations.ErrStale) {
		return reconcile.Result{}, err
	}
	log.FromContext(ctx).V(1).Info("cache behind this controller's writes, requeued", "after", g.stale, "reason", err.Error())
	return reconcile.Result{RequeueAfter: g.stale}, nil
}

// primeAttempts bounds how long the For kind's priming retries a failing
// live List before the controller goes on without it.
const primeAttempts = 5

// primeFor primes the Client with the For kind, retrying a failed live
// List a few times; if it keeps failing (RBAC that forbids a cluster-wide
// List, an API server down), it says so and the controller goes on with
// what the cache shows and its own writes.
func (b *Builder) primeFor(ctx context.Context, logger logr.Logger, list client.ObjectList, live client.Reader) {
	var err error
	for attempt := range primeAttempts {
		var res expectations.PrimeResult
		if res, err = b.c.Prime(ctx, live, list); err == nil {
			logger.V(1).Info("For kind primed", "listed", res.Listed, "behind", res.Behind, "gone", res.Gone, "resourceVersion", res.ResourceVersion)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(attempt+1) * time.Second):
		}
	}
	logger.Error(err, "priming the For kind failed; reads are served from the cache and this replica's own writes only")
}

// listFor returns an empty list of obj's kind in obj's form.
func listFor(obj client.Object, scheme *runtime.Scheme) (client.ObjectList, error) {
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return nil, fmt.Errorf("the kind of the For object: %w", err)
	}
	l, err := objcopy.EmptyList(obj, gvk, scheme)
	if err != nil {
		return nil, fmt.Errorf("the list kind of the For object: %w", err)
	}
	return l, nil
}
