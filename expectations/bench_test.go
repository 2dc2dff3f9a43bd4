package expectations_test

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/racesafe/racesafe/expectations"
)

// checker is what both the Tracker and the baseline offer the benchmarks.
type checker interface {
	ExpectWrite(client.Object) error
	Check(client.Object) error
}

// backlog is how many unrelated writes are in flight while a benchmark
// checks: the maps are not empty, as in a busy controller.
const backlog = 1024

func backlogObjects() []*corev1.ConfigMap {
	objs := make([]*corev1.ConfigMap, backlog)
	for i := range objs {
		objs[i] = configMap("item-"+strconv.Itoa(i), "u"+strconv.Itoa(i), "100")
	}
	return objs
}

func benchCheck(b *testing.B, newChecker func() checker) {
	fill := func(c checker) {
		for _, o := range backlogObjects() {
			if err := c.ExpectWrite(o); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("miss", func(b *testing.B) {
		c := newChecker()
		fill(c)
		obj := configMap("not-written", "u", "50")
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Check(obj); err != nil {
				b.Fatal(err)
			}
		}
	})
	// A fresh check settles its expectation, so the unit measured is the
	// pair a controller performs: record a write that raises the
	// expectation, then see it in the cache. The resourceVersions rise; when
	// they wrap, a Tracker forgets the object once, or the lower ones would
	// not raise what it keeps.
	b.Run("fresh", func(b *testing.B) {
		c := newChecker()
		fill(c)
		objs := make([]*corev1.ConfigMap, 4096)
		for i := range objs {
			objs[i] = configMap("written", "u", strconv.Itoa(1000+i))
		}
		forget, _ := c.(interface{ Forget(client.Object) error })
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			obj := objs[i%len(objs)]
			if i%len(objs) == 0 && forget != nil {
				if err := forget.Forget(obj); err != nil {
					b.Fatal(err)
				}
			}
			if err := c.ExpectWrite(obj); err != nil {
				b.Fatal(err)
			}
			if err := c.Check(obj); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	// A read in a form that has caught up already: what every later read of
	// the object costs until its expectation ends.
	b.Run("caught-up", func(b *testing.B) {
		c := newChecker()
		fill(c)
		obj := configMap("written", "u", "100")
		if err := c.ExpectWrite(obj); err != nil {
			b.Fatal(err)
		}
		if err := c.Check(obj); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Check(obj); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stale", func(b *testing.B) {
		c := newChecker()
		fill(c)
		if err := c.ExpectWrite(configMap("written", "u", "100")); err != nil {
			b.Fatal(err)
		}
		obj := configMap("written", "u", "99")
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Check(obj); !errors.Is(err, expectations.ErrStale) {
				b.Fatal(err)
			}
		}
	})
}

func benchCheckParallel(b *testing.B, c checker) {
	objs := backlogObjects()
	// Half the keys have a write in flight, half do not; the cached copies
	// are older, so every check is a miss or stale and nothing is dropped.
	for _, o := range objs[:backlog/2] {
		if err := c.ExpectWrite(o); err != nil {
			b.Fatal(err)
		}
	}
	seen := make([]*corev1.ConfigMap, backlog)
	for i, o := range objs {
		seen[i] = o.DeepCopy()
		seen[i].ResourceVersion = "99"
	}
	var worker atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := int(worker.Add(1)) * 7919
		for pb.Next() {
			_ = c.Check(seen[i%backlog])
			i++
		}
	})
}

func newTrackerChecker(name string) func() checker {
	return func() checker { return expectations.New(expectations.Options{Name: name}) }
}

func BenchmarkCheck(b *testing.B) { benchCheck(b, newTrackerChecker("bench-check")) }

func BenchmarkCheckParallel(b *testing.B) {
	benchCheckParallel(b, expectations.New(expectations.Options{Name: "bench-parallel"}))
}

func BenchmarkExpectWrite(b *testing.B) {
	t := expectations.New(expectations.Options{Name: "bench-expect"})
	objs := backlogObjects()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := t.ExpectWrite(objs[i%backlog]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkBaselineStore(b *testing.B) {
	benchCheck(b, func() checker { return newBaseline() })
}

func BenchmarkBaselineStoreParallel(b *testing.B) { benchCheckParallel(b, newBaseline()) }

// baseline is built the way kube-controller-manager's ControllerExpectations
// is: records in a client-go cache.Store keyed by namespace/name, each record
// guarded by its own mutex, found with GetByKey and removed with Delete. It
// applies the same rules as the Tracker so that the comparison is of the data
// structure, not of the semantics.
type baseline struct {
	store cache.Store
	clock clock.PassiveClock
	ttl   time.Duration
}

type baselineRecord struct {
	key string
	mu  sync.Mutex
	uid types.UID
	rv  string
	at  time.Time
}

func newBaseline() *baseline {
	return &baseline{
		store: cache.NewStore(func(obj any) (string, error) {
			r, ok := obj.(*baselineRecord)
			if !ok {
				return "", fmt.Errorf("not a record: %T", obj)
			}
			return r.key, nil
		}),
		clock: clock.RealClock{},
		ttl:   expectations.DefaultTTL,
	}
}

func (b *baseline) ExpectWrite(obj client.Object) error {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return err
	}
	rv := obj.GetResourceVersion()
	if _, err := resourceversion.CompareResourceVersion(rv, rv); err != nil {
		return err
	}
	if item, exists, err := b.store.GetByKey(key); err == nil && exists {
		r := item.(*baselineRecord)
		r.mu.Lock()
		if cmp, _ := resourceversion.CompareResourceVersion(rv, r.rv); cmp > 0 {
			r.rv, r.at = rv, b.clock.Now()
		}
		r.mu.Unlock()
		return nil
	}
	return b.store.Add(&baselineRecord{key: key, uid: obj.GetUID(), rv: rv, at: b.clock.Now()})
}

func (b *baseline) Check(obj client.Object) error {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return err
	}
	item, exists, err := b.store.GetByKey(key)
	if err != nil || !exists {
		return err
	}
	r := item.(*baselineRecord)
	r.mu.Lock()
	expired := b.clock.Since(r.at) >= b.ttl
	cmp, cmpErr := resourceversion.CompareResourceVersion(obj.GetResourceVersion(), r.rv)
	want, uid := r.rv, r.uid
	r.mu.Unlock()
	switch {
	case expired:
		return b.store.Delete(r)
	case cmpErr != nil:
		return cmpErr
	case (uid == obj.GetUID() && cmp >= 0) || (uid != obj.GetUID() && cmp > 0):
		return b.store.Delete(r)
	}
	return &expectations.StaleError{Key: client.ObjectKeyFromObject(obj), Want: want, Seen: obj.GetResourceVersion()}
}
