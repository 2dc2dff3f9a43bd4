package expectations_test

import (
	"errors"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/racesafe/racesafe/expectations"
)

// The figures at scale: check and write cost at 1,000, 10,000 and 100,000
// pending expectations, bytes held per pending expectation, and the sweep at
// 100,000, for the Tracker beside two stores written for the benchmark with
// the Tracker's rules, so that what differs is the data structure:
//   - kcm: kube-controller-manager's ControllerExpectations shape, records
//     in a cache.Store, each under its own mutex (baseline, bench_test.go);
//   - kep5647: a KEP-5647-style consistency store, one map of the newest
//     written resourceVersion per object under one RWMutex.
//
// make bench-scale runs them and prints the table.

var scaleSizes = []int{1_000, 10_000, 100_000}

type scaleImpl struct {
	name string
	new  func() checker
}

var scaleImpls = []scaleImpl{
	{"tracker", func() checker { return expectations.New(expectations.Options{Name: "bench-scale"}) }},
	{"kcm", func() checker { return newBaseline() }},
	{"kep5647", func() checker { return newConsistencyStore() }},
}

func scaleObjects(n int, rv string) []*corev1.ConfigMap {
	objs := make([]*corev1.ConfigMap, n)
	for i := range objs {
		objs[i] = configMap("item-"+strconv.Itoa(i), "u"+strconv.Itoa(i), rv)
	}
	return objs
}

