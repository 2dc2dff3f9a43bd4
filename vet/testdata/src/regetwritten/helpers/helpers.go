// Package helpers holds status helpers in another package than their
// callers: their summaries reach the callers as facts.
package helpers

import (
	"context"

	"example.com/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Refresh re-Gets w from the cache.
func Refresh(ctx context.Context, c client.Client, w *api.Widget) error {
	return c.Get(ctx, client.ObjectKeyFromObject(w), w)
}
