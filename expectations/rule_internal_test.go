package expectations

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestWatermarksOfOneStreamAreOne: the Client's marks of a form read
// through one informer (one watch for every namespace) are one, whatever
// the namespaces reads and events come from, so that namespaces coming and
// going are not remembered (issue 35, 11); those of a form whose informer
// is not known (a multi-namespace cache, or no ClientOptions.Cache) are
// kept per namespace, as its streams are.
func TestWatermarksOfOneStreamAreOne(t *testing.T) {
	gk := schema.GroupKind{Kind: "ConfigMap"}
	for _, oneStream := range []bool{false, true} {
		w := newWatermarks()
		w.kinds[formKind{gk: gk, f: formTyped}] = &formInformer{oneStream: oneStream}
		for i := range 1000 {
			w.raise(gk, formTyped, fmt.Sprintf("ns-%d", i), fmt.Sprint(i+1))
		}
		want := 1000
		if oneStream {
			want = 1
		}
		if got := len(w.seen); got != want {
			t.Errorf("one stream %v: %d marks kept, want %d", oneStream, got, want)
		}
		// ns-0's own events went no further than 1; one stream's did.
		if got := w.reached(gk, formTyped, "ns-0", "1000"); got != oneStream {
			t.Errorf("one stream %v: reached 1000 in ns-0 = %v, want %v", oneStream, got, oneStream)
		}
		if !w.reached(gk, formTyped, "ns-999", "1000") || w.reached(gk, formTyped, "ns-999", "1001") {
			t.Errorf("one stream %v: ns-999 at 1000 not told apart from 1001", oneStream)
		}
	}
}
