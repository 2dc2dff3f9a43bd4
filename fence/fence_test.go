package fence_test

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/racesafe/racesafe/fence"
)

func TestPolicyOptionsRefused(t *testing.T) {
	for name, o := range map[string]fence.PolicyOptions{
		"zero":        {},
		"no name":     {Resources: []schema.GroupResource{{Resource: "configmaps"}}},
		"no resource": {Name: "p"},
		"subresource": {Name: "p", Resources: []schema.GroupResource{{Resource: "configmaps/status"}}},
	} {
		if _, err := fence.Policy(o); !errors.Is(err, fence.ErrInvalidPolicy) {
			t.Errorf("%s: got %v, want ErrInvalidPolicy", name, err)
		}
	}
}

func TestFenceZeroValue(t *testing.T) {
	var f fence.Fence
	if _, ok := f.Epoch(); ok {
		t.Fatal("zero Fence holds an epoch")
	}
	e := fence.Epoch{Lease: types.NamespacedName{Namespace: "ns", Name: "l"}, Holder: "a", Transitions: 3}
	f.Set(e)
	if got, ok := f.Epoch(); !ok || got != e {
		t.Fatalf("Epoch() = %v, %v; want %v", got, ok, e)
	}
	f.Set(fence.Epoch{})
	if _, ok := f.Epoch(); ok {
		t.Fatal("Set of an empty holder left an epoch")
	}
}

// TestClientStampsEveryWrite checks, on a fake client, that every write
// method reaches the wrapped client with the epoch in its context, and that
// reads do not carry it.
func TestClientStampsEveryWrite(t *testing.T) {
	e := fence.Epoch{Lease: types.NamespacedName{Namespace: "ns", Name: "l"}, Holder: "a", Transitions: 3}
	seen := map[string]bool{}
	record := func(name string, ctx context.Context) {
		got, ok := fence.EpochFrom(ctx)
		seen[name] = ok && got == e
	}
	inner := interceptor.NewClient(fake.NewClientBuilder().Build(), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			record("get", ctx)
			return nil
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			record("create", ctx)
			return nil
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			record("update", ctx)
			return nil
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			record("patch", ctx)
			return nil
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			record("delete", ctx)
			return nil
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			record("status update", ctx)
			return nil
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			record("status patch", ctx)
			return nil
		},
	})
	f := &fence.Fence{}
	c := fence.NewClient(inner, f)
	ctx := t.Context()
	obj := item("ns", "x")
	patch := client.RawPatch(types.MergePatchType, []byte(`{}`))
	if err := c.Create(ctx, obj); !errors.Is(err, fence.ErrNoEpoch) {
		t.Fatalf("create without an epoch: %v", err)
	}
	f.Set(e)
	_ = c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	_ = c.Create(ctx, obj)
	_ = c.Update(ctx, obj)
	_ = c.Patch(ctx, obj, patch)
	_ = c.Delete(ctx, obj)
	_ = c.Status().Update(ctx, obj)
	_ = c.Status().Patch(ctx, obj, patch)
	for _, w := range []string{"create", "update", "patch", "delete", "status update", "status patch"} {
		if !seen[w] {
			t.Errorf("%s did not carry the epoch", w)
		}
	}
	if seen["get"] {
		t.Error("get carried the epoch")
	}
}
