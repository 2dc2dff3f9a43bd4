package expectations_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/racesafe/racesafe/expectations"
)

// formCaches is a cache of ConfigMaps per form (typed, unstructured,
// metadata), each moved by hand, as a controller-runtime cache runs one
// informer per form.
type formCaches struct {
	mu    sync.Mutex
	typed map[client.ObjectKey]*corev1.ConfigMap
	meta  map[client.ObjectKey]*corev1.ConfigMap
}

func (f *formCaches) show(typed, meta *corev1.ConfigMap) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if typed != nil {
		f.typed[client.ObjectKeyFromObject(typed)] = typed.DeepCopy()
	}
	if meta != nil {
		f.meta[client.ObjectKeyFromObject(meta)] = meta.DeepCopy()
	}
}

// formsClient returns empty form caches and a Client over them, named
// name, whose writes the server numbers from 101.
func formsClient(t *testing.T, name string) (*formCaches, *expectations.Client) {
	t.Helper()
	f := &formCaches{typed: map[client.ObjectKey]*corev1.ConfigMap{}, meta: map[client.ObjectKey]*corev1.ConfigMap{}}
	rv := 100
	inner := f.client(&rv)
	c, err := expectations.NewClient(inner, expectations.ClientOptions{Name: name, APIReader: inner})
	if err != nil {
		t.Fatal(err)
	}
	return f, c
}

func (f *formCaches) client(rv *int) client.Client {
	return interceptor.NewClient(fake.NewClientBuilder().Build(), interceptor.Funcs{
		Get: func(_ context.Context, _ client.WithWatch, key client.ObjectKey, out client.Object, _ ...client.GetOption) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			src := f.typed
			if _, ok := out.(*metav1.PartialObjectMetadata); ok {
				src = f.meta
			}
			cm, found := src[key]
			if !found {
				return apierrors.NewNotFound(corev1.Resource("configmaps"), key.Name)
			}
			switch o := out.(type) {
			case *corev1.ConfigMap:
				*o = *cm.DeepCopy()
			case *unstructured.Unstructured:
				m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cm.DeepCopy())
				if err != nil {
					return err
				}
				o.Object = m
				o.SetAPIVersion("v1")
				o.SetKind("ConfigMap")
			case *metav1.PartialObjectMetadata:
				o.ObjectMeta = *cm.ObjectMeta.DeepCopy()
				o.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
			}
			return nil
		},
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			*rv++
			obj.SetResourceVersion(strconv.Itoa(*rv))
			obj.SetUID(types.UID("u-" + obj.GetName()))
			return nil
		},
	})
}

// TestMonotonicAcrossFormsAfterEveryFormCaughtUp (issue 35, 8, the
// history checker's seed 7): once a form's cache has caught up with the
// Client's write, it answers alone; when it then serves another writer's
// newer copy, a form whose cache is still at the Client's write must not
// serve that write: the newer copy becomes the entry. A metadata-only copy
// cannot be shown as a full object: the typed and unstructured Gets refuse
// (ErrStale) until their cache shows the newer version, then serve it.
func TestMonotonicAcrossFormsAfterEveryFormCaughtUp(t *testing.T) {
	f, c := formsClient(t, "forms-monotonic")
	ctx := t.Context()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "item"}, Data: map[string]string{"phase": "Installing"}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(cm)
	f.show(cm, cm)
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	if err := c.Get(ctx, key, &corev1.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, key, meta); err != nil || meta.ResourceVersion != cm.ResourceVersion {
		t.Fatalf("metadata Get = %v at %s, want %s", err, meta.ResourceVersion, cm.ResourceVersion)
	}
	// Another writer moves the object; only the metadata cache shows it.
	moved := cm.DeepCopy()
	moved.ResourceVersion = "150"
	moved.Data = map[string]string{"phase": "Failed"}
	f.show(nil, moved)
	if err := c.Get(ctx, key, meta); err != nil || meta.ResourceVersion != "150" {
		t.Fatalf("metadata Get after the other write = %v at %s, want 150", err, meta.ResourceVersion)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	for name, obj := range map[string]client.Object{"typed": &corev1.ConfigMap{}, "unstructured": u} {
		if err := c.Get(ctx, key, obj); !errors.Is(err, expectations.ErrStale) {
			t.Errorf("%s Get after metadata served 150 = %v at %s, want ErrStale (not the older %s)", name, err, obj.GetResourceVersion(), cm.ResourceVersion)
		}
	}
	f.show(moved, nil)
	got := &corev1.ConfigMap{}
	if err := c.Get(ctx, key, got); err != nil || got.ResourceVersion != "150" || got.Data["phase"] != "Failed" {
		t.Errorf("typed Get once its cache shows 150 = %v at %s (%s), want Failed at 150", err, got.ResourceVersion, got.Data["phase"])
	}
}

