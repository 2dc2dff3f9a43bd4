package expectations_test

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/racesafe/racesafe/expectations"
)

// memCache answers Get from one stored ConfigMap the way controller-runtime's
// informer cache does (CacheReader.Get in pkg/cache/internal/cache_reader.go,
// v0.23-v0.25): the object is found in a client-go indexer by
// "namespace/name", deep-copied with DeepCopyObject unless
// UnsafeDisableDeepCopy is given, assigned into the caller's object by
// reflection, and stamped with its GroupVersionKind. It Creates and Updates
// by numbering resourceVersions without storing: a cache that never catches
// up.
func memCache(stored *corev1.ConfigMap) client.Client {
	var rv atomic.Int64
	rv.Store(1000)
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := indexer.Add(stored); err != nil {
		panic(err)
	}
	gvk := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	return interceptor.NewClient(fake.NewClientBuilder().Build(), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, out client.Object, opts ...client.GetOption) error {
			getOpts := client.GetOptions{}
			getOpts.ApplyOptions(opts)
			item, exists, err := indexer.GetByKey(key.Namespace + "/" + key.Name)
			if err != nil || !exists {
				return fmt.Errorf("%s: exists %v: %w", key, exists, err)
			}
			obj := item.(runtime.Object)
			deep := getOpts.UnsafeDisableDeepCopy == nil || !*getOpts.UnsafeDisableDeepCopy
			if deep {
				obj = obj.DeepCopyObject()
			}
			reflect.Indirect(reflect.ValueOf(out)).Set(reflect.Indirect(reflect.ValueOf(obj)))
			if deep {
				out.GetObjectKind().SetGroupVersionKind(gvk)
			}
			return nil
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			obj.SetResourceVersion(strconv.FormatInt(rv.Add(1), 10))
			obj.SetUID(types.UID("u-" + obj.GetName()))
			return nil
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			obj.SetResourceVersion(strconv.FormatInt(rv.Add(1), 10))
			return nil
		},
	})
}

func sessionConfigMap() *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a", UID: "u-a", ResourceVersion: "10",
		Labels: map[string]string{"app": "x"}}, Data: map[string]string{"phase": "Failed", "a": "b", "c": "d"}}
}

