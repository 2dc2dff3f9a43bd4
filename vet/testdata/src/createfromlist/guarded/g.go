// Package guarded records its creates in racesafe's OwnerTracker: nothing
// is reported.
package guarded

import (
	"context"

	"example.com/api"
	"github.com/racesafe/racesafe/expectations"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

type R struct {
	client.Client
	owners *expectations.OwnerTracker
}

func (r *R) ensurePart(ctx context.Context) error {
	var parts api.PartList
	if err := r.List(ctx, &parts); err != nil || len(parts.Items) > 0 {
		return err
	}
	p := &api.Part{ObjectMeta: api.ObjectMeta{GenerateName: "p-"}}
	if err := r.Create(ctx, p); err != nil {
		return err
	}
	return r.owners.WroteOwned(ctx, p)
}
