package regetwritten

import (
	"context"

	"example.com/api"
	"github.com/racesafe/racesafe/expectations"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"regetwritten/helpers"
)

type R struct {
	client.Client
	APIReader client.Reader
	safe      *expectations.Client
}

// setPhase is the post-mortem's helper: a re-Get into the caller's pointer,
// then a status patch, in a conflict retry.
func (r *R) setPhase(ctx context.Context, w *api.Widget, p api.Phase) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := r.Get(ctx, client.ObjectKeyFromObject(w), w); err != nil {
			return err
		}
		before := w.DeepCopy()
		w.Status.Phase = p
		return r.Status().Patch(ctx, w, client.MergeFrom(before))
	})
}

func (r *R) syncCondition(ctx context.Context, w *api.Widget) error {
	return r.Get(ctx, client.ObjectKeyFromObject(w), w)
}

// The incident: the phase written, then a helper puts the cached copy back.
func (r *R) deleteFlow(ctx context.Context, w *api.Widget) error {
	if err := r.setPhase(ctx, w, api.PhaseDeleting); err != nil {
		return err
	}
	return r.syncCondition(ctx, w) // want `syncCondition Gets w from the informer cache, and this reconcile wrote w at line 40`
}

func (r *R) direct(ctx context.Context, w *api.Widget) error {
	if err := r.Update(ctx, w); err != nil {
		return err
	}
	return r.Get(ctx, client.ObjectKeyFromObject(w), w) // want `Get from the informer cache into w, which this reconcile wrote at line 47`
}

func (r *R) acrossPackages(ctx context.Context, w *api.Widget) error {
	if err := r.Status().Update(ctx, w); err != nil {
		return err
	}
	return helpers.Refresh(ctx, r.Client, w) // want `Refresh Gets w from the informer cache`
}

func (r *R) freshLocal(ctx context.Context, w *api.Widget) error {
	if err := r.Update(ctx, w); err != nil {
		return err
	}
	fresh := &api.Widget{}
	return r.Get(ctx, client.ObjectKeyFromObject(w), fresh)
}

func (r *R) apiReader(ctx context.Context, w *api.Widget) error {
	if err := r.Update(ctx, w); err != nil {
		return err
	}
	return r.APIReader.Get(ctx, client.ObjectKeyFromObject(w), w)
}

func (r *R) managersAPIReader(ctx context.Context, mgr ctrl.Manager, w *api.Widget) error {
	if err := r.Update(ctx, w); err != nil {
		return err
	}
	return mgr.GetAPIReader().Get(ctx, client.ObjectKeyFromObject(w), w)
}

func (r *R) directClient(ctx context.Context, w *api.Widget) error {
	c, err := client.New(nil, client.Options{})
	if err != nil {
		return err
	}
	if err := c.Update(ctx, w); err != nil {
		return err
	}
	return c.Get(ctx, client.ObjectKeyFromObject(w), w)
}

func (r *R) racesafeClient(ctx context.Context, w *api.Widget) error {
	if err := r.Update(ctx, w); err != nil {
		return err
	}
	return r.safe.Get(ctx, client.ObjectKeyFromObject(w), w)
}

func (r *R) resourceVersionChecked(ctx context.Context, w *api.Widget) error {
	if err := r.Update(ctx, w); err != nil {
		return err
	}
	written := w.ResourceVersion
	if err := r.Get(ctx, client.ObjectKeyFromObject(w), w); err != nil {
		return err
	}
	if w.ResourceVersion != written {
		return nil
	}
	return nil
}

// Exclusive branches: the write and the re-Get are on different paths.
func (r *R) branches(ctx context.Context, w *api.Widget, deleting bool) error {
	if deleting {
		return r.setPhase(ctx, w, api.PhaseDeleting)
	}
	return r.syncCondition(ctx, w)
}

func (r *R) switchCases(ctx context.Context, w *api.Widget) error {
	switch w.Status.Phase {
	case api.PhasePending:
		return r.setPhase(ctx, w, api.PhaseRunning)
	default:
		return r.syncCondition(ctx, w)
	}
}

func (r *R) newObject(ctx context.Context, w *api.Widget) error {
	if err := r.Update(ctx, w); err != nil {
		return err
	}
	w = &api.Widget{}
	return r.Get(ctx, client.ObjectKey{Name: "x"}, w)
}

func (r *R) ignored(ctx context.Context, w *api.Widget) error {
	if err := r.Update(ctx, w); err != nil {
		return err
	}
	//racesafe:ignore this test harness reads through a cache that is never behind
	return r.Get(ctx, client.ObjectKeyFromObject(w), w)
}

func (r *R) ignoredWithoutReason(ctx context.Context, w *api.Widget) error {
	if err := r.Update(ctx, w); err != nil {
		return err
	}
	return r.Get(ctx, client.ObjectKeyFromObject(w), w) //racesafe:ignore // want `racesafe:ignore needs a reason`
}

// refreshObject re-Gets into any object its caller passes: an interface
// parameter is the caller's object as much as a pointer is.
func (r *R) refreshObject(ctx context.Context, obj client.Object) error {
	return r.Get(ctx, client.ObjectKeyFromObject(obj), obj)
}

