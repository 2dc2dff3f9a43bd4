package expectations_test

import (
	"errors"
	"runtime"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/racesafe/racesafe/expectations"
)

const (
	scaleOwners   = 10_000
	scaleChildren = 10
)

func scaleOwnerObjects() []*corev1.ConfigMap {
	owners := make([]*corev1.ConfigMap, scaleOwners)
	for i := range owners {
		owners[i] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "owner-" + strconv.Itoa(i), UID: types.UID("o" + strconv.Itoa(i))}}
	}
	return owners
}

func scaleChildObjects() [][]*corev1.Secret {
	children := make([][]*corev1.Secret, scaleOwners)
	for i := range children {
		children[i] = make([]*corev1.Secret, scaleChildren)
		for j := range children[i] {
			id := strconv.Itoa(i) + "-" + strconv.Itoa(j)
			children[i][j] = child("default", "c-"+id, "c"+id, "100")
		}
	}
	return children
}

// newScaleOwnerTracker is an OwnerTracker over a cache whose children have
// not caught up (resourceVersion 50), holding 10,000 owners × 10 children.
func newScaleOwnerTracker(b *testing.B, owners []*corev1.ConfigMap, children [][]*corev1.Secret) *expectations.OwnerTracker {
	store := &fakeVersionStore{rv: "50"}
	c := &fakeOwnerCache{inf: storeInformer{fakeOwnedInformer: &fakeOwnedInformer{}, store: store}}
	tr, err := expectations.NewOwnerTracker(expectations.OwnerOptions{Name: "bench-owner-scale", For: &corev1.ConfigMap{}, Cache: c})
	if err != nil {
		b.Fatal(err)
	}
	for i, o := range owners {
		for _, ch := range children[i] {
			if err := tr.ExpectWrite(b.Context(), o, ch); err != nil {
				b.Fatal(err)
			}
		}
	}
	return tr
}

// BenchmarkOwnerScale: the OwnerTracker with 10,000 owners × 10 children
// pending: a check of an owner with nothing recorded, of an owner whose
// children the cache has not caught up with, a child's write, and the bytes
// held per owner record (live heap after a collection, measured once).
func BenchmarkOwnerScale(b *testing.B) {
	owners, children := scaleOwnerObjects(), scaleChildObjects()
	prefix := "owners=" + strconv.Itoa(scaleOwners) + "x" + strconv.Itoa(scaleChildren) + "/impl=owner-tracker/op="
	b.Run(prefix+"check-miss", func(b *testing.B) {
		tr := newScaleOwnerTracker(b, owners, children)
		owner := ownerCM("not-recorded")
		ctx := b.Context()
		b.ReportAllocs()
		for b.Loop() {
			if err := tr.Check(ctx, owner); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run(prefix+"check-stale", func(b *testing.B) {
		tr := newScaleOwnerTracker(b, owners, children)
		ctx := b.Context()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if err := tr.Check(ctx, owners[i%scaleOwners]); !errors.Is(err, expectations.ErrStale) {
				b.Fatal(err)
			}
			i += 7919
		}
	})
	b.Run(prefix+"write", func(b *testing.B) {
		tr := newScaleOwnerTracker(b, owners, children)
		ctx := b.Context()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			o := i % scaleOwners
			if err := tr.ExpectWrite(ctx, owners[o], children[o][(i/scaleOwners)%scaleChildren]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run(prefix+"memory", func(b *testing.B) {
		before := liveHeapBytes()
		tr := newScaleOwnerTracker(b, owners, children)
		after := liveHeapBytes()
		runtime.KeepAlive(tr)
		for b.Loop() {
		}
		b.ReportMetric(float64(int64(after)-int64(before))/scaleOwners, "B/owner")
		b.ReportMetric(float64(int64(after)-int64(before))/(scaleOwners*scaleChildren), "B/child")
		b.ReportMetric(0, "ns/op")
	})
}
