package statusupdate_test

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/racesafe/racesafe/examples/workitem/api/v1alpha1"
	"github.com/racesafe/racesafe/expectations"
	"github.com/racesafe/racesafe/statusupdate"
)

// TestZeroOptionsAdopter is code written as the documentation shows it, by
// an outside module: a Tracker from expectations.Options{} (no Scheme), a
// Patcher recording into it, and a Reader, over a custom kind registered
// only in the manager's scheme. Every status write is recorded and every
// read after it served; before issue 35's fix, 0 of the 150 writes were
// recorded (ErrUnknownKind after the server took each one).
func TestZeroOptionsAdopter(t *testing.T) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	const n = 150
	b := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&v1.WorkItem{})
	for i := range n {
		b = b.WithObjects(&v1.WorkItem{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("item-%d", i)}})
	}
	c := b.Build()

	tracker := expectations.New(expectations.Options{})
	patcher := statusupdate.New[*v1.WorkItem](c, c, statusupdate.Options{Expectations: tracker})
	// The Patcher alone gives the tracker its client's scheme: a write
	// before any Reader exists is recorded.
	first := &v1.WorkItem{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "item-0"}, first); err != nil {
		t.Fatal(err)
	}
	if _, err := patcher.PatchStatus(t.Context(), first, func(w *v1.WorkItem) error {
		w.Status.Phase = v1.PhasePending
		return nil
	}); err != nil {
		t.Fatalf("PatchStatus through a Patcher recording into a Tracker from Options{} = %v", err)
	}
	reader := expectations.NewReader(c, tracker)

	moved := 0
	for i := range n {
		item := &v1.WorkItem{}
		key := client.ObjectKey{Namespace: "default", Name: fmt.Sprintf("item-%d", i)}
		if err := reader.Get(t.Context(), key, item); err != nil {
			t.Fatalf("Get %s: %v", key, err)
		}
		written, err := patcher.PatchStatus(t.Context(), item, func(w *v1.WorkItem) error {
			w.Status.Phase = v1.PhaseInstalling
			return nil
		})
		if err != nil {
			t.Errorf("PatchStatus %s: %v", key, err)
			continue
		}
		if err := reader.Get(t.Context(), key, item); err != nil {
			t.Errorf("Get %s after the write: %v", key, err)
			continue
		}
		if item.Status.Phase == v1.PhaseInstalling && item.ResourceVersion == written.ResourceVersion {
			moved++
		}
	}
	if moved != n {
		t.Errorf("moved %d of %d items", moved, n)
	}
}
