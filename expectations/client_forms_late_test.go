package expectations_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/racesafe/racesafe/expectations"
)

// countingServer counts the server's Gets: with the rig, whose cache reads
// never reach the server, those are the Client's live reads.
func countingServer(n *atomic.Int32) interceptor.Funcs {
	return interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			n.Add(1)
			return c.Get(ctx, key, obj, opts...)
		},
	}
}

// TestAFormFirstReadAfterTheWriteAsksTheServer (the history checker's seed
// 78): the Client created an object and another writer deleted it before
// the Client first read the kind in the typed form. That form's informer
// delivered the deletion before the Client's handler was on, so no event
// tells it; its cache shows NotFound, which is also what a create not yet
// delivered shows. The typed Get asks the server once, and serves the
// deletion; where the object is still there, it serves the write, and does
// not ask again.
func TestAFormFirstReadAfterTheWriteAsksTheServer(t *testing.T) {
	// Broken by: dropping the blind check in (*Client).judged (client.go),
	// fails with: typed Get after another writer's deletion = <nil> at 1,
	// want NotFound.
	var gets atomic.Int32
	r := newRig(t, rigOptions{server: countingServer(&gets)})
	ctx := t.Context()
	gone, kept := attackCM("gone"), attackCM("kept")
	for _, cm := range []*corev1.ConfigMap{gone, kept} {
		if err := r.c.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	// The metadata form is read: its handler is on, the typed one's not.
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	r.show(gone, metaForm)
	if err := r.c.Get(ctx, client.ObjectKeyFromObject(gone), meta); err != nil {
		t.Fatal(err)
	}
	if err := r.srv.Delete(ctx, gone.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	gets.Store(0)
	got := &corev1.ConfigMap{}
	if err := r.c.Get(ctx, client.ObjectKeyFromObject(gone), got); !apierrors.IsNotFound(err) {
		t.Errorf("typed Get after another writer's deletion = %v at %s, want NotFound", err, got.ResourceVersion)
	}
	if names, err := listed(t, r); err != nil || len(names) != 1 || names[0] != "kept@"+kept.ResourceVersion {
		t.Errorf("typed List = %v, %v; want [kept]", names, err)
	}
	if err := r.c.Get(ctx, client.ObjectKeyFromObject(kept), got); err != nil || got.ResourceVersion != kept.ResourceVersion {
		t.Errorf("typed Get of the object still there = %v at %s, want the write at %s", err, got.ResourceVersion, kept.ResourceVersion)
	}
	asked := gets.Load()
	if asked == 0 {
		t.Errorf("the typed reads asked the server nothing")
	}
	for range 3 {
		if err := r.c.Get(ctx, client.ObjectKeyFromObject(kept), got); err != nil {
			t.Fatal(err)
		}
	}
	if n := gets.Load(); n != asked {
		t.Errorf("the server was asked %d more times about an object it had answered for", n-asked)
	}
	// A form whose handler was on before the write hears the deletion as an
	// event, and asks nothing.
	gets.Store(0)
	again := attackCM("again")
	if err := r.c.Create(ctx, again); err != nil {
		t.Fatal(err)
	}
	if err := r.c.Get(ctx, client.ObjectKeyFromObject(again), got); err != nil {
		t.Fatal(err)
	}
	if n := gets.Load(); n != 0 {
		t.Errorf("a form read before the write asked the server %d times", n)
	}
}

// TestTheFirstReadOfASecondFormIsKept (the history checker's seed 150): a
// Client with nothing pending has read the kind in one form (unstructured)
// and reads it in a second one (typed): that read is the first of a kind in
// two forms, so the version it served is kept, and a third form whose
// cache lags (metadata) must not serve older, NotFound included.
func TestTheFirstReadOfASecondFormIsKept(t *testing.T) {
	// Broken by: the Get's fast path without the formsRead test
	// (client.go), fails with: metadata Get after the typed Get served it
	// at 1 = NotFound, want the object or ErrStale.
	r := newRig(t, rigOptions{})
	ctx := t.Context()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "elsewhere"}, u); !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	other := attackCM("other")
	if err := r.srv.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	r.show(other, typedForm)
	key := client.ObjectKeyFromObject(other)
	got := &corev1.ConfigMap{}
	if err := r.c.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	if err := r.c.Get(ctx, key, meta); err != nil && !errors.Is(err, expectations.ErrStale) {
		t.Errorf("metadata Get after the typed Get served it at %s = %v, want the object or ErrStale", got.ResourceVersion, err)
	}
	r.show(other)
	if err := r.c.Get(ctx, key, meta); err != nil || meta.ResourceVersion != got.ResourceVersion {
		t.Errorf("metadata Get once its cache shows it = %v at %s, want %s", err, meta.ResourceVersion, got.ResourceVersion)
	}
}

