// Package expectations is a stub of racesafe's.
package expectations

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

type Client struct{}

func (c *Client) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return nil
}
func (c *Client) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return nil
}
func (c *Client) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return nil
}

type OwnerTracker struct{}

func (t *OwnerTracker) WroteOwned(ctx context.Context, obj client.Object) error { return nil }
