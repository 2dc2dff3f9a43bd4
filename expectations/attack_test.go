package expectations_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// attackCM is default/name, labelled app=x, not yet created.
func attackCM(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{"app": "x"}},
		Data: map[string]string{"v": "0"}}
}

// listed returns the names c lists in default with opts.
func listed(t *testing.T, r *rig, opts ...client.ListOption) ([]string, error) {
	t.Helper()
	var l corev1.ConfigMapList
	if err := r.c.List(t.Context(), &l, append(opts, client.InNamespace("default"))...); err != nil {
		return nil, err
	}
	var names []string
	for _, cm := range l.Items {
		names = append(names, cm.Name+"@"+cm.ResourceVersion)
	}
	return names, nil
}

// createdAndUpdated creates cm through the Client, then updates it through
// the Client: the cache shows the create, not the update.
func createdAndUpdated(t *testing.T, r *rig, cm *corev1.ConfigMap) {
	t.Helper()
	if err := r.c.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	r.show(cm)
	if err := r.c.Get(t.Context(), client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); err != nil {
		t.Fatal(err) // the Client reads the typed form: its informer is known
	}
	cm.Data["v"] = "1"
	if err := r.c.Update(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
}

// TestAttack1AnotherWritersDeletionIsSeen (issue 35, 1) proves that another
// writer's deletion of an object this Client wrote is served as NotFound by
// Get and left out of List as soon as the cache has delivered it (by the
// informer's delete event, or by a cache read of a newer version in the
// namespace), not the Client's own write until the TTL; and that an Update
// or Patch answered 404 ends what the Client kept.
func TestAttack1AnotherWritersDeletionIsSeen(t *testing.T) {
	gone := func(t *testing.T, r *rig, cm *corev1.ConfigMap) {
		t.Helper()
		got := &corev1.ConfigMap{}
		if err := r.c.Get(t.Context(), client.ObjectKeyFromObject(cm), got); !apierrors.IsNotFound(err) {
			t.Errorf("Get after another writer's deletion was delivered = %v (%s at %s), want NotFound", err, got.Name, got.ResourceVersion)
		}
		if names, err := listed(t, r, client.MatchingLabels{"app": "x"}); err != nil || len(names) != 0 {
			t.Errorf("List after the deletion was delivered = %v, %v; want nothing", names, err)
		}
	}
	t.Run("delete event", func(t *testing.T) {
		// Broken by: making the informer's DeleteFunc in (*Client).watch (rule.go) a no-op, fails with: Get after another writer's deletion was delivered = <nil> (gone at 2), want NotFound; List = [gone@2]
		r := newRig(t, rigOptions{})
		cm := attackCM("gone")
		createdAndUpdated(t, r, cm)
		if err := r.srv.Delete(t.Context(), cm.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		r.drop(cm)
		last := cm.DeepCopy()
		last.ResourceVersion = "3" // the deletion's version
		r.deliver(last, true)
		gone(t, r, cm)
	})
	t.Run("newer version read in the namespace", func(t *testing.T) {
		// Broken by: removing c.marks.raise(...) on the no-entry path of (*Client).Get (client.go), fails with: Get after another writer's deletion was delivered = <nil> (gone at 2), want NotFound; List = [gone@2]
		r := newRig(t, rigOptions{noCache: true})
		cm := attackCM("gone")
		createdAndUpdated(t, r, cm)
		if err := r.srv.Delete(t.Context(), cm.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		r.drop(cm)
		other := attackCM("other")
		other.Labels = nil // not in the Lists
		if err := r.srv.Create(t.Context(), other); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			other.Data["v"] = strconv.Itoa(i + 1)
			if err := r.srv.Update(t.Context(), other); err != nil {
				t.Fatal(err)
			}
		}
		r.show(other) // at 3, after the deletion of gone at 2
		if err := r.c.Get(t.Context(), client.ObjectKeyFromObject(other), &corev1.ConfigMap{}); err != nil {
			t.Fatal(err)
		}
		gone(t, r, cm)
	})
	for verb, write := range map[string]func(ctx context.Context, r *rig, cm *corev1.ConfigMap) error{
		"Update": func(ctx context.Context, r *rig, cm *corev1.ConfigMap) error { return r.c.Update(ctx, cm) },
		"Patch": func(ctx context.Context, r *rig, cm *corev1.ConfigMap) error {
			return r.c.Patch(ctx, cm, client.RawPatch("application/merge-patch+json", []byte(`{"data":{"v":"9"}}`)))
		},
	} {
		t.Run(verb+" answered 404", func(t *testing.T) {
			// Broken by: commenting out `_ = c.settle(ctx, verb, obj)` on the NotFound path of (*Client).finishWrite (client.go), fails with: Get after a write answered 404 = <nil> (at 1), want NotFound (Update and Patch)
			r := newRig(t, rigOptions{})
			cm := attackCM("gone")
			if err := r.c.Create(t.Context(), cm); err != nil {
				t.Fatal(err)
			}
			r.show(cm) // the create delivered; the deletion below is not
			if err := r.srv.Delete(t.Context(), cm.DeepCopy()); err != nil {
				t.Fatal(err)
			}
			if err := write(t.Context(), r, cm.DeepCopy()); !apierrors.IsNotFound(err) {
				t.Fatalf("%s of a deleted object = %v, want NotFound", verb, err)
			}
			for range 2 {
				got := &corev1.ConfigMap{}
				if err := r.c.Get(t.Context(), client.ObjectKeyFromObject(cm), got); !apierrors.IsNotFound(err) {
					t.Fatalf("Get after a write answered 404 = %v (at %s), want NotFound", err, got.ResourceVersion)
				}
			}
		})
	}
}

// TestAttack2TheFinalizerDoesNotComeBack (issue 35, 2) proves that a
// finalizer removal sent by Patch without optimistic lock (client.MergeFrom)
// from a copy older than the deletion, which deletes the object, is not
// followed by a Get or List serving the cache's copy that still has the
// finalizer: NotFound (or a refusal) while the cache lags.
func TestAttack2TheFinalizerDoesNotComeBack(t *testing.T) {
	const fin = "example.com/cleanup"
	// Broken by: `&& false` on the terminating-answer test of (*Client).recordWrite (`obj.GetDeletionTimestamp() != nil && len(obj.GetFinalizers()) == 0 && verb != "settle"`), fails with: Get after the release = <nil>, at 3 (finalizers []); want NotFound or ErrStale; List = [item@3]
	// The fake answers, as the API server does, with the object
	// terminating without finalizers, and deletes it.
	r := newRig(t, rigOptions{})
	ctx := t.Context()
	cm := attackCM("item")
	cm.Finalizers = []string{fin}
	if err := r.srv.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	old := cm.DeepCopy() // the controller's copy, from before the deletion
	if err := r.srv.Delete(ctx, cm.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if deleting := r.showServer(cm); deleting.GetDeletionTimestamp() == nil {
		t.Fatal("the server did not mark the object deleting")
	}
	released := old.DeepCopy()
	controllerutil.RemoveFinalizer(released, fin)
	if err := r.c.Patch(ctx, released, client.MergeFrom(old)); err != nil {
		t.Fatalf("release = %v", err)
	}
	if err := r.srv.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the server after the release: %v, want NotFound", err)
	}
	got := &corev1.ConfigMap{}
	if err := r.c.Get(ctx, client.ObjectKeyFromObject(cm), got); !apierrors.IsNotFound(err) && !isStale(err) {
		t.Errorf("Get after the release = %v, at %s (finalizers %v); want NotFound or ErrStale", err, got.ResourceVersion, got.Finalizers)
	}
	if names, err := listed(t, r); (err == nil && len(names) != 0) || (err != nil && !isStale(err)) {
		t.Errorf("List after the release = %v, %v; want nothing or ErrStale", names, err)
	}
}

// TestAttack4DeleteWithAnOlderCopyIsNotLost (issue 35, 4) proves that a
// Delete sent with a copy older than the Client's last write of the object
// (patched since) is kept: Get and List say NotFound, not the patched copy.
func TestAttack4DeleteWithAnOlderCopyIsNotLost(t *testing.T) {
	// Broken by: making (*Client).newestKnown (client_readback.go) return obj's resourceVersion only (the entry's not compared), fails with: Get after the Delete = <nil> (v=1 at 2), want NotFound; List = [item@2]
	r := newRig(t, rigOptions{})
	ctx := t.Context()
	cm := attackCM("item")
	if err := r.c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	r.show(cm)
	orig := cm.DeepCopy()
	patched := cm.DeepCopy()
	patched.Data["v"] = "1"
	if err := r.c.Patch(ctx, patched, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	if err := r.c.Delete(ctx, orig); err != nil {
		t.Fatal(err)
	}
	got := &corev1.ConfigMap{}
	if err := r.c.Get(ctx, client.ObjectKeyFromObject(cm), got); !apierrors.IsNotFound(err) {
		t.Errorf("Get after the Delete = %v (v=%s at %s), want NotFound", err, got.Data["v"], got.ResourceVersion)
	}
	if names, err := listed(t, r); err != nil || len(names) != 0 {
		t.Errorf("List after the Delete = %v, %v; want nothing", names, err)
	}
}

// TestAttack5ListLeavesOutAnObjectRelabelledOut (issue 35, 5) proves that a
// List by label leaves out an object another writer relabelled out of the
// selector once the cache shows the relabel, although the Client's own
// older write of it had the label.
func TestAttack5ListLeavesOutAnObjectRelabelledOut(t *testing.T) {
	// Broken by: dropping `&& sel.Matches(labels.Set(cached.GetLabels()))` from the serveCache case of List's loop over entries it did not list (client.go), fails with: List app=x after another writer relabelled it app=y = [item@3], want nothing
	r := newRig(t, rigOptions{})
	ctx := t.Context()
	cm := attackCM("item")
	createdAndUpdated(t, r, cm) // app=x at 2, the cache at 1
	theirs := &corev1.ConfigMap{}
	if err := r.srv.Get(ctx, client.ObjectKeyFromObject(cm), theirs); err != nil {
		t.Fatal(err)
	}
	theirs.Labels = map[string]string{"app": "y"}
	if err := r.srv.Update(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	r.show(theirs)
	if names, err := listed(t, r, client.MatchingLabels{"app": "x"}); err != nil || len(names) != 0 {
		t.Errorf("List app=x after another writer relabelled it app=y = %v, %v; want nothing", names, err)
	}
}

// TestAttack6NoOpWriteToATerminatingPodIsNotADeletion (issue 35, 6) proves
// that a write answered with a Pod in its grace period (deletionTimestamp,
// no finalizers), here a no-op Update, is not kept as a deletion: Get serves
// the Pod while the server has it.
func TestAttack6NoOpWriteToATerminatingPodIsNotADeletion(t *testing.T) {
	// Broken by: `return c.recordDeletion(ctx, obj, "")` instead of `return c.settle(ctx, verb, obj)` for a terminating answer in (*Client).recordWrite, fails with: Get of the terminating pod after a no-op Update = Pod "graceful" not found (terminating false), want the pod
	now := metav1.Now()
	grace := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "graceful", UID: "p1", ResourceVersion: "5", DeletionTimestamp: &now}}
	key := client.ObjectKeyFromObject(grace)
	// The fake cannot hold a terminating object without finalizers: the
	// server's Pod is served here, and an Update of it is a no-op.
	r := newRig(t, rigOptions{server: interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if p, ok := obj.(*corev1.Pod); ok && k == key {
				*p = *grace.DeepCopy()
				return nil
			}
			return c.Get(ctx, k, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if p, ok := obj.(*corev1.Pod); ok && client.ObjectKeyFromObject(p) == key {
				*p = *grace.DeepCopy()
				return nil
			}
			return c.Update(ctx, obj, opts...)
		},
	}})
	ctx := t.Context()
	r.show(grace)
	p := &corev1.Pod{}
	if err := r.c.Get(ctx, key, p); err != nil {
		t.Fatal(err)
	}
	if err := r.c.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	got := &corev1.Pod{}
	if err := r.c.Get(ctx, key, got); err != nil || got.DeletionTimestamp == nil {
		t.Errorf("Get of the terminating pod after a no-op Update = %v (terminating %t), want the pod", err, got.DeletionTimestamp != nil)
	}
}

// TestAttack7OrphanDeleteIsNotServedAsGone (issue 35, 7) proves that a
// Delete with Orphan propagation, which the server answers by adding the
// orphan finalizer and keeping the object, is not served as NotFound while
// the object exists.
func TestAttack7OrphanDeleteIsNotServedAsGone(t *testing.T) {
	// Broken by: `c.recordDeletion(ctx, obj, "")` instead of `c.settle(ctx, "delete", obj)` in (*Client).Delete (the deletion recorded whatever the server has), fails with: Get after an orphan Delete = ConfigMap "item" not found (terminating false), want the object, terminating; List = []
	r := newRig(t, rigOptions{server: interceptor.Funcs{
		// The fake does not implement propagation: as the API server does,
		// an orphan deletion adds the orphan finalizer first.
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			do := (&client.DeleteOptions{}).ApplyOptions(opts)
			if do.PropagationPolicy != nil && *do.PropagationPolicy == metav1.DeletePropagationOrphan {
				cur := &corev1.ConfigMap{}
				if err := c.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
					return err
				}
				cur.Finalizers = append(cur.Finalizers, metav1.FinalizerOrphanDependents)
				if err := c.Update(ctx, cur); err != nil {
					return err
				}
			}
			return c.Delete(ctx, obj, opts...)
		},
	}})
	ctx := t.Context()
	cm := attackCM("item")
	if err := r.c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	r.show(cm)
	if err := r.c.Delete(ctx, cm, client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
		t.Fatal(err)
	}
	if err := r.srv.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); err != nil {
		t.Fatalf("the server after an orphan Delete: %v, want the object", err)
	}
	got := &corev1.ConfigMap{}
	if err := r.c.Get(ctx, client.ObjectKeyFromObject(cm), got); err != nil || got.DeletionTimestamp == nil {
		t.Errorf("Get after an orphan Delete = %v (terminating %t), want the object, terminating", err, got.DeletionTimestamp != nil)
	}
	if names, err := listed(t, r); err != nil || len(names) != 1 {
		t.Errorf("List after an orphan Delete = %v, %v; want the object", names, err)
	}
}

