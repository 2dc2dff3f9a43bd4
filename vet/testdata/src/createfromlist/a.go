package createfromlist

import (
	"context"

	"example.com/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

type R struct {
	client.Client
	APIReader client.Reader
}

func listParts(ctx context.Context, c client.Reader, w *api.Widget) (*api.PartList, error) {
	var parts api.PartList
	return &parts, c.List(ctx, &parts, client.InNamespace(w.Namespace))
}

// The ReplicaSet problem, through a helper.
func (r *R) ensurePart(ctx context.Context, w *api.Widget) error {
	parts, err := listParts(ctx, r.Client, w)
	if err != nil || len(parts.Items) > 0 {
		return err
	}
	p := &api.Part{ObjectMeta: api.ObjectMeta{GenerateName: w.Name + "-", Namespace: w.Namespace}}
	return r.Create(ctx, p) // want `p is created with generateName after a List of Part from the informer cache \(line 22\)`
}

// Directly, with the name set after.
func (r *R) ensurePartDirect(ctx context.Context, w *api.Widget) error {
	var parts api.PartList
	if err := r.List(ctx, &parts); err != nil || len(parts.Items) > 0 {
		return err
	}
	var p api.Part
	p.SetGenerateName(w.Name + "-")
	return r.Create(ctx, &p) // want `p is created with generateName after a List of Part`
}

// Not reported: the List is live.
func (r *R) liveList(ctx context.Context, w *api.Widget) error {
	var parts api.PartList
	if err := r.APIReader.List(ctx, &parts); err != nil || len(parts.Items) > 0 {
		return err
	}
	p := &api.Part{ObjectMeta: api.ObjectMeta{GenerateName: "p-"}}
	return r.Create(ctx, p)
}

// Not reported: a fixed name, which the server refuses twice.
func (r *R) fixedName(ctx context.Context, w *api.Widget) error {
	var parts api.PartList
	if err := r.List(ctx, &parts); err != nil || len(parts.Items) > 0 {
		return err
	}
	p := &api.Part{ObjectMeta: api.ObjectMeta{Name: w.Name + "-part"}}
	return r.Create(ctx, p)
}

// Not reported: the List is of another kind.
func (r *R) otherKind(ctx context.Context, w *api.Widget) error {
	var parts api.PartList
	if err := r.List(ctx, &parts); err != nil {
		return err
	}
	other := &api.Widget{ObjectMeta: api.ObjectMeta{GenerateName: "w-"}}
	return r.Create(ctx, other)
}
