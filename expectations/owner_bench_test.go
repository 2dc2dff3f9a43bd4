package expectations_test

import (
	"errors"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/racesafe/racesafe/expectations"
)

// BenchmarkOwnerCheck measures the owner check at a reconcile's entry, with
// backlog other owners waiting on their children. Its baseline is
// BenchmarkCheck/miss, the single-object Tracker.Check of an object with no
// expectation: "miss" here must not allocate either.
func BenchmarkOwnerCheck(b *testing.B) {
	newFilled := func(b *testing.B) (*expectations.OwnerTracker, *fakeVersionStore) {
		store := &fakeVersionStore{rv: "50"}
		c := &fakeOwnerCache{inf: storeInformer{fakeOwnedInformer: &fakeOwnedInformer{}, store: store}}
		tr, err := expectations.NewOwnerTracker(expectations.OwnerOptions{Name: "bench-owner", For: &corev1.ConfigMap{}, Cache: c})
		if err != nil {
			b.Fatal(err)
		}
		for i := range backlog {
			owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "owner-" + strconv.Itoa(i), UID: types.UID("u" + strconv.Itoa(i))}}
			if err := tr.ExpectWrite(b.Context(), owner, child("default", "c-"+strconv.Itoa(i), "c"+strconv.Itoa(i), "100")); err != nil {
				b.Fatal(err)
			}
		}
		return tr, store
	}
	b.Run("miss", func(b *testing.B) {
		tr, _ := newFilled(b)
		owner := ownerCM("not-recorded")
		ctx := b.Context()
		b.ReportAllocs()
		for b.Loop() {
			if err := tr.Check(ctx, owner); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stale", func(b *testing.B) {
		tr, _ := newFilled(b)
		owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "owner-7", UID: "u7"}}
		ctx := b.Context()
		b.ReportAllocs()
		for b.Loop() {
			if err := tr.Check(ctx, owner); !errors.Is(err, expectations.ErrStale) {
				b.Fatal(err)
			}
		}
	})
	// The pair a controller performs: record the child's write, then find
	// the cache caught up at the next reconcile.
	b.Run("fresh", func(b *testing.B) {
		tr, store := newFilled(b)
		store.set("100")
		owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "written", UID: "w"}}
		c := child("default", "c-w", "cw", "100")
		ctx := b.Context()
		b.ReportAllocs()
		for b.Loop() {
			if err := tr.ExpectWrite(ctx, owner, c); err != nil {
				b.Fatal(err)
			}
			if err := tr.Check(ctx, owner); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestOwnerCheckWithNothingRecordedDoesNotAllocate pins the benchmark's
// "miss" figure as a guarantee.
func TestOwnerCheckWithNothingRecordedDoesNotAllocate(t *testing.T) {
	f := newOwnerFixture(t, true)
	ctx := t.Context()
	if err := f.tr.ExpectWrite(ctx, ownerCM("o1"), child("default", "c-1", "c1", "100")); err != nil {
		t.Fatal(err)
	}
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "other", UID: "x"}}
	if n := testing.AllocsPerRun(100, func() {
		if err := f.tr.Check(ctx, other); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Check of an owner with nothing recorded allocates %v times, want 0", n)
	}
}