// TestAttack8MonotonicAcrossForms (issue 35, 8) proves that once a typed Get
// has served another writer's version newer than the Client's write, a
// metadata-only Get and an unstructured Get, whose caches lag, serve that
// version, not the Client's older write.
func TestAttack8MonotonicAcrossForms(t *testing.T) {
	// Broken by: making (*Client).adopt (client.go) only `c.caughtUp(sk, e, f); return`, fails with: metadata Get after the typed Get served 3 = <nil> at 2, want 3 (unstructured likewise)
	r := newRig(t, rigOptions{})
	ctx := t.Context()
	cm := attackCM("item")
	createdAndUpdated(t, r, cm) // ours at 2; every form's cache at 1
	theirs := &corev1.ConfigMap{}
	if err := r.srv.Get(ctx, client.ObjectKeyFromObject(cm), theirs); err != nil {
		t.Fatal(err)
	}
	theirs.Data["v"] = "theirs"
	if err := r.srv.Update(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	r.show(theirs, typedForm)
	typed := &corev1.ConfigMap{}
	if err := r.c.Get(ctx, client.ObjectKeyFromObject(cm), typed); err != nil || typed.ResourceVersion != theirs.ResourceVersion {
		t.Fatalf("typed Get = %v at %s, want the cache's %s", err, typed.ResourceVersion, theirs.ResourceVersion)
	}
	gvk := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	md := &metav1.PartialObjectMetadata{}
	md.SetGroupVersionKind(gvk)
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	for name, obj := range map[string]client.Object{"metadata": md, "unstructured": u} {
		if err := r.c.Get(ctx, client.ObjectKeyFromObject(cm), obj); err != nil || obj.GetResourceVersion() != theirs.ResourceVersion {
			t.Errorf("%s Get after the typed Get served %s = %v at %s, want %s", name, theirs.ResourceVersion, err, obj.GetResourceVersion(), theirs.ResourceVersion)
		}
	}
}

// failingReader is an API reader that is down: its first calls fail at
// once, and once hang is set they wait for their context.
type failingReader struct {
	hang  atomic.Bool
	calls atomic.Int64
}

func (f *failingReader) wait(ctx context.Context) error {
	f.calls.Add(1)
	if !f.hang.Load() {
		return apierrors.NewServiceUnavailable("down")
	}
	<-ctx.Done()
	return ctx.Err()
}

func (f *failingReader) Get(ctx context.Context, _ client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	return f.wait(ctx)
}

func (f *failingReader) List(ctx context.Context, _ client.ObjectList, _ ...client.ListOption) error {
	return f.wait(ctx)
}

// TestAttack9GetHonoursTheCallersDeadline (issue 35, 9) proves that a Get
// of an object whose ambiguous write is unresolved (the read back failed:
// the API reader is down) returns within the caller's deadline, not after
// the read back's own 10 s.
func TestAttack9GetHonoursTheCallersDeadline(t *testing.T) {
	// Broken by: the read back's context detached from the caller's (readBackContext always context.WithoutCancel, as before the fix), fails with: Get with a 200ms deadline took 10.007s, want about 200ms
	apiReader := &failingReader{}
	r := newRig(t, rigOptions{apiReader: apiReader, server: interceptor.Funcs{
		Update: func(context.Context, client.WithWatch, client.Object, ...client.UpdateOption) error {
			return apierrors.NewInternalError(errors.New("answer lost"))
		},
	}})
	ctx := t.Context()
	cm := attackCM("item")
	if err := r.c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	r.show(cm)
	cm.Data["v"] = "1"
	if err := r.c.Update(ctx, cm); !apierrors.IsInternalError(err) {
		t.Fatalf("Update = %v, want the injected 500", err)
	}
	if apiReader.calls.Load() == 0 {
		t.Fatal("the ambiguous Update was not read back")
	}
	apiReader.hang.Store(true)
	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := r.c.Get(dctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Get with a 200ms deadline took %v (%v), want about 200ms", took.Round(time.Millisecond), err)
	}
	if err == nil {
		t.Errorf("Get of an unresolved ambiguous write served the cache's copy")
	}
}

// TestAttack12FakeServerWritesAreAnswered (issue 35, 12) proves that, with a
// controller-runtime fake client as the server, a Delete by key (no
// resourceVersion) is followed by NotFound (the object gone) or the
// server's object (a finalizer keeps it), not by ErrStale until the cache
// shows it; and that a scale Update answered without a resourceVersion is
// not reported as failed (NotRecordedError).
func TestAttack12FakeServerWritesAreAnswered(t *testing.T) {
	for name, finalizers := range map[string][]string{"gone": nil, "kept by a finalizer": {"example.com/keep"}} {
		t.Run("delete by key/"+name, func(t *testing.T) {
			// Broken by (kept by a finalizer): `c.recordDeletion(ctx, obj, "")` instead of `c.settle(ctx, "delete", obj)` in (*Client).Delete, fails with: Get after a Delete by key that a finalizer holds = stale cache read: ConfigMap default/item was deleted at resourceVersion  but the cache still shows it at 1, want the server's object
			// Broken by (gone): readLive without the cache's version (cachedVersion) where nothing else tells one, fails with: Get after a Delete by key = stale cache read: ConfigMap default/item was deleted at resourceVersion  but the cache still shows it at 1, want NotFound; List = ListStaleError
			r := newRig(t, rigOptions{})
			ctx := t.Context()
			cm := attackCM("item")
			cm.Finalizers = finalizers
			if err := r.srv.Create(ctx, cm); err != nil {
				t.Fatal(err)
			}
			r.show(cm)
			key := client.ObjectKeyFromObject(cm)
			if err := r.c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}); err != nil {
				t.Fatal(err)
			}
			got := &corev1.ConfigMap{}
			err := r.c.Get(ctx, key, got)
			names, lerr := listed(t, r)
			if finalizers == nil {
				if !apierrors.IsNotFound(err) {
					t.Errorf("Get after a Delete by key = %v (at %s), want NotFound", err, got.ResourceVersion)
				}
				if lerr != nil || len(names) != 0 {
					t.Errorf("List after a Delete by key = %v, %v; want nothing", names, lerr)
				}
				return
			}
			if err != nil || got.DeletionTimestamp == nil {
				t.Errorf("Get after a Delete by key that a finalizer holds = %v (terminating %t), want the server's object", err, got.DeletionTimestamp != nil)
			}
			if lerr != nil || len(names) != 1 {
				t.Errorf("List after a Delete by key that a finalizer holds = %v, %v; want the object", names, lerr)
			}
		})
	}
	t.Run("scale answered without a resourceVersion", func(t *testing.T) {
		// Broken by: returning &NotRecordedError{Verb: verb, Key: key, Err: ErrInvalidResourceVersion} instead of s.c.settle(ctx, verb, obj) for a body without a version in (*subResourceClient).record (client.go), fails with: scale Update = subresource_update default/web: write succeeded but was not recorded: invalid resourceVersion, want nil
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}}
		r := newRig(t, rigOptions{objs: []client.Object{dep}, server: interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				err := c.SubResource(sub).Update(ctx, obj, opts...)
				if body := (&client.SubResourceUpdateOptions{}).ApplyOptions(opts).SubResourceBody; body != nil {
					body.SetResourceVersion("") // answered without one
				}
				return err
			},
		}})
		ctx := t.Context()
		seen := r.showServer(dep).(*appsv1.Deployment)
		scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 3}}
		if err := r.c.SubResource("scale").Update(ctx, seen, client.WithSubResourceBody(scale)); err != nil {
			t.Fatalf("scale Update = %v, want nil: the server acknowledged it", err)
		}
		got := &appsv1.Deployment{}
		if err := r.c.Get(ctx, client.ObjectKeyFromObject(dep), got); err != nil || got.Spec.Replicas == nil || *got.Spec.Replicas != 3 {
			t.Errorf("Get after the scale Update = %v, replicas %v; want 3", err, got.Spec.Replicas)
		}
	})
}

