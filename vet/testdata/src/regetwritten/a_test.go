package regetwritten

import (
	"context"

	"example.com/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Tests poll with a Get after their own writes by design: not reported.
func pollAfterCreate(ctx context.Context, c client.Client, w *api.Widget) error {
	if err := c.Create(ctx, w); err != nil {
		return err
	}
	return c.Get(ctx, client.ObjectKeyFromObject(w), w)
}
