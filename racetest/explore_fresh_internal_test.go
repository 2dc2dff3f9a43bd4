package racetest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// view is what a scripted cache shows of the object on one read.
type view struct {
	rv       string
	deleting bool
	missing  bool
	err      error
}

// scriptedCache serves one ConfigMap as script says on each Get (the
// last step repeats), and counts the Gets; a List serves one item at the
// version the next Get would.
type scriptedCache struct {
	cache.Cache
	mu     sync.Mutex
	script []view
	gets   int
	forms  []string
}

func formName(obj client.Object) string {
	switch obj.(type) {
	case *metav1.PartialObjectMetadata:
		return "metadata"
	case *unstructured.Unstructured:
		return "unstructured"
	}
	return "typed"
}

func (c *scriptedCache) formsRead() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.forms)
}

func (c *scriptedCache) step() view {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.script[min(c.gets, len(c.script)-1)]
	c.gets++
	return v
}

func (c *scriptedCache) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	c.mu.Lock()
	c.forms = append(c.forms, formName(obj))
	c.mu.Unlock()
	v := c.step()
	switch {
	case v.err != nil:
		return v.err
	case v.missing:
		return apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, key.Name)
	}
	obj.SetNamespace(key.Namespace)
	obj.SetName(key.Name)
	obj.SetResourceVersion(v.rv)
	if v.deleting {
		now := metav1.Now()
		obj.SetDeletionTimestamp(&now)
	}
	return nil
}

func (c *scriptedCache) List(ctx context.Context, list client.ObjectList, _ ...client.ListOption) error {
	item := itemLike(list, corev1.SchemeGroupVersion.WithKind("ConfigMap"), clientgoscheme.Scheme)
	if err := c.Get(ctx, cmKey, item); err != nil {
		return meta.SetList(list, nil)
	}
	return meta.SetList(list, []runtime.Object{item})
}

func (c *scriptedCache) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gets
}

var cmKey = client.ObjectKey{Namespace: "ns", Name: "cm"}

// freshRun is a run whose controller wrote the ConfigMap (want), its cache
// scripted and its API server a fake holding live (nil: none): the
// reference when fresh, else a plan's.
func freshRun(t *testing.T, fresh bool, want answer, live *corev1.ConfigMap, script ...view) (*recordingCache, *scriptedCache) {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme)
	if live != nil {
		b = b.WithObjects(live)
	}
	want.gvk = corev1.SchemeGroupVersion.WithKind("ConfigMap")
	r := &exploreRun{opts: ExploreOptions{Scheme: clientgoscheme.Scheme}, direct: b.Build(),
		answered: map[answerKey]answer{{kind: "ConfigMap", key: cmKey}: want}}
	if !fresh {
		r.plan = &Plan{}
	}
	sc := &scriptedCache{script: script}
	return &recordingCache{Cache: sc, run: r}, sc
}

