// Package e2e is an end-to-end harness in non-test files: it writes, then
// polls the cache, as tests do. Not reported.
package e2e

import (
	"context"

	"example.com/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func UpdateAndWait(ctx context.Context, c client.Client, w *api.Widget) error {
	if err := c.Update(ctx, w); err != nil {
		return err
	}
	return c.Get(ctx, client.ObjectKeyFromObject(w), w)
}