// TestAnIncarnationDeletedAfterAKeptDeletionStaysGone (the history checker's
// seed 806): the Client kept a deletion (its Update answered NotFound);
// another writer then created the object and deleted it, and the metadata
// informer delivered that deletion. The unstructured cache, lagging, still
// shows the deleted incarnation: its copy must not become what the other
// forms serve, and the metadata form, which delivered the deletion, must
// answer NotFound.
func TestAnIncarnationDeletedAfterAKeptDeletionStaysGone(t *testing.T) {
	// Broken by: dropping the goneSince case in (*Client).delivered
	// (rule.go), fails with: metadata Get after its informer delivered the
	// deletion = <nil> at 10, want NotFound.
	r := newRig(t, rigOptions{server: interceptor.Funcs{
		// The fake server's Lists tell no version; this one's is 5.
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			list.SetResourceVersion("5")
			return nil
		},
	}})
	ctx := t.Context()
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	key := client.ObjectKey{Namespace: "default", Name: "item"}
	if err := r.c.Get(ctx, key, meta); !apierrors.IsNotFound(err) {
		t.Fatal(err) // the metadata form is read: its handler is on
	}
	cm := attackCM("item")
	cm.ResourceVersion = "1"
	if err := r.c.Update(ctx, cm); !apierrors.IsNotFound(err) {
		t.Fatalf("Update of an object not there = %v, want NotFound", err)
	}
	// Another writer's incarnation, created at 10 and deleted since; the
	// metadata informer delivers the deletion, the unstructured cache
	// still shows it.
	other := attackCM("item")
	other.UID, other.ResourceVersion = "u-other", "10"
	r.deliver(other, true)
	r.show(other, unstructForm)
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	if err := r.c.Get(ctx, key, u); !apierrors.IsNotFound(err) {
		t.Errorf("unstructured Get of the deleted incarnation = %v at %s, want NotFound: its deletion is known", err, u.GetResourceVersion())
	}
	if err := r.c.Get(ctx, key, meta); !apierrors.IsNotFound(err) {
		t.Errorf("metadata Get after its informer delivered the deletion = %v at %s, want NotFound", err, meta.ResourceVersion)
	}
}

// TestANewerCopyOneFormServedBecomesTheEntry (the history checker's seed
// 1601): the Client wrote an object and has read its kind in one form only;
// another writer's later write reaches that form's cache, and a read there
// serves it. That copy becomes the entry, so a second form read for the
// first time, whose informer lags at the Client's own write, must not
// serve older than it.
func TestANewerCopyOneFormServedBecomesTheEntry(t *testing.T) {
	// Broken by: keepNewer keeping a newer copy only when the kind was
	// already read in two forms (client.go), fails with: metadata Get after
	// the typed Get served 2 = 1, want 2 or ErrStale.
	r := newRig(t, rigOptions{})
	ctx := t.Context()
	cm := attackCM("moved")
	if err := r.c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	r.show(cm)
	key := client.ObjectKeyFromObject(cm)
	got := &corev1.ConfigMap{}
	if err := r.c.Get(ctx, key, got); err != nil || got.ResourceVersion != cm.ResourceVersion {
		t.Fatalf("typed Get of the write = %v at %s, want %s", err, got.ResourceVersion, cm.ResourceVersion)
	}
	other := got.DeepCopy()
	other.Data["v"] = "other"
	if err := r.srv.Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	r.show(other, typedForm)
	if err := r.c.Get(ctx, key, got); err != nil || got.ResourceVersion != other.ResourceVersion {
		t.Fatalf("typed Get after another writer's update = %v at %s, want %s", err, got.ResourceVersion, other.ResourceVersion)
	}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	err := r.c.Get(ctx, key, meta)
	if err == nil && meta.ResourceVersion != other.ResourceVersion || err != nil && !errors.Is(err, expectations.ErrStale) {
		t.Errorf("metadata Get after the typed Get served %s = %v at %s, want %s or ErrStale", other.ResourceVersion, err, meta.ResourceVersion, other.ResourceVersion)
	}
	r.show(other)
	if err := r.c.Get(ctx, key, meta); err != nil || meta.ResourceVersion != other.ResourceVersion {
		t.Errorf("metadata Get once its cache shows it = %v at %s, want %s", err, meta.ResourceVersion, other.ResourceVersion)
	}
}