func TestReferenceReadsWaitForTheControllersOwnWrites(t *testing.T) {
	ctx := t.Context()
	t.Run("Get", func(t *testing.T) {
		c, sc := freshRun(t, true, answer{rv: "7"}, nil, view{rv: "5"}, view{rv: "5"}, view{rv: "6"}, view{rv: "7"})
		var cm corev1.ConfigMap
		if err := c.Get(ctx, cmKey, &cm); err != nil {
			t.Fatal(err)
		}
		if cm.ResourceVersion != "7" {
			t.Errorf("read resourceVersion %s after the controller's write was answered 7", cm.ResourceVersion)
		}
		if sc.count() < 4 {
			t.Errorf("the cache was read %d times, want at least 4 (three behind, then caught up)", sc.count())
		}
	})
	t.Run("List", func(t *testing.T) {
		c, _ := freshRun(t, true, answer{rv: "7"}, nil, view{rv: "5"}, view{rv: "6"}, view{rv: "7"})
		var list corev1.ConfigMapList
		if err := c.List(ctx, &list, client.InNamespace("ns")); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 1 || list.Items[0].ResourceVersion != "7" {
			t.Errorf("listed %+v, want the ConfigMap at 7", list.Items)
		}
	})
	// The read's form is the form the cache is read in while waiting, so
	// that no informer of another form is started.
	t.Run("MetadataOnlyGet", func(t *testing.T) {
		c, sc := freshRun(t, true, answer{rv: "7"}, nil, view{rv: "5"}, view{rv: "7"})
		pom := &metav1.PartialObjectMetadata{}
		pom.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		if err := c.Get(ctx, cmKey, pom); err != nil {
			t.Fatal(err)
		}
		if pom.ResourceVersion != "7" || !slices.Equal(sc.formsRead(), []string{"metadata", "metadata", "metadata"}) {
			t.Errorf("read %s in forms %v, want 7, every read metadata-only", pom.ResourceVersion, sc.formsRead())
		}
	})
	t.Run("UnstructuredList", func(t *testing.T) {
		c, sc := freshRun(t, true, answer{rv: "7"}, nil, view{rv: "5"}, view{rv: "7"})
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
		if err := c.List(ctx, list, client.InNamespace("ns")); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 1 || list.Items[0].GetResourceVersion() != "7" || !slices.Equal(sc.formsRead(), []string{"unstructured", "unstructured", "unstructured"}) {
			t.Errorf("listed %d items in forms %v, want the ConfigMap at 7, every read unstructured", len(list.Items), sc.formsRead())
		}
	})
	t.Run("ListOfAnotherNamespaceDoesNotWait", func(t *testing.T) {
		c, sc := freshRun(t, true, answer{rv: "7"}, nil, view{rv: "5"})
		var list corev1.ConfigMapList
		if err := c.List(ctx, &list, client.InNamespace("other")); err != nil {
			t.Fatal(err)
		}
		if sc.count() != 1 {
			t.Errorf("the cache was read %d times for a List of another namespace, want 1 (the List)", sc.count())
		}
	})
	t.Run("Deletion", func(t *testing.T) {
		c, _ := freshRun(t, true, answer{gone: true}, nil, view{rv: "5"}, view{rv: "5"}, view{missing: true})
		err := c.Get(ctx, cmKey, &corev1.ConfigMap{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("Get after the controller's delete: %v, want NotFound", err)
		}
	})
	t.Run("DeletionWithFinalizers", func(t *testing.T) {
		c, _ := freshRun(t, true, answer{gone: true}, nil, view{rv: "5"}, view{rv: "6", deleting: true})
		var cm corev1.ConfigMap
		if err := c.Get(ctx, cmKey, &cm); err != nil || cm.DeletionTimestamp == nil {
			t.Errorf("Get after the controller's delete: %v, deletionTimestamp %v; want the terminating object", err, cm.DeletionTimestamp)
		}
	})
	// Someone else deleted the object since: the cache's NotFound is the
	// present, not a lag, and the read does not wait out freshLimit.
	t.Run("GoneSinceIsNotWaitedOn", func(t *testing.T) {
		c, sc := freshRun(t, true, answer{rv: "7"}, nil, view{missing: true})
		start := time.Now()
		if err := c.Get(ctx, cmKey, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("Get: %v, want NotFound", err)
		}
		if sc.count() != 2 || time.Since(start) >= freshLimit {
			t.Errorf("the cache was read %d times in %v, want 2 (the check, the read) and no wait", sc.count(), time.Since(start))
		}
	})
	// The controller deleted it and someone else made it anew under its
	// name: the cache showing the new object is the present, not a lag.
	t.Run("RecreatedSinceIsNotWaitedOn", func(t *testing.T) {
		live := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}}
		c, sc := freshRun(t, true, answer{gone: true}, live, view{rv: "999"})
		start := time.Now()
		var cm corev1.ConfigMap
		if err := c.Get(ctx, cmKey, &cm); err != nil || cm.ResourceVersion != "999" {
			t.Errorf("Get: %v at %q, want the new object at 999", err, cm.ResourceVersion)
		}
		if sc.count() != 2 || time.Since(start) >= freshLimit {
			t.Errorf("the cache was read %d times in %v, want 2 (the check, the read) and no wait", sc.count(), time.Since(start))
		}
	})
	// The object is there live and the cache has not seen it: a lag.
	t.Run("CreatedNotYetSeen", func(t *testing.T) {
		live := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}}
		c, sc := freshRun(t, true, answer{rv: "1"}, live, view{missing: true}, view{missing: true}, view{rv: "1"})
		var cm corev1.ConfigMap
		if err := c.Get(ctx, cmKey, &cm); err != nil {
			t.Fatal(err)
		}
		if sc.count() < 3 {
			t.Errorf("the cache was read %d times, want at least 3 (missing twice, then seen)", sc.count())
		}
	})
	t.Run("AnErrorIsNotALag", func(t *testing.T) {
		boom := errors.New("boom")
		c, sc := freshRun(t, true, answer{rv: "7"}, nil, view{err: boom})
		if err := c.Get(ctx, cmKey, &corev1.ConfigMap{}); !errors.Is(err, boom) {
			t.Errorf("Get: %v, want the cache's error", err)
		}
		if sc.count() != 2 {
			t.Errorf("the cache was read %d times, want 2 (the check, the read)", sc.count())
		}
	})
	t.Run("PlansReadAsTheCacheHasIt", func(t *testing.T) {
		c, sc := freshRun(t, false, answer{rv: "7"}, nil, view{rv: "5"}, view{rv: "7"})
		var cm corev1.ConfigMap
		if err := c.Get(ctx, cmKey, &cm); err != nil {
			t.Fatal(err)
		}
		if cm.ResourceVersion != "5" || sc.count() != 1 {
			t.Errorf("a plan's read waited: resourceVersion %s after %d reads, want 5 after 1", cm.ResourceVersion, sc.count())
		}
	})
}
