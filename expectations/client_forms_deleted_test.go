package expectations_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/racesafe/racesafe/expectations"
)

// watchForms makes the rig's Client read the kind in the given forms (a
// name nothing has), so that their handlers are on before any write.
func watchForms(t *testing.T, r *rig, forms ...string) {
	t.Helper()
	for _, f := range forms {
		var obj client.Object
		switch f {
		case typedForm:
			obj = &corev1.ConfigMap{}
		case metaForm:
			m := &metav1.PartialObjectMetadata{}
			m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
			obj = m
		default:
			t.Fatalf("form %q", f)
		}
		if err := r.c.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "nothing"}, obj); !apierrors.IsNotFound(err) {
			t.Fatalf("%s Get of a name nothing has = %v", f, err)
		}
	}
}

// writtenWithFormsWatched returns a rig whose Client reads the typed and
// metadata forms (their handlers on before any write) and has created a
// ConfigMap of name, with a UID, as a real server's answer has.
func writtenWithFormsWatched(t *testing.T, name string) (*rig, *corev1.ConfigMap) {
	t.Helper()
	r := newRig(t, rigOptions{})
	watchForms(t, r, typedForm, metaForm)
	cm := attackCM(name)
	cm.UID = types.UID(name + "-1")
	if err := r.c.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	return r, cm
}

// deletedAt returns obj as its delete event carries it: at the deletion's
// version, rv.
func deletedAt(obj *corev1.ConfigMap, rv string) *corev1.ConfigMap {
	d := obj.DeepCopy()
	d.ResourceVersion = rv
	return d
}

func metaGet(ctx context.Context, r *rig, key client.ObjectKey) (*metav1.PartialObjectMetadata, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	return m, r.c.Get(ctx, key, m)
}

// TestADeletionDeliveredWhileAReadReplacesTheEntryIsKept (the history
// checker's seed 9914): the metadata informer delivers the deletion of the
// incarnation the Client wrote while a typed read, at the same moment,
// makes another writer's newer copy of it the entry. The deletion is
// judged again on the entry that read left, not lost with the entry it
// first saw: the metadata form serves NotFound, not that copy.
func TestADeletionDeliveredWhileAReadReplacesTheEntryIsKept(t *testing.T) {
	// Broken by: the event handler acting on the entry it first read
	// only (rule.go delivered, without the loop), fails with: metadata
	// Get after its informer delivered the deletion = <nil> at 2, want
	// NotFound.
	r, cm := writtenWithFormsWatched(t, "raced")
	ctx := t.Context()
	key := client.ObjectKeyFromObject(cm)
	other := cm.DeepCopy()
	other.Data["v"] = "other"
	if err := r.srv.Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	r.show(other, typedForm)
	if err := r.srv.Delete(ctx, other.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	read := false
	expectations.SetDeliveredHook(r.c, func() {
		if read {
			return
		}
		read = true
		got := &corev1.ConfigMap{}
		if err := r.c.Get(ctx, key, got); err != nil || got.ResourceVersion != other.ResourceVersion {
			t.Errorf("typed Get of another writer's update, during the event = %v at %s, want %s", err, got.ResourceVersion, other.ResourceVersion)
		}
	})
	r.deliver(deletedAt(other, "3"), true, metaForm)
	if !read {
		t.Fatal("the delete event did not reach the Client's handler")
	}
	if m, err := metaGet(ctx, r, key); !apierrors.IsNotFound(err) {
		t.Errorf("metadata Get after its informer delivered the deletion = %v at %s, want NotFound", err, m.ResourceVersion)
	}
}

// TestADeletionAFormCaughtUpDeliversEndsTheWrite: the metadata form has
// shown the Client's write (it is caught up with it), then delivers the
// deletion of that incarnation by another writer. The typed form, whose
// informer has delivered neither, must not serve the write afterwards: the
// deletion becomes the entry whichever form delivers it.
func TestADeletionAFormCaughtUpDeliversEndsTheWrite(t *testing.T) {
	// Broken by: the event handler ignoring events of a form already
	// caught up with the entry, deletions included (rule.go delivered),
	// fails with: typed Get after the metadata informer delivered the
	// deletion = <nil> at 1, want NotFound.
	r, cm := writtenWithFormsWatched(t, "caught")
	ctx := t.Context()
	key := client.ObjectKeyFromObject(cm)
	r.show(cm, metaForm)
	if m, err := metaGet(ctx, r, key); err != nil || m.ResourceVersion != cm.ResourceVersion {
		t.Fatalf("metadata Get of the write its cache shows = %v at %s, want %s", err, m.ResourceVersion, cm.ResourceVersion)
	}
	if err := r.srv.Delete(ctx, cm.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	r.drop(cm)
	r.deliver(deletedAt(cm, "2"), true, metaForm)
	if m, err := metaGet(ctx, r, key); !apierrors.IsNotFound(err) {
		t.Errorf("metadata Get after its informer delivered the deletion = %v at %s, want NotFound", err, m.ResourceVersion)
	}
	got := &corev1.ConfigMap{}
	if err := r.c.Get(ctx, key, got); !apierrors.IsNotFound(err) {
		t.Errorf("typed Get after the metadata informer delivered the deletion = %v at %s, want NotFound", err, got.ResourceVersion)
	}
}
