package expectations_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/racesafe/racesafe/expectations"
	"github.com/racesafe/racesafe/internal/testenv"
)

// BenchmarkClientGetInformerCache is BenchmarkClientGet on
// controller-runtime's own informer cache, read through a client built as a
// manager builds its client (reads from the cache, writes to the server):
// the cache Get a controller makes today, informer lookup by kind included.
// The cache is stopped once synced: its informer keeps its store and
// serves Gets from it, never sees the client's own write, and every
// own_write Get is served from that write after the comparison with the
// cache's copy. Skips without a control plane (make envtest).
func BenchmarkClientGetInformerCache(b *testing.B) {
	env := testenv.Start(b, testenv.Options{})
	ctx := b.Context()
	direct := testenv.Client(b, env.Config, client.Options{})
	const ns = "bench-get"
	testenv.Namespace(b, direct, ns)
	objects := []struct {
		name string
		obj  func() *corev1.ConfigMap
	}{
		{"small", func() *corev1.ConfigMap {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "small", Labels: map[string]string{"app": "a"}},
				Data: map[string]string{"a": "1", "b": "2", "c": "3"}}
		}},
		{"keys32", func() *corev1.ConfigMap {
			return withKeys32(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keys32", Labels: map[string]string{"app": "a"}},
				Data: map[string]string{}})
		}},
	}
	for _, o := range objects {
		if err := direct.Create(ctx, o.obj()); err != nil {
			b.Fatal(err)
		}
	}
	// managedFields=kept is the informer cache's default; stripped is
	// what many operators configure (cache.TransformStripManagedFields):
	// a smaller copy per Get, so the own write's extra costs weigh more.
	for _, mf := range []struct {
		name      string
		transform func(any) (any, error)
	}{{"kept", nil}, {"stripped", cache.TransformStripManagedFields()}} {
		// Cluster-wide, as a manager's cache is by default: with
		// DefaultNamespaces, each Get also asks the RESTMapper whether the
		// kind is namespaced, which costs more than the Get itself and
		// would hide the own write's cost.
		c, err := cache.New(env.Config, cache.Options{Scheme: direct.Scheme(), DefaultTransform: mf.transform})
		if err != nil {
			b.Fatal(err)
		}
		testenv.RunCache(ctx, b, c, &corev1.ConfigMap{})()
		reader := testenv.Client(b, env.Config, client.Options{Cache: &client.CacheOptions{Reader: c}})
		benchmarkGetCases(b, "managedFields="+mf.name+"/", direct, reader, ns, objects)
	}
}

// benchmarkGetCases reads each object through reader (a cache Get), through
// an expectations.Client with nothing pending, and through one that wrote it.
func benchmarkGetCases(b *testing.B, prefix string, direct, reader client.Client, ns string, objects []struct {
	name string
	obj  func() *corev1.ConfigMap
}) {
	ctx := b.Context()
	for _, o := range objects {
		key := client.ObjectKey{Namespace: ns, Name: o.name}
		b.Run(prefix+"object="+o.name+"/case=cache_alone", func(b *testing.B) {
			obj := &corev1.ConfigMap{}
			b.ReportAllocs()
			for b.Loop() {
				if err := reader.Get(ctx, key, obj); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(prefix+"object="+o.name+"/case=cache", func(b *testing.B) {
			ec, err := expectations.NewClient(reader, expectations.ClientOptions{Name: "bench-informer-cache", APIReader: reader})
			if err != nil {
				b.Fatal(err)
			}
			obj := &corev1.ConfigMap{}
			b.ReportAllocs()
			for b.Loop() {
				if err := ec.Get(ctx, key, obj); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(prefix+"object="+o.name+"/case=own_write", func(b *testing.B) {
			ec, err := expectations.NewClient(reader, expectations.ClientOptions{Name: "bench-informer-own", APIReader: reader})
			if err != nil {
				b.Fatal(err)
			}
			// Two writes with a Get between them, as a controller writes
			// and reads on: the first Get tells the Client whether the
			// cache keeps managedFields, and the second write is kept in
			// the cache's form.
			cm := &corev1.ConfigMap{}
			if err := direct.Get(ctx, key, cm); err != nil {
				b.Fatal(err)
			}
			for range 2 {
				// A new value for a key the object has: the written object
				// has the cached one's keys, so both Gets copy the same maps.
				cm.Data["a"] = "written at " + cm.ResourceVersion
				if err := ec.Update(ctx, cm); err != nil {
					b.Fatal(err)
				}
				if err := ec.Get(ctx, key, cm); err != nil {
					b.Fatal(err)
				}
			}
			obj := &corev1.ConfigMap{}
			b.ReportAllocs()
			for b.Loop() {
				if err := ec.Get(ctx, key, obj); err != nil || obj.ResourceVersion != cm.ResourceVersion {
					b.Fatalf("%v at %s, want %s", err, obj.ResourceVersion, cm.ResourceVersion)
				}
			}
		})
	}
}
