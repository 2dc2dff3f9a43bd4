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

func (r *R) rereadsCache(ctx context.Context, key client.ObjectKey) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &api.Widget{}
		if err := r.Get(ctx, key, cur); err != nil { // want `the conflict retry re-reads cur from the informer cache`
			return err
		}
		cur.Status.Phase = api.PhaseRunning
		return r.Status().Update(ctx, cur)
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
