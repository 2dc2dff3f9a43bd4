package expectations_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/racesafe/racesafe/expectations"
)

// TestClientAmbiguousWriteOfAnObjectGoneNeverGoesBackInTime (the soak's
// duplicate child): a new leader primed from the server, whose cache still
// shows an item from before its deletion, releases the item's finalizer;
// the server applies the release, which removes the item, but the answer is
// lost (a 500). The read back finds the item gone. A Get must then not
// serve the cache's older copy, which shows the item neither deleting nor
// released: the reconciler would act on a past it had already moved beyond
// (the soak's replica installed a second child for an item it had just
// uninstalled). The item is gone, and Get says NotFound until the cache
// shows it so.
func TestClientAmbiguousWriteOfAnObjectGoneNeverGoesBackInTime(t *testing.T) {
	const finalizer = "example.com/uninstall"
	writes := map[string]func(ctx context.Context, c client.Client, cm *corev1.ConfigMap) error{
		"Update": func(ctx context.Context, c client.Client, cm *corev1.ConfigMap) error {
			controllerutil.RemoveFinalizer(cm, finalizer)
			return c.Update(ctx, cm)
		},
		"Patch": func(ctx context.Context, c client.Client, cm *corev1.ConfigMap) error {
			before := cm.DeepCopy()
			controllerutil.RemoveFinalizer(cm, finalizer)
			return c.Patch(ctx, cm, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
		},
		// As statusupdate's Patcher sends it: into an empty object, the
		// precondition in the body.
		"Patch into an empty object": func(ctx context.Context, c client.Client, cm *corev1.ConfigMap) error {
			body := fmt.Sprintf(`{"metadata":{"finalizers":null,"resourceVersion":%q}}`, cm.ResourceVersion)
			into := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name}}
			return c.Patch(ctx, into, client.RawPatch(types.MergePatchType, []byte(body)))
		},
	}
	for _, shared := range []bool{false, true} {
		for verb, write := range writes {
			name := fmt.Sprintf("%s/shared tracker %t", verb, shared)
			t.Run(name, func(t *testing.T) {
				ctx := t.Context()
				cm := configMap("item", "u1", "")
				cm.Finalizers = []string{finalizer}
				server := fake.NewClientBuilder().WithObjects(cm).Build()
				key := client.ObjectKeyFromObject(cm)
				before := &corev1.ConfigMap{}
				if err := server.Get(ctx, key, before); err != nil {
					t.Fatal(err)
				}
				// The cache: the item as it was before its deletion.
				cache := fake.NewClientBuilder().WithObjects(before.DeepCopy()).Build()
				if err := server.Delete(ctx, before.DeepCopy()); err != nil {
					t.Fatal(err)
				}

				lose := false // the server applies the write; its answer is lost
				funcs := cacheReads(&cache)
				funcs.Update = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
					if err := c.Update(ctx, obj.DeepCopyObject().(client.Object), opts...); err != nil || !lose {
						return err
					}
					return apierrors.NewInternalError(errors.New("answer lost"))
				}
				funcs.Patch = func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					if err := c.Patch(ctx, obj.DeepCopyObject().(client.Object), patch, opts...); err != nil || !lose {
						return err
					}
					return apierrors.NewInternalError(errors.New("answer lost"))
				}
				c := ambiguousClient(t, server, funcs, "client-ambiguous-gone-"+name, shared)
				res, err := c.Prime(ctx, server, &corev1.ConfigMapList{})
				if err != nil || res.Behind != 1 {
					t.Fatalf("Prime = %+v, %v; want the cached item behind", res, err)
				}
				item := &corev1.ConfigMap{}
				if err := c.Get(ctx, key, item); err != nil || item.DeletionTimestamp.IsZero() {
					t.Fatalf("Get after Prime = %v, deletion %v; want the server's copy, being deleted", err, item.DeletionTimestamp)
				}

				lose = true
				if err := write(ctx, c, item); !apierrors.IsInternalError(err) {
					t.Fatalf("release = %v, want the injected 500", err)
				}
				if err := server.Get(ctx, key, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
					t.Fatalf("the server's item after the release = %v, want NotFound", err)
				}

				got := &corev1.ConfigMap{}
				err = c.Get(ctx, key, got)
				if err == nil {
					t.Fatalf("Get after the ambiguous release served an item at resourceVersion %s, deleting %v, finalizers %v: the cache's copy from before what this client wrote; want NotFound",
						got.ResourceVersion, !got.DeletionTimestamp.IsZero(), got.Finalizers)
				}
				if !apierrors.IsNotFound(err) {
					t.Errorf("Get after the ambiguous release = %v, want NotFound", err)
				}
				var list corev1.ConfigMapList
				if err := c.List(ctx, &list); err != nil || len(list.Items) != 0 {
					t.Errorf("List after the ambiguous release = %d items, %v; want none", len(list.Items), err)
				}

				// Another item under the name, once the cache shows it, is
				// served: the deletion kept is the released incarnation's.
				next := configMap("item", "u2", "2000")
				cache = fake.NewClientBuilder().WithObjects(next).Build()
				if err := c.Get(ctx, key, got); err != nil || got.UID != "u2" {
					t.Errorf("Get of the item created again under the name = %v, UID %q; want the new item, UID u2", err, got.UID)
				}
			})
		}
	}
}

