package expectations

import (
	"hash/maphash"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Two keys with one hash must both be kept, found and dropped on their own:
// the second lives in spill. Forced here by passing one hash for both.
func TestTableKeepsKeysWhoseHashesCollide(t *testing.T) {
	tb := newTable()
	a := objectKey{kind: 1, ObjectKey: client.ObjectKey{Namespace: "ns", Name: "a"}}
	b := objectKey{kind: 1, ObjectKey: client.ObjectKey{Namespace: "ns", Name: "b"}}
	const h = keyHash(42)
	tb.put(h, a, expectation{rv: "1"})
	tb.put(h, b, expectation{rv: "2"})
	if got := tb.len(); got != 2 {
		t.Fatalf("len = %d, want 2", got)
	}
	for k, want := range map[objectKey]string{a: "1", b: "2"} {
		if e, ok := tb.get(h, k); !ok || e.rv != want {
			t.Fatalf("get(%v) = %+v, %v; want rv %s", k, e, ok, want)
		}
	}
	// An update of the spilled key stays in spill and changes only it.
	tb.put(h, b, expectation{rv: "3"})
	if e, _ := tb.get(h, b); e.rv != "3" {
		t.Fatalf("spilled key not updated: %+v", e)
	}
	if e, _ := tb.get(h, a); e.rv != "1" {
		t.Fatalf("first key changed by the spilled one's update: %+v", e)
	}
	// With the first key gone, the spilled one is still found, and putting
	// it again does not make two copies.
	tb.del(h, a)
	if _, ok := tb.get(h, a); ok {
		t.Fatal("deleted key still found")
	}
	tb.put(h, b, expectation{rv: "4"})
	if e, ok := tb.get(h, b); !ok || e.rv != "4" || tb.len() != 1 {
		t.Fatalf("after delete of the first: get(b) = %+v, %v; len %d", e, ok, tb.len())
	}
	n := 0
	tb.each(func(k objectKey, e expectation) bool { n++; return k != b })
	if n != 1 || tb.len() != 0 {
		t.Fatalf("each visited %d, left %d; want 1 visited and none left", n, tb.len())
	}
}

func TestHashKeyTellsKindNamespaceAndNameApart(t *testing.T) {
	seed := maphash.MakeSeed()
	base := objectKey{kind: 1, ObjectKey: client.ObjectKey{Namespace: "ns", Name: "a"}}
	for _, other := range []objectKey{
		{kind: 2, ObjectKey: base.ObjectKey},
		{kind: 1, ObjectKey: client.ObjectKey{Namespace: "a", Name: "ns"}},
		{kind: 1, ObjectKey: client.ObjectKey{Namespace: "", Name: "a"}},
	} {
		if hashKey(seed, other) == hashKey(seed, base) {
			t.Errorf("%v and %v hash alike", other, base)
		}
	}
}

func TestNilPointer(t *testing.T) {
	var nilPod *struct{ client.Object }
	if !nilPointer(nilPod) {
		t.Error("typed nil not seen")
	}
	if nilPointer(&struct{ client.Object }{}) {
		t.Error("non-nil pointer seen as nil")
	}
	if nilPointer(struct{}{}) {
		t.Error("zero-size value seen as nil")
	}
}
