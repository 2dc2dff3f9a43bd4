package conflictretry

import (
	"context"
	"net/http"

	"example.com/api"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

type R struct {
	client.Client
	APIReader client.Reader
}

func (r *R) retriesNothing(ctx context.Context, w *api.Widget) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		w.Status.Phase = api.PhaseRunning
		return r.Status().Update(ctx, w) // want `the conflict retry writes without reading the object again`
	})
}

// The function wrote w, then retries on a cached copy of it: the cache
// cannot show the write yet, so every attempt conflicts again.
func (r *R) rereadsOwnWrite(ctx context.Context, w *api.Widget) error {
	if err := r.Update(ctx, w); err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &api.Widget{}
		if err := r.Get(ctx, client.ObjectKeyFromObject(w), cur); err != nil { // want `the conflict retry re-reads cur from the informer cache after this function wrote w at line 27`
			return err
		}
		cur.Status.Phase = api.PhaseRunning
		return r.Status().Update(ctx, cur)
	})
}

// The written object is known by its kind when the key does not name it.
func (r *R) rereadsOwnKind(ctx context.Context, w *api.Widget, key client.ObjectKey) error {
	if err := r.Status().Update(ctx, w); err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur api.Widget
		if err := r.Get(ctx, key, &cur); err != nil { // want `the conflict retry re-reads cur from the informer cache after this function wrote w`
			return err
		}
		return r.Status().Update(ctx, &cur)
	})
}

// Not reported: the canonical retry, a fresh cached read with nothing
// written before it: a conflict comes from another writer, whose change
// the informer usually delivers within the retry's backoff.
func (r *R) rereadsCache(ctx context.Context, key client.ObjectKey) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &api.Widget{}
		if err := r.Get(ctx, key, cur); err != nil {
			return err
		}
		cur.Status.Phase = api.PhaseRunning
		return r.Status().Update(ctx, cur)
	})
}

// Not reported: what was written is another object of another kind.
func (r *R) rereadsAfterOtherKind(ctx context.Context, p *api.Part, key client.ObjectKey) error {
	if err := r.Create(ctx, p); err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &api.Widget{}
		if err := r.Get(ctx, key, cur); err != nil {
			return err
		}
		return r.Update(ctx, cur)
	})
}

// Not reported: the write is on a path that returned.
func (r *R) rereadsAfterReturn(ctx context.Context, w *api.Widget, reset bool) error {
	if reset {
		return r.Update(ctx, w)
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &api.Widget{}
		if err := r.Get(ctx, client.ObjectKeyFromObject(w), cur); err != nil {
			return err
		}
		return r.Update(ctx, cur)
	})
}

func (r *R) sideEffect(ctx context.Context, key client.ObjectKey) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &api.Widget{}
		if err := r.APIReader.Get(ctx, key, cur); err != nil {
			return err
		}
		if _, err := http.Post("http://billing.example/charge", "text/plain", nil); err != nil { // want `the conflict retry calls net/http.Post, which acts outside the cluster`
			return err
		}
		return r.Update(ctx, cur)
	})
}

// Not reported: re-read live, then written.
func (r *R) rereadsLive(ctx context.Context, key client.ObjectKey) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &api.Widget{}
		if err := r.APIReader.Get(ctx, key, cur); err != nil {
			return err
		}
		cur.Status.Phase = api.PhaseRunning
		return r.Status().Update(ctx, cur)
	})
}

func (r *R) fetch(ctx context.Context, key client.ObjectKey) (*api.Widget, error) {
	w := &api.Widget{}
	return w, r.APIReader.Get(ctx, key, w)
}

// Not reported: the written object is obtained again in every attempt, by
// a helper that returns it.
func (r *R) helperReturnsFresh(ctx context.Context, key client.ObjectKey) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := r.fetch(ctx, key)
		if err != nil {
			return err
		}
		cur.Status.Phase = api.PhaseRunning
		return r.Update(ctx, cur)
	})
}