// TestMonotonicAcrossFormsForAnObjectNeverWritten (the history checker's
// seed 10): another writer's object, which this Client never wrote, served
// by the metadata cache at 150 while the typed cache has not delivered it
// yet: a typed Get must not answer NotFound (older than what the session
// read), but refuse until the typed cache shows it. The version kept is a
// read's, not a write's: Pending does not count it.
func TestMonotonicAcrossFormsForAnObjectNeverWritten(t *testing.T) {
	f, c := formsClient(t, "forms-never-written")
	ctx := t.Context()
	// The session is in use: the Client wrote an object of the kind, read
	// in both forms once the caches show it.
	own := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "own"}}
	if err := c.Create(ctx, own); err != nil {
		t.Fatal(err)
	}
	f.show(own, own)
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	if err := c.Get(ctx, client.ObjectKeyFromObject(own), &corev1.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(own), meta); err != nil {
		t.Fatal(err)
	}
	pending := c.Pending()

	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "other", UID: "u-other", ResourceVersion: "150"}}
	f.show(nil, other)
	key := client.ObjectKeyFromObject(other)
	if err := c.Get(ctx, key, meta); err != nil || meta.ResourceVersion != "150" {
		t.Fatalf("metadata Get = %v at %s, want 150", err, meta.ResourceVersion)
	}
	if err := c.Get(ctx, key, &corev1.ConfigMap{}); !errors.Is(err, expectations.ErrStale) {
		t.Errorf("typed Get before its cache shows the object = %v, want ErrStale, not NotFound", err)
	}
	var list corev1.ConfigMapList
	if err := c.List(ctx, &list, client.InNamespace("default")); !errors.Is(err, expectations.ErrStale) {
		t.Errorf("typed List before its cache shows the object = %v, %d items, want ErrStale", err, len(list.Items))
	}
	if got := c.Pending(); got != pending {
		t.Errorf("Pending = %d after the reads, want %d: a version kept from a read is not pending", got, pending)
	}
	f.show(other, nil)
	got := &corev1.ConfigMap{}
	if err := c.Get(ctx, key, got); err != nil || got.ResourceVersion != "150" {
		t.Errorf("typed Get once its cache shows 150 = %v at %s", err, got.ResourceVersion)
	}
}

// TestDeletionHoldsInAFormThatNeverShowedTheObject (the history checker's
// seed 115): the Client wrote an object and then deleted it while the
// metadata cache had not delivered even its create. That cache's NotFound
// is not the deletion: when it then delivers the object's older copy, a
// metadata Get or List must still answer the deletion, not the copy.
func TestDeletionHoldsInAFormThatNeverShowedTheObject(t *testing.T) {
	f, c := formsClient(t, "forms-deletion-before-create")
	ctx := t.Context()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "item"}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(cm)
	created := cm.DeepCopy()
	f.show(cm, nil)
	if err := c.Get(ctx, key, &corev1.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
	// The Delete's NotFound is read back: the server (here the typed
	// cache, which this fake reads live) no longer has the object.
	f.mu.Lock()
	delete(f.typed, key)
	f.mu.Unlock()
	if err := c.Delete(ctx, cm); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	metas := &metav1.PartialObjectMetadataList{}
	metas.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := c.Get(ctx, key, meta); !apierrors.IsNotFound(err) {
		t.Fatalf("metadata Get before its cache shows anything = %v, want NotFound", err)
	}
	if err := c.List(ctx, metas, client.InNamespace("default")); err != nil || len(metas.Items) != 0 {
		t.Fatalf("metadata List before its cache shows anything = %v, %d items, want none", err, len(metas.Items))
	}
	f.show(nil, created) // the lagging cache delivers the create
	if err := c.Get(ctx, key, meta); !apierrors.IsNotFound(err) {
		t.Errorf("metadata Get once its cache shows the older copy = %v at %s, want NotFound: the deletion came back", err, meta.ResourceVersion)
	}
	if err := c.List(ctx, metas, client.InNamespace("default")); err != nil || len(metas.Items) != 0 {
		t.Errorf("metadata List once its cache shows the older copy = %v, %d items, want none", err, len(metas.Items))
	}
}

// TestAmbiguousWriteFromAnOlderCopyKeepsTheNewest: the Client's writes
// were answered at 102 and 103; the caller then sends a merge patch from
// its older copy at 101, and the answer is lost (a timeout) while the read
// back fails too. The cache then shows 102: a Get must not serve it, older
// than the 103 the session returned, but refuse until the read back tells.
func TestAmbiguousWriteFromAnOlderCopyKeepsTheNewest(t *testing.T) {
	f := &formCaches{typed: map[client.ObjectKey]*corev1.ConfigMap{}, meta: map[client.ObjectKey]*corev1.ConfigMap{}}
	rv := 100
	inner := &losingPatches{Client: f.client(&rv), rv: &rv}
	down := interceptor.NewClient(fake.NewClientBuilder().Build(), interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return apierrors.NewServiceUnavailable("down")
		},
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return apierrors.NewServiceUnavailable("down")
		},
	})
	c, err := expectations.NewClient(inner, expectations.ClientOptions{Name: "ambiguous-older-copy", APIReader: down})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "item"}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	older := cm.DeepCopy() // at 101
	for range 2 {
		if err := c.Patch(ctx, cm, client.Merge); err != nil {
			t.Fatal(err)
		}
	}
	at102 := cm.DeepCopy()
	at102.ResourceVersion = "102"
	key := client.ObjectKeyFromObject(cm)
	got := &corev1.ConfigMap{}
	if err := c.Get(ctx, key, got); err != nil || got.ResourceVersion != "103" {
		t.Fatalf("Get = %v at %s, want the own write at 103", err, got.ResourceVersion)
	}
	inner.lose = true
	if err := c.Patch(ctx, older, client.Merge); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Patch = %v, want the lost answer", err)
	}
	f.show(at102, nil)
	if err := c.Get(ctx, key, got); !errors.Is(err, expectations.ErrStale) {
		t.Errorf("Get after the ambiguous write = %v at %s, want ErrStale: 102 is older than the 103 returned", err, got.ResourceVersion)
	}
}

// losingPatches numbers each Patch from rv and, once lose is set, loses
// its answer (a timeout) although the server applied it.
type losingPatches struct {
	client.Client
	rv   *int
	lose bool
}

func (l *losingPatches) Patch(_ context.Context, obj client.Object, _ client.Patch, _ ...client.PatchOption) error {
	*l.rv++
	if l.lose {
		return context.DeadlineExceeded
	}
	obj.SetResourceVersion(strconv.Itoa(*l.rv))
	return nil
}