func (r *R) throughInterface(ctx context.Context, w *api.Widget) error {
	if err := r.Status().Update(ctx, w); err != nil {
		return err
	}
	return r.refreshObject(ctx, w) // want `refreshObject Gets w from the informer cache`
}

// fillUID Gets only an object the server has not answered for yet: a
// written object has a UID, so the Get never runs after a write.
func (r *R) fillUID(ctx context.Context, obj client.Object) error {
	m, ok := obj.(api.MetaAccessor)
	if !ok {
		return nil
	}
	meta := m.GetObjectMeta()
	if meta.GetUID() == "" {
		return r.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	}
	return nil
}

func (r *R) uidGuardedHelper(ctx context.Context, w *api.Widget) error {
	if err := r.Update(ctx, w); err != nil {
		return err
	}
	return r.fillUID(ctx, w)
}

func (r *R) uidGuarded(ctx context.Context, w *api.Widget) error {
	if err := r.Update(ctx, w); err != nil {
		return err
	}
	if w.UID == "" && w.Name != "" {
		return r.Get(ctx, client.ObjectKeyFromObject(w), w)
	}
	return nil
}

// A guard on another object's UID does not cover w.
func (r *R) otherGuarded(ctx context.Context, w, other *api.Widget) error {
	if err := r.Update(ctx, w); err != nil {
		return err
	}
	if other.GetResourceVersion() == "" {
		return r.Get(ctx, client.ObjectKeyFromObject(w), w) // want `Get from the informer cache into w`
	}
	return nil
}

// Not reported: the Get runs where the Create failed (the object exists
// already), so nothing was written into p.
func (r *R) createOrGet(ctx context.Context, p *api.Part, alreadyExists func(error) bool) error {
	if err := r.Create(ctx, p); err != nil {
		if alreadyExists(err) {
			return r.Get(ctx, client.ObjectKeyFromObject(p), p)
		}
		return err
	}
	return nil
}

func (r *R) updateOrGet(ctx context.Context, w *api.Widget) error {
	err := r.Update(ctx, w)
	if err != nil {
		return r.Get(ctx, client.ObjectKeyFromObject(w), w)
	}
	return nil
}

// Not reported: after a successful Create there is no older copy for the
// cache to put back; it answers NotFound or the created object.
func (r *R) createThenGet(ctx context.Context, p *api.Part) error {
	if err := r.Create(ctx, p); err == nil {
		return r.Get(ctx, client.ObjectKeyFromObject(p), p)
	}
	return nil
}

func (r *R) ensure(ctx context.Context, p *api.Part) (bool, error) {
	if err := r.Create(ctx, p); err != nil {
		return false, nil // already there
	}
	return true, nil
}

func (r *R) ensureThenGet(ctx context.Context, p *api.Part) error {
	created, err := r.ensure(ctx, p)
	if err != nil || created {
		return err
	}
	return r.Get(ctx, client.ObjectKeyFromObject(p), p)
}

// Reported: the Get runs where the update succeeded.
func (r *R) updateThenGet(ctx context.Context, w *api.Widget) error {
	if err := r.Update(ctx, w); err == nil {
		return r.Get(ctx, client.ObjectKeyFromObject(w), w) // want `Get from the informer cache into w, which this reconcile wrote`
	}
	return nil
}

func (r *R) updatedThenGet(ctx context.Context, w *api.Widget) error {
	err := r.Update(ctx, w)
	if err != nil {
		return err
	}
	return r.Get(ctx, client.ObjectKeyFromObject(w), w) // want `Get from the informer cache into w, which this reconcile wrote`
}

// Not reported: the closure that writes is stored, not run, before the Get.
func (r *R) storedClosure(ctx context.Context, w *api.Widget) error {
	create := func() error { return r.Update(ctx, w) }
	if err := r.Get(ctx, client.ObjectKeyFromObject(w), w); err != nil {
		return create()
	}
	return nil
}

// Not reported: a deferred write runs after the Get.
func (r *R) deferredWrite(ctx context.Context, w *api.Widget) error {
	defer func() { _ = r.Status().Update(ctx, w) }()
	return r.Get(ctx, client.ObjectKeyFromObject(w), w)
}

func (r *R) deferredCall(ctx context.Context, w *api.Widget) error {
	defer r.Status().Update(ctx, w)
	return r.Get(ctx, client.ObjectKeyFromObject(w), w)
}

// Reported: a closure called where it is written runs there.
func (r *R) invokedClosure(ctx context.Context, w *api.Widget) error {
	if err := func() error { return r.Update(ctx, w) }(); err != nil {
		return err
	}
	return r.Get(ctx, client.ObjectKeyFromObject(w), w) // want `Get from the informer cache into w, which this reconcile wrote`
}

// A stored closure is checked on its own.
func (r *R) closureBody(ctx context.Context, w *api.Widget) func() error {
	refresh := func() error {
		if err := r.Update(ctx, w); err != nil {
			return err
		}
		return r.Get(ctx, client.ObjectKeyFromObject(w), w) // want `Get from the informer cache into w, which this reconcile wrote`
	}
	return refresh
}