// TestDeleteEventOfAnotherIncarnationIsNotTheClients: another writer
// replaced the object (incarnation a deleted, b created); the Client then
// deleted b, while its cache still showed a. The cache's delete event of a
// is not b's deletion: when the cache then delivers b's create, older than
// the Client's deletion, a Get must answer NotFound, not b.
func TestDeleteEventOfAnotherIncarnationIsNotTheClients(t *testing.T) {
	// Broken by: letting any delete event of the name catch a deletion up
	// in (*Client).delivered (rule.go), fails with: Get once the cache
	// delivers b's create = <nil> (b at 1), want NotFound.
	a := attackCM("item")
	a.UID = "a"
	b := attackCM("item")
	b.UID = "b"
	r := newRig(t, rigOptions{})
	ctx := t.Context()
	if err := r.srv.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	a.ResourceVersion = b.ResourceVersion // any older version: the fake numbers from 1
	r.show(a)                             // the cache still shows the old incarnation
	if err := r.c.Delete(ctx, b.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(b)
	got := &corev1.ConfigMap{}
	if err := r.c.Get(ctx, key, got); !apierrors.IsNotFound(err) {
		t.Fatalf("Get after the Delete = %v (%s at %s), want NotFound", err, got.UID, got.ResourceVersion)
	}
	r.drop(a)
	r.deliver(a, true)
	r.show(b)
	if err := r.c.Get(ctx, key, got); !apierrors.IsNotFound(err) {
		t.Errorf("Get once the cache delivers b's create = %v (%s at %s), want NotFound", err, got.UID, got.ResourceVersion)
	}
}

// TestDeletionSeenInOneFormEndsTheWriteInEvery (the history checker's
// seed 152): the Client created an object and read it in the metadata
// form only; another writer deleted it, and the metadata informer
// delivered the deletion. A typed read, the first of that form, must not
// serve the Client's create: the typed informer had delivered the deletion
// before the Client's handler was on it.
func TestDeletionSeenInOneFormEndsTheWriteInEvery(t *testing.T) {
	// Broken by: catching up only form f in (*Client).delivered (rule.go)
	// instead of deletedSince, fails with: typed List = [item@1], <nil>;
	// want nothing.
	r := newRig(t, rigOptions{})
	ctx := t.Context()
	cm := attackCM("item")
	cm.UID = "u1"
	if err := r.c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(cm)
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	if err := r.c.Get(ctx, key, meta); err != nil {
		t.Fatal(err) // the metadata form is read: its handler is on
	}
	if err := r.srv.Delete(ctx, cm.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	r.drop(cm)
	r.deliver(cm, true)
	got := &corev1.ConfigMap{}
	if err := r.c.Get(ctx, key, got); !apierrors.IsNotFound(err) {
		t.Errorf("typed Get after the metadata informer delivered the deletion = %v (at %s), want NotFound", err, got.ResourceVersion)
	}
	if names, err := listed(t, r); err != nil || len(names) != 0 {
		t.Errorf("typed List = %v, %v; want nothing", names, err)
	}
}
