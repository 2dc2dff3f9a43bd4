package statusupdate_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/racesafe/racesafe/statusupdate"
)

// BenchmarkPatch compares one status transition through the Patcher with the
// incident's Get-then-Patch, both on the fake client: the CPU and allocation
// cost of the client side, with no network. Run with -benchmem.
func BenchmarkPatch(b *testing.B) {
	setup := func(b *testing.B) (client.WithWatch, *corev1.Pod) {
		c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithStatusSubresource(&corev1.Pod{}).WithObjects(testPod("p")).Build()
		var pod corev1.Pod
		if err := c.Get(b.Context(), client.ObjectKey{Namespace: "default", Name: "p"}, &pod); err != nil {
			b.Fatal(err)
		}
		return c, &pod
	}

	b.Run("Patcher", func(b *testing.B) {
		c, held := setup(b)
		p := statusupdate.New[*corev1.Pod](c, c, statusupdate.Options{})
		i := 0
		for b.Loop() {
			written, err := p.PatchStatus(b.Context(), held, setPhase(phaseFor(i)))
			if err != nil {
				b.Fatal(err)
			}
			held = written
			i++
		}
	})
	b.Run("PatcherUnchanged", func(b *testing.B) {
		c, held := setup(b)
		p := statusupdate.New[*corev1.Pod](c, c, statusupdate.Options{})
		for b.Loop() {
			if _, err := p.PatchStatus(b.Context(), held, setPhase(held.Status.Phase)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("IncidentUpdateStatus", func(b *testing.B) {
		c, item := setup(b)
		i := 0
		for b.Loop() {
			if err := incidentUpdateStatus(b.Context(), c, c, item, phaseFor(i)); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}
