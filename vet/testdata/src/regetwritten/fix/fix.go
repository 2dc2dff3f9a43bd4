// Package fix holds re-Gets with and without a mechanical fix: a Get into
// a fresh variable, so the written object keeps what the server returned.
package fix

import (
	"context"

	apiv1 "example.com/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

type R struct{ client.Client }

func (r *R) pointer(ctx context.Context, w *apiv1.Widget) error {
	if err := r.Status().Update(ctx, w); err != nil {
		return err
	}
	if err := r.Get(ctx, client.ObjectKeyFromObject(w), w); err != nil { // want `Get from the informer cache into w`
		return err
	}
	return nil
}

func (r *R) value(ctx context.Context, key client.ObjectKey) error {
	var w apiv1.Widget
	if err := r.Update(ctx, &w); err != nil {
		return err
	}
	return r.Get(ctx, key, &w) // want `Get from the informer cache into w`
}

func (r *R) inRetry(ctx context.Context, w *apiv1.Widget, retry func(func() error) error) error {
	if err := r.Update(ctx, w); err != nil {
		return err
	}
	return retry(func() error {
		return r.Get(ctx, client.ObjectKeyFromObject(w), w) // want `Get from the informer cache into w`
	})
}

// taken: latest is in scope, so a fix would shadow it; none is offered.
func (r *R) taken(ctx context.Context, w, latest *apiv1.Widget) error {
	if err := r.Update(ctx, w); err != nil {
		return err
	}
	return r.Get(ctx, client.ObjectKeyFromObject(w), w) // want `Get from the informer cache into w`
}

// anyObject: an interface has no type to allocate; no fix.
func (r *R) anyObject(ctx context.Context, o client.Object) error {
	if err := r.Update(ctx, o); err != nil {
		return err
	}
	return r.Get(ctx, client.ObjectKeyFromObject(o), o) // want `Get from the informer cache into o`
}