// TestClientGetWithNothingPendingAllocatesNothing: a Get with nothing
// pending allocates nothing beyond the cache's own Get.
func TestClientGetWithNothingPendingAllocatesNothing(t *testing.T) {
	inner := memCache(sessionConfigMap())
	c, err := clientOver(inner, expectations.ClientOptions{Name: "allocs"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, key, obj := t.Context(), client.ObjectKey{Namespace: "default", Name: "a"}, &corev1.ConfigMap{}
	cacheAllocs := testing.AllocsPerRun(100, func() { _ = inner.Get(ctx, key, obj) })
	clientAllocs := testing.AllocsPerRun(100, func() { _ = c.Get(ctx, key, obj) })
	if clientAllocs > cacheAllocs {
		t.Errorf("Get with nothing pending: %v allocations, the cache's Get alone %v", clientAllocs, cacheAllocs)
	}
}

// TestClientMemoryFollowsTheLastTwoTTLs: 100,000 writes that no cache ever
// shows are kept for at most two TTLs: the sweep on the write path drops
// the rest.
func TestClientMemoryFollowsTheLastTwoTTLs(t *testing.T) {
	clock := newFakeClock()
	ttl := time.Minute
	c, err := clientOver(memCache(sessionConfigMap()), expectations.ClientOptions{Name: "memory", TTL: ttl, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	const writes, perStep, steps = 100_000, 1000, 10 // 10 steps per TTL
	for i := range writes {
		if i%perStep == 0 && i > 0 {
			clock.Step(ttl / steps)
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("cm-%d", i)}}
		if err := c.Create(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
		if max := 2*steps*perStep + perStep; i%perStep == perStep-1 && c.Pending() > max {
			t.Fatalf("after %d writes, %d kept; the last two TTLs hold at most %d", i+1, c.Pending(), max)
		}
	}
	if c.Pending() < steps*perStep {
		t.Errorf("only %d kept: writes younger than the TTL were dropped", c.Pending())
	}
}

// TestClientConcurrentWorkersNeverReadBackInTime: workers writing and
// reading the same and different objects concurrently (run with -race)
// never read a resourceVersion older than their own last write.
func TestClientConcurrentWorkersNeverReadBackInTime(t *testing.T) {
	base := fake.NewClientBuilder().Build()
	c, err := clientOver(base, expectations.ClientOptions{Name: "workers"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for i := range 4 {
		if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprint("w", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			key := client.ObjectKey{Namespace: "default", Name: fmt.Sprint("w", w%4)}
			for range 50 {
				cm := &corev1.ConfigMap{}
				if err := c.Get(ctx, key, cm); err != nil {
					t.Error(err)
					return
				}
				cm.Data = map[string]string{"by": fmt.Sprint(w)}
				if err := c.Update(ctx, cm); err != nil {
					continue // a conflict with another worker
				}
				got := &corev1.ConfigMap{}
				if err := c.Get(ctx, key, got); err != nil {
					t.Error(err)
					return
				}
				if cmp, err := resourceversion.CompareResourceVersion(got.ResourceVersion, cm.ResourceVersion); err != nil || cmp < 0 {
					t.Errorf("read %s after writing %s", got.ResourceVersion, cm.ResourceVersion)
					return
				}
				var list corev1.ConfigMapList
				if err := c.List(ctx, &list, client.InNamespace("default")); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkClientGet compares, in one run, a Get of the same object from
// the cache alone (the peer: what a controller without racesafe pays), from
// the cache through the Client with nothing pending, and served from the
// Client's own write (issue 20's goal: at most 1.2x the cache alone).
func BenchmarkClientGet(b *testing.B) {
	key := client.ObjectKey{Namespace: "default", Name: "a"}
	// The ratio of a Get served from the client's own write to a cache Get
	// depends on the object: the own-write Get adds a shallow read of the
	// cache's copy (to never serve older than it) to one deep copy, as the
	// cache's Get makes. small is the ConfigMap of the tests (one label,
	// three keys); keys32 has 32 data keys and four labels.
	objects := []struct {
		name string
		obj  func() *corev1.ConfigMap
	}{
		{"small", sessionConfigMap},
		{"keys32", func() *corev1.ConfigMap { return withKeys32(sessionConfigMap()) }},
	}
	for _, o := range objects {
		b.Run("object="+o.name+"/case=cache_alone", func(b *testing.B) {
			inner := memCache(o.obj())
			obj := &corev1.ConfigMap{}
			b.ReportAllocs()
			for b.Loop() {
				_ = inner.Get(b.Context(), key, obj)
			}
		})
		b.Run("object="+o.name+"/case=cache", func(b *testing.B) {
			c, _ := clientOver(memCache(o.obj()), expectations.ClientOptions{Name: "bench-cache"})
			obj := &corev1.ConfigMap{}
			b.ReportAllocs()
			for b.Loop() {
				_ = c.Get(b.Context(), key, obj)
			}
		})
		b.Run("object="+o.name+"/case=own_write", func(b *testing.B) {
			c, _ := clientOver(memCache(o.obj()), expectations.ClientOptions{Name: "bench-own"})
			cm := o.obj()
			if err := c.Update(b.Context(), cm); err != nil {
				b.Fatal(err)
			}
			obj := &corev1.ConfigMap{}
			b.ReportAllocs()
			for b.Loop() {
				if err := c.Get(b.Context(), key, obj); err != nil || obj.ResourceVersion != cm.ResourceVersion {
					b.Fatalf("%v at %s", err, obj.ResourceVersion)
				}
			}
		})
	}
}