// TestClientAmbiguousStatusWriteIsReadBack is the incident's write ending
// ambiguously: status.phase moves on through the status subresource, the
// server applies it, and the answer is lost (a 500). The cache still shows
// the phase before. A Get must not serve that copy as if nothing had been
// written: the read back tells the server's copy, and Get serves it.
func TestClientAmbiguousStatusWriteIsReadBack(t *testing.T) {
	writes := map[string]func(ctx context.Context, c client.Client, p *corev1.Pod) error{
		"Status().Update": func(ctx context.Context, c client.Client, p *corev1.Pod) error {
			p.Status.Phase = corev1.PodSucceeded
			return c.Status().Update(ctx, p)
		},
		"Status().Patch": func(ctx context.Context, c client.Client, p *corev1.Pod) error {
			before := p.DeepCopy()
			p.Status.Phase = corev1.PodSucceeded
			return c.Status().Patch(ctx, p, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
		},
		// As statusupdate's Patcher sends it: into an empty object, the
		// precondition in the body.
		"Status().Patch into an empty object": func(ctx context.Context, c client.Client, p *corev1.Pod) error {
			body := fmt.Sprintf(`{"metadata":{"resourceVersion":%q},"status":{"phase":%q}}`, p.ResourceVersion, corev1.PodSucceeded)
			into := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}}
			return c.Status().Patch(ctx, into, client.RawPatch(types.MergePatchType, []byte(body)))
		},
	}
	for _, shared := range []bool{false, true} {
		for verb, write := range writes {
			name := fmt.Sprintf("%s/shared tracker %t", verb, shared)
			t.Run(name, func(t *testing.T) {
				ctx := t.Context()
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "item", UID: "u1"},
					Status: corev1.PodStatus{Phase: corev1.PodFailed}}
				server := fake.NewClientBuilder().WithObjects(pod).WithStatusSubresource(&corev1.Pod{}).Build()
				key := client.ObjectKeyFromObject(pod)
				seen := &corev1.Pod{}
				if err := server.Get(ctx, key, seen); err != nil {
					t.Fatal(err)
				}
				cache := fake.NewClientBuilder().WithObjects(seen.DeepCopy()).Build()
				lose := false
				funcs := cacheReads(&cache)
				funcs.SubResourceUpdate = func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
					if err := c.SubResource(sub).Update(ctx, obj.DeepCopyObject().(client.Object), opts...); err != nil || !lose {
						return err
					}
					return apierrors.NewInternalError(errors.New("answer lost"))
				}
				funcs.SubResourcePatch = func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
					if err := c.SubResource(sub).Patch(ctx, obj.DeepCopyObject().(client.Object), patch, opts...); err != nil || !lose {
						return err
					}
					return apierrors.NewInternalError(errors.New("answer lost"))
				}
				c := ambiguousClient(t, server, funcs, "client-ambiguous-status-"+name, shared)
				item := &corev1.Pod{}
				if err := c.Get(ctx, key, item); err != nil || item.Status.Phase != corev1.PodFailed {
					t.Fatalf("Get before the write = %v, phase %q; want the cache's copy, Failed", err, item.Status.Phase)
				}
				lose = true
				if err := write(ctx, c, item); !apierrors.IsInternalError(err) {
					t.Fatalf("status write = %v, want the injected 500", err)
				}
				live := &corev1.Pod{}
				if err := server.Get(ctx, key, live); err != nil || live.Status.Phase != corev1.PodSucceeded {
					t.Fatalf("the server's pod after the write = %v, phase %q; want the write applied", err, live.Status.Phase)
				}
				got := &corev1.Pod{}
				if err := c.Get(ctx, key, got); err != nil || got.Status.Phase != corev1.PodSucceeded || got.ResourceVersion != live.ResourceVersion {
					t.Errorf("Get after the ambiguous status write = %v, phase %q at %s; want the server's copy, %q at %s (the cache's copy is older than the write)",
						err, got.Status.Phase, got.ResourceVersion, corev1.PodSucceeded, live.ResourceVersion)
				}
			})
		}
	}
}

// ambiguousClient is an expectations.Client named name on server, wrapped
// in funcs (which lose answers), reading ambiguous writes back from server,
// with a Tracker of its own when shared.
func ambiguousClient(t *testing.T, server client.WithWatch, funcs interceptor.Funcs, name string, shared bool) *expectations.Client {
	t.Helper()
	opts := expectations.ClientOptions{Name: name, APIReader: server}
	if shared {
		opts.Tracker = expectations.New(expectations.Options{Name: name})
	}
	c, err := expectations.NewClient(interceptor.NewClient(server, funcs), opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
