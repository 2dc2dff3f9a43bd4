package stalewriteback

import (
	"context"

	"example.com/api"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

type R struct {
	client.Client
	APIReader client.Reader
}

func (r *R) release(ctx context.Context, key client.ObjectKey) error {
	w := &api.Widget{}
	if err := r.Get(ctx, key, w); err != nil {
		return err
	}
	before := w.DeepCopy()
	controllerutil.RemoveFinalizer(w, "example.com/f")
	return r.Patch(ctx, w, client.MergeFrom(before)) // want `the finalizer removed at line 23 is written from a copy of w read from the informer cache \(line 19\) without optimistic locking`
}

func (r *R) releaseBlind(ctx context.Context, key client.ObjectKey) error {
	w := &api.Widget{}
	if err := r.Get(ctx, key, w); err != nil {
		return err
	}
	controllerutil.RemoveFinalizer(w, "example.com/f")
	w.ResourceVersion = ""
	return r.Update(ctx, w) // want `the finalizer removed at line 32 is written`
}

// Not reported: optimistic locking refuses a stale copy.
func (r *R) releaseLocked(ctx context.Context, key client.ObjectKey) error {
	w := &api.Widget{}
	if err := r.Get(ctx, key, w); err != nil {
		return err
	}
	before := w.DeepCopy()
	controllerutil.RemoveFinalizer(w, "example.com/f")
	return r.Patch(ctx, w, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

// Not reported: Update sends the resourceVersion read.
func (r *R) releaseUpdate(ctx context.Context, key client.ObjectKey) error {
	w := &api.Widget{}
	if err := r.Get(ctx, key, w); err != nil {
		return err
	}
	controllerutil.RemoveFinalizer(w, "example.com/f")
	return r.Update(ctx, w)
}

// Not reported: read live.
func (r *R) releaseLive(ctx context.Context, key client.ObjectKey) error {
	w := &api.Widget{}
	if err := r.APIReader.Get(ctx, key, w); err != nil {
		return err
	}
	before := w.DeepCopy()
	controllerutil.RemoveFinalizer(w, "example.com/f")
	return r.Patch(ctx, w, client.MergeFrom(before))
}

func (r *R) copyStatus(ctx context.Context, cached *api.Widget) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &api.Widget{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(cached), cur); err != nil {
			return err
		}
		cur.Status = cached.Status // want `the conflict retry copies the status of cached, read before the retry began`
		return r.Status().Update(ctx, cur)
	})
}

// Not reported: the status is computed from the object re-read.
func (r *R) computeStatus(ctx context.Context, key client.ObjectKey) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &api.Widget{}
		if err := r.APIReader.Get(ctx, key, cur); err != nil {
			return err
		}
		next := cur.DeepCopy()
		cur.Status = next.Status
		return r.Status().Update(ctx, cur)
	})
}