// BenchmarkScale: per size and store, a check of an object with no write
// (miss), a check of a pending object the cache has not caught up with
// (stale: what a controller sees while it waits), and a write that raises a
// pending expectation.
func BenchmarkScale(b *testing.B) {
	for _, n := range scaleSizes {
		written := scaleObjects(n, "100")
		older := scaleObjects(n, "99")
		newer := make([][]*corev1.ConfigMap, 2)
		newer[0], newer[1] = scaleObjects(n, "101"), scaleObjects(n, "102")
		for _, impl := range scaleImpls {
			fill := func(b *testing.B) checker {
				c := impl.new()
				for _, o := range written {
					if err := c.ExpectWrite(o); err != nil {
						b.Fatal(err)
					}
				}
				return c
			}
			prefix := "pending=" + strconv.Itoa(n) + "/impl=" + impl.name + "/op="
			b.Run(prefix+"check-miss", func(b *testing.B) {
				c := fill(b)
				obj := configMap("not-written", "u", "50")
				b.ReportAllocs()
				for b.Loop() {
					if err := c.Check(obj); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(prefix+"check-stale", func(b *testing.B) {
				c := fill(b)
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if err := c.Check(older[i%n]); !errors.Is(err, expectations.ErrStale) {
						b.Fatal(err)
					}
					i += 7919
				}
			})
			b.Run(prefix+"write", func(b *testing.B) {
				c := fill(b)
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					// Raising, then raising again: resourceVersions only
					// rise, so alternate between two later ones and let
					// the lower be ignored, as a duplicate event is.
					if err := c.ExpectWrite(newer[(i/n)%2][i%n]); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
	}
}

// BenchmarkScaleMemory reports the bytes each store holds per pending
// expectation at 100,000: the live heap after a collection with the store
// filled, less the live heap before, with the objects themselves built
// beforehand and kept alive across both readings.
func BenchmarkScaleMemory(b *testing.B) {
	const n = 100_000
	objs := scaleObjects(n, "100")
	for _, impl := range scaleImpls {
		b.Run("pending="+strconv.Itoa(n)+"/impl="+impl.name, func(b *testing.B) {
			// Measured once, not per iteration: the figure is a size.
			before := liveHeapBytes()
			c := impl.new()
			for _, o := range objs {
				if err := c.ExpectWrite(o); err != nil {
					b.Fatal(err)
				}
			}
			after := liveHeapBytes()
			runtime.KeepAlive(c)
			runtime.KeepAlive(objs)
			for b.Loop() {
			}
			b.ReportMetric(float64(int64(after)-int64(before))/n, "B/pending")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkScaleSweep reports, at 100,000 pending all past their TTL, how
// long the write that runs the sweep takes (the longest a caller waits: the
// sweep runs inline, one shard locked at a time) and how many sweeps run
// while writes keep coming for three TTLs on the injected clock.
func BenchmarkScaleSweep(b *testing.B) {
	const n = 100_000
	const ttl = time.Minute
	objs := scaleObjects(n, "100")
	trigger := configMap("trigger", "t", "100")
	var longest time.Duration
	var sweepsPerTTL float64
	// Measured over a few rounds, not per iteration: the figures are the
	// sweep's, not a loop body's.
	for round := range 3 {
		clk := newFakeClock()
		name := "bench-sweep-" + strconv.Itoa(round)
		tr := expectations.New(expectations.Options{Name: name, TTL: ttl, Clock: clk})
		for _, o := range objs {
			if err := tr.ExpectWrite(o); err != nil {
				b.Fatal(err)
			}
		}
		before := sweepCount(b, name)
		clk.Step(ttl + time.Second)
		start := time.Now()
		if err := tr.ExpectWrite(trigger); err != nil {
			b.Fatal(err)
		}
		longest = max(longest, time.Since(start))
		if p := tr.Pending(); p != 1 {
			b.Fatalf("after the sweep %d pending, want 1 (the trigger)", p)
		}
		// Three more TTLs of writes, one every second of the clock.
		for s := range 3 * int(ttl/time.Second) {
			clk.Step(time.Second)
			if err := tr.ExpectWrite(configMap("w-"+strconv.Itoa(s), "w", "100")); err != nil {
				b.Fatal(err)
			}
		}
		sweepsPerTTL = (sweepCount(b, name) - before) / 4
	}
	for b.Loop() {
	}
	b.ReportMetric(float64(longest.Nanoseconds()), "sweep-ns")
	b.ReportMetric(sweepsPerTTL, "sweeps/TTL")
	b.ReportMetric(0, "ns/op")
}

// TestMemoryFollowsTheLastTwoTTLs: 100,000 writes, one every 10ms of the
// injected clock (1,000 seconds, over sixteen TTLs of a minute), of objects
// that are never checked again. The Tracker's doc.go: memory follows the
// writes of the last two TTLs. At every write the expectations held are at
// most those written in the last two TTLs, and the live heap at the end is
// that of the last two TTLs' records, not of 100,000.
func TestMemoryFollowsTheLastTwoTTLs(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 writes")
	}
	const n = 100_000
	const ttl = time.Minute
	const every = 10 * time.Millisecond
	objs := scaleObjects(n, "100")
	clk := newFakeClock()
	tr := expectations.New(expectations.Options{Name: "memory-two-ttls", TTL: ttl, Clock: clk})
	window := int(2 * ttl / every) // writes in two TTLs
	before := liveHeapBytes()
	for i, o := range objs {
		if err := tr.ExpectWrite(o); err != nil {
			t.Fatal(err)
		}
		clk.Step(every)
		if i%1000 == 999 {
			if p := tr.Pending(); p > window {
				t.Fatalf("after %d writes %d pending, more than the %d written in the last two TTLs", i+1, p, window)
			}
		}
	}
	held := int64(liveHeapBytes()) - int64(before)
	// The same number of records in a tracker that never swept: what 100,000
	// would hold if memory followed every write.
	full := expectations.New(expectations.Options{Name: "memory-two-ttls-full", TTL: time.Hour, Clock: newFakeClock()})
	mid := liveHeapBytes()
	for _, o := range objs {
		if err := full.ExpectWrite(o); err != nil {
			t.Fatal(err)
		}
	}
	all := int64(liveHeapBytes()) - int64(mid)
	runtime.KeepAlive(full)
	runtime.KeepAlive(tr)
	runtime.KeepAlive(objs)
	// Two TTLs are 12,000 of the 100,000 writes: 12 % of the records, with
	// room for the maps' buckets, which grow by doubling and do not shrink.
	if limit := all * 30 / 100; held > limit {
		t.Errorf("after %d writes over %s the tracker holds %d bytes; all %d would hold %d; want at most %d (the last two TTLs and map slack)",
			n, time.Duration(n)*every, held, n, all, limit)
	}
	t.Logf("held %d bytes (%d pending) after %d writes; %d bytes for all %d", held, tr.Pending(), n, all, n)
}

// sweepCount reads a tracker's racesafe_expectations_sweeps_total.
func sweepCount(tb testing.TB, tracker string) float64 {
	tb.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		tb.Fatalf("gather: %v", err)
	}
	for _, mf := range families {
		if mf.GetName() != "racesafe_expectations_sweeps_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == tracker {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func liveHeapBytes() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// consistencyStore is a KEP-5647-style consistency store: the newest
// resourceVersion this controller wrote per object, in one map under one
// RWMutex, a read fresh when its resourceVersion has reached it. The rules
// are the Tracker's (as baseline's are), so the comparison is of the
// structure.
type consistencyStore struct {
	mu sync.RWMutex
	m  map[string]consistencyRecord
}

type consistencyRecord struct {
	uid types.UID
	rv  string
	at  time.Time
}

func newConsistencyStore() *consistencyStore {
	return &consistencyStore{m: map[string]consistencyRecord{}}
}

func (s *consistencyStore) ExpectWrite(obj client.Object) error {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return err
	}
	rv := obj.GetResourceVersion()
	if _, err := resourceversion.CompareResourceVersion(rv, rv); err != nil {
		return err
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.m[key]; ok {
		if cmp, _ := resourceversion.CompareResourceVersion(rv, r.rv); cmp <= 0 {
			return nil
		}
	}
	s.m[key] = consistencyRecord{uid: obj.GetUID(), rv: rv, at: now}
	return nil
}

func (s *consistencyStore) Check(obj client.Object) error {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return err
	}
	s.mu.RLock()
	r, ok := s.m[key]
	s.mu.RUnlock()
	if !ok {
		return nil
	}
	cmp, cmpErr := resourceversion.CompareResourceVersion(obj.GetResourceVersion(), r.rv)
	switch {
	case time.Since(r.at) >= expectations.DefaultTTL:
	case cmpErr != nil:
		return cmpErr
	case (r.uid == obj.GetUID() && cmp >= 0) || (r.uid != obj.GetUID() && cmp > 0):
	default:
		return &expectations.StaleError{Key: client.ObjectKeyFromObject(obj), Want: r.rv, Seen: obj.GetResourceVersion()}
	}
	s.mu.Lock()
	if cur, ok := s.m[key]; ok && cur.rv == r.rv {
		delete(s.m, key)
	}
	s.mu.Unlock()
	return nil
}
