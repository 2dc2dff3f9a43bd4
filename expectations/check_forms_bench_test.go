package expectations_test

import (
	"errors"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/racesafe/racesafe/expectations"
)

// A form builds the object a controller reads in one of the three shapes an
// informer holds: typed, unstructured, or metadata-only. The latter two carry
// their kind; a typed one's kind is looked up by Go type on every check, which
// is what made the check cost more than the baseline in one run and not in
// another.
type form struct {
	name string
	obj  func(name, uid, rv string) client.Object
}

var forms = []form{
	{"typed", func(name, uid, rv string) client.Object { return pod(name, uid, rv) }},
	{"unstructured", func(name, uid, rv string) client.Object { return podUnstructured(name, uid, rv) }},
	{"metadata", func(name, uid, rv string) client.Object { return podMetadata(name, uid, rv) }},
}

func podUnstructured(name, uid, rv string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("Pod")
	u.SetNamespace("default")
	u.SetName(name)
	u.SetUID(types.UID(uid))
	u.SetResourceVersion(rv)
	return u
}

// BenchmarkCheckVsBaseline puts the Tracker and the cache.Store baseline
// (bench_test.go) side by side in every form, as sub-benchmarks named
// form=…/impl=…/case=…, so that benchstat -col /impl compares them in one
// run (hack/bench-check.sh).
func BenchmarkCheckVsBaseline(b *testing.B) {
	impls := []struct {
		name string
		new  func() checker
	}{
		{"tracker", func() checker { return expectations.New(expectations.Options{Name: "bench-vs"}) }},
		{"baseline", func() checker { return newBaseline() }},
	}
	for _, f := range forms {
		for _, impl := range impls {
			b.Run("form="+f.name+"/impl="+impl.name, func(b *testing.B) { benchCheckForm(b, f, impl.new) })
		}
	}
}

func benchCheckForm(b *testing.B, f form, newChecker func() checker) {
	fill := func(c checker) {
		for i := range backlog {
			if err := c.ExpectWrite(f.obj("item-"+strconv.Itoa(i), "u"+strconv.Itoa(i), "100")); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("case=miss", func(b *testing.B) {
		c := newChecker()
		fill(c)
		obj := f.obj("not-written", "u", "50")
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Check(obj); err != nil {
				b.Fatal(err)
			}
		}
	})
	// As in benchCheck: the unit is the pair a controller performs, a write
	// recorded and then seen; at the wrap of the rising resourceVersions the
	// object is forgotten once.
	b.Run("case=fresh", func(b *testing.B) {
		c := newChecker()
		fill(c)
		objs := make([]client.Object, 4096)
		for i := range objs {
			objs[i] = f.obj("written", "u", strconv.Itoa(1000+i))
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
	b.Run("case=caught-up", func(b *testing.B) {
		c := newChecker()
		fill(c)
		obj := f.obj("written", "u", "100")
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
	b.Run("case=stale", func(b *testing.B) {
		c := newChecker()
		fill(c)
		if err := c.ExpectWrite(f.obj("written", "u", "100")); err != nil {
			b.Fatal(err)
		}
		obj := f.obj("written", "u", "99")
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Check(obj); !errors.Is(err, expectations.ErrStale) {
				b.Fatal(err)
			}
		}
	})
}

// TestCheckCaughtUpDoesNotAllocate pins the benchmark's 0 allocations for the
// read every later reconcile of a caught-up object makes, in every form, and
// for a miss among a full backlog (TestCheckDoesNotAllocate covers an empty
// tracker and the first fresh read).
func TestCheckCaughtUpDoesNotAllocate(t *testing.T) {
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			tr := expectations.New(expectations.Options{Name: "allocs-caught-up"})
			for i := range backlog {
				if err := tr.ExpectWrite(f.obj("item-"+strconv.Itoa(i), "u"+strconv.Itoa(i), "100")); err != nil {
					t.Fatal(err)
				}
			}
			obj := f.obj("written", "u", "100")
			if err := tr.ExpectWrite(obj); err != nil {
				t.Fatal(err)
			}
			if err := tr.Check(obj); err != nil {
				t.Fatal(err)
			}
			if n := testing.AllocsPerRun(100, func() {
				if err := tr.Check(obj); err != nil {
					t.Fatal(err)
				}
			}); n != 0 {
				t.Errorf("Check of a caught-up %s object allocates %v times, want 0", f.name, n)
			}
			miss := f.obj("not-written", "u", "50")
			if n := testing.AllocsPerRun(100, func() {
				if err := tr.Check(miss); err != nil {
					t.Fatal(err)
				}
			}); n != 0 {
				t.Errorf("Check of an unwritten %s object among %d pending allocates %v times, want 0", f.name, backlog, n)
			}
		})
	}
}

// TestRepeatedStaleCheckDoesNotAllocate: a controller checks the same stale
// copy again on each requeue until its cache catches up; those checks return
// the error they returned before, and allocate nothing. A copy at another
// version, or an expectation raised meanwhile, gets an error of its own.
func TestRepeatedStaleCheckDoesNotAllocate(t *testing.T) {
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			tr := expectations.New(expectations.Options{Name: "allocs-stale"})
			if err := tr.ExpectWrite(f.obj("written", "u", "100")); err != nil {
				t.Fatal(err)
			}
			old := f.obj("written", "u", "98")
			first := tr.Check(old)
			var stale *expectations.StaleError
			if !errors.As(first, &stale) || stale.Seen != "98" || stale.Want != "100" {
				t.Fatalf("Check = %v, want stale 98 < 100", first)
			}
			if n := testing.AllocsPerRun(100, func() {
				if err := tr.Check(old); err != first {
					t.Fatalf("repeated stale Check = %v, want the same error as before", err)
				}
			}); n != 0 {
				t.Errorf("allocations per repeated stale Check: %v, want 0", n)
			}
			if err := tr.Check(f.obj("written", "u", "99")); !errors.As(err, &stale) || stale.Seen != "99" {
				t.Errorf("Check of another version = %v, want stale with Seen 99", err)
			}
			if err := tr.ExpectWrite(f.obj("written", "u", "101")); err != nil {
				t.Fatal(err)
			}
			if err := tr.Check(f.obj("written", "u", "99")); !errors.As(err, &stale) || stale.Want != "101" {
				t.Errorf("Check after the expectation was raised = %v, want stale with Want 101", err)
			}
		})
	}
}
