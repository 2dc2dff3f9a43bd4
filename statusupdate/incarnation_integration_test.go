package statusupdate_test

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/racesafe/racesafe/internal/testenv"
	"github.com/racesafe/racesafe/statusupdate"
)

// TestIntegrationWriteNeverCrossesIncarnations: a stale copy of an object
// that was deleted is replayed after a new object of the same name (another
// UID, the same content) was created. The patch conflicts; the re-read finds
// the new object; the Patcher must stop with an *IncarnationError and write
// nothing to it, for the object and for its status (issue 19, defect 1).
func TestIntegrationWriteNeverCrossesIncarnations(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	c := newClient(t, env.Config)
	ctx := t.Context()

	recreate := func(t *testing.T, obj client.Object, fresh func() client.Object) (stale, current client.Object) {
		t.Helper()
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		stale = obj.DeepCopyObject().(client.Object)
		if err := c.Delete(ctx, obj); err != nil {
			t.Fatal(err)
		}
		current = fresh()
		if err := c.Create(ctx, current); err != nil {
			t.Fatal(err)
		}
		if current.GetUID() == stale.GetUID() {
			t.Fatal("the new object has the old UID")
		}
		return stale, current
	}

	t.Run("Object", func(t *testing.T) {
		cm := func() client.Object {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "incarnation"}, Data: map[string]string{"phase": "Failed"}}
		}
		stale, current := recreate(t, cm(), cm)
		p := statusupdate.New[*corev1.ConfigMap](c, c, statusupdate.Options{})
		_, err := p.PatchObject(ctx, stale.(*corev1.ConfigMap), func(cm *corev1.ConfigMap) error {
			cm.Data["phase"] = "Deleting"
			return nil
		})
		var ie *statusupdate.IncarnationError
		if !errors.Is(err, statusupdate.ErrIncarnation) || !errors.As(err, &ie) || ie.Want != stale.GetUID() || ie.Got != current.GetUID() {
			t.Fatalf("patch of the old incarnation: got %v, want an *IncarnationError from %s to %s", err, stale.GetUID(), current.GetUID())
		}
		got := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(current), got); err != nil {
			t.Fatal(err)
		}
		if got.Data["phase"] != "Failed" || got.ResourceVersion != current.GetResourceVersion() {
			t.Fatalf("the new incarnation was written: phase %q, resourceVersion %s (was %s)", got.Data["phase"], got.ResourceVersion, current.GetResourceVersion())
		}
	})

	t.Run("Status", func(t *testing.T) {
		stale, current := recreate(t, testPod("incarnation"), func() client.Object { return testPod("incarnation") })
		p := statusupdate.New[*corev1.Pod](c, c, statusupdate.Options{})
		_, err := p.PatchStatus(ctx, stale.(*corev1.Pod), setCondition("racesafe.io/deleting", "stale"))
		if !errors.Is(err, statusupdate.ErrIncarnation) {
			t.Fatalf("status patch of the old incarnation: got %v, want ErrIncarnation", err)
		}
		got := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(current), got); err != nil {
			t.Fatal(err)
		}
		if got.ResourceVersion != current.GetResourceVersion() {
			t.Fatalf("the new incarnation was written: resourceVersion %s, was %s", got.ResourceVersion, current.GetResourceVersion())
		}
	})
}
