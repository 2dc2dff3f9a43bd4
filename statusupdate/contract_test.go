package statusupdate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/racesafe/racesafe/statusupdate"
)

// mutateFailure is an error type of the caller's own, which errors.As must
// still find through the Patcher's wrapping.
type mutateFailure struct{ attempt int32 }

func (e *mutateFailure) Error() string { return fmt.Sprintf("mutate gave up on attempt %d", e.attempt) }

// A mutate error ends the call: nothing more is sent, not even when the error
// is itself a 409, and the error returned is the mutate's own.
func TestPatchMutateErrorEndsCall(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "p", errors.New("from mutate"))

	t.Run("conflict from mutate on the first attempt", func(t *testing.T) {
		h := newHarness(t, testPod("p"))
		obj := h.stored(t, testPod("p"))
		var calls atomic.Int32
		p := statusupdate.New[*corev1.Pod](h.writer, h.live, statusupdate.Options{Backoff: fastRetry})
		_, err := p.PatchStatus(t.Context(), obj, func(pod *corev1.Pod) error {
			calls.Add(1)
			pod.Status.Phase = corev1.PodFailed
			return conflict
		})
		h.wantCounts(t, 0, 0, 0, 0)
		if n := calls.Load(); n != 1 {
			t.Errorf("mutate ran %d times, want 1", n)
		}
		var cerr *statusupdate.ConflictError
		if errors.As(err, &cerr) {
			t.Errorf("error is ConflictError{Attempts: %d} after 0 patches sent: %v", cerr.Attempts, err)
		}
		var serr *apierrors.StatusError
		if !errors.As(err, &serr) || serr != conflict {
			t.Errorf("error %v does not wrap the mutate's own error", err)
		}
	})

	t.Run("error from mutate after a real conflict", func(t *testing.T) {
		h := newHarness(t, testPod("p"))
		obj := h.stored(t, testPod("p"))
		h.beforeWrite = func(int32, client.Object) error {
			return apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "p", errors.New("injected"))
		}
		var calls atomic.Int32
		p := statusupdate.New[*corev1.Pod](h.writer, h.live, statusupdate.Options{Backoff: fastRetry})
		_, err := p.PatchStatus(t.Context(), obj, func(pod *corev1.Pod) error {
			if n := calls.Add(1); n == 2 {
				return &mutateFailure{attempt: n}
			}
			pod.Status.Phase = corev1.PodRunning
			return nil
		})
		h.wantCounts(t, 0, 1, 1, 0)
		var mf *mutateFailure
		if !errors.As(err, &mf) || mf.attempt != 2 {
			t.Errorf("error %v: errors.As does not find the mutate's *mutateFailure", err)
		}
		if errors.Is(err, statusupdate.ErrConflictRetriesExhausted) {
			t.Errorf("error %v claims the conflict retries were spent", err)
		}
	})
}

// ConflictError.Attempts is the number of patches the server answered 409.
func TestConflictErrorAttemptsArePatchesSent(t *testing.T) {
	for _, steps := range []int{1, 2, 4} {
		for _, target := range []string{"status", "object"} {
			t.Run(fmt.Sprintf("%s/%d steps", target, steps), func(t *testing.T) {
				h := newHarness(t, testPod("p"))
				obj := h.stored(t, testPod("p"))
				conflict := func() error {
					return apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "p", errors.New("injected"))
				}
				h.beforeWrite = func(int32, client.Object) error { return conflict() }
				h.patchObject = func(context.Context, client.WithWatch, client.Object, client.Patch) error { return conflict() }
				p := statusupdate.New[*corev1.Pod](h.writer, h.live, statusupdate.Options{
					Backoff: wait.Backoff{Steps: steps, Duration: time.Millisecond, Factor: 1},
				})
				call := p.Patch
				if target == "object" {
					call = p.PatchObject
				}
				_, err := call(t.Context(), obj, func(pod *corev1.Pod) error {
					pod.Labels = map[string]string{"a": "b"}
					pod.Status.Phase = corev1.PodRunning
					return nil
				})
				var cerr *statusupdate.ConflictError
				if !errors.As(err, &cerr) {
					t.Fatalf("error %v, want a *ConflictError", err)
				}
				sent := h.counts.statusPatches.Load() + h.counts.objectPatches.Load()
				if int32(cerr.Attempts) != sent || sent != int32(steps) {
					t.Errorf("ConflictError.Attempts = %d, patches sent %d, want both %d", cerr.Attempts, sent, steps)
				}
			})
		}
	}
}

// After a conflict, the live object read from the API server is recorded
// before mutate runs on it, so a cache copy older than it counts as stale.
func TestPatchRecordsLiveReadAfterConflict(t *testing.T) {
	h := newHarness(t, testPod("p"))
	obj := h.stored(t, testPod("p"))
	var liveRV string
	h.beforeWrite = func(n int32, _ client.Object) error {
		if n != 1 {
			return nil
		}
		other := h.stored(t, obj)
		other.Status.Message = "theirs"
		if err := h.direct.Status().Update(t.Context(), other); err != nil {
			return err
		}
		liveRV = other.ResourceVersion
		return nil // the fake now answers 409 to the stale precondition
	}
	rec := &recorder{}
	p := statusupdate.New[*corev1.Pod](h.writer, h.live, statusupdate.Options{Backoff: fastRetry, Expectations: rec})
	got, err := p.PatchStatus(t.Context(), obj, func(pod *corev1.Pod) error {
		rec.note("mutate " + pod.ResourceVersion)
		pod.Status.Phase = corev1.PodRunning
		return nil
	})
	if err != nil {
		t.Fatalf("Patch: %v", err)
	}
	h.wantCounts(t, 0, 1, 2, 0)
	want := []string{
		"mutate " + obj.ResourceVersion,
		"ExpectWrite " + liveRV,
		"mutate " + liveRV,
		"ExpectWrite " + got.ResourceVersion,
	}
	if diff := cmp.Diff(want, rec.calls); diff != "" {
		t.Errorf("recorder calls and mutate runs (-want +got):\n%s", diff)
	}
}

// livingAnswer answers an object PATCH as the API server does for a Pod in
// graceful deletion whose last finalizer goes: the Pod lives on, with a new
// resourceVersion, until the kubelet deletes it.
func livingAnswer(ctx context.Context, c client.WithWatch, obj client.Object, _ client.Patch) error {
	var pod corev1.Pod
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), &pod); err != nil {
		return err
	}
	pod.Finalizers = nil
	pod.ResourceVersion = "5000"
	pod.DeepCopyInto(obj.(*corev1.Pod))
	return nil
}

// removedAnswer answers an object PATCH as the API server does when it
// removes the object: the object as sent, at the resourceVersion it was sent
// with.
func removedAnswer(ctx context.Context, c client.WithWatch, obj client.Object, _ client.Patch) error {
	var pod corev1.Pod
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), &pod); err != nil {
		return err
	}
	pod.Finalizers = nil
	if err := c.Update(ctx, pod.DeepCopy()); err != nil { // the fake deletes it
		return err
	}
	pod.DeepCopyInto(obj.(*corev1.Pod))
	return nil
}

// ExpectDeletion is recorded only when the server's answer shows the object
// was removed; otherwise the write is an ordinary ExpectWrite.
func TestPatchObjectExpectsDeletionOnlyWhenRemoved(t *testing.T) {
	type answer func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch) error
	for _, tc := range []struct {
		name   string
		noLock bool
		ahead  bool   // the stored object moved on after the caller's read
		answer answer // nil: the fake's own, which deletes and bumps the resourceVersion
		want   string // recorder method
		live   int32  // live GETs
	}{
		{name: "removed at the sent resourceVersion", answer: removedAnswer, want: "ExpectDeletion"},
		{name: "removed at the sent resourceVersion, no lock", noLock: true, answer: removedAnswer, want: "ExpectDeletion"},
		{name: "removed, new resourceVersion", want: "ExpectDeletion", live: 1},
		{name: "removed, no lock, server ahead", noLock: true, ahead: true, want: "ExpectDeletion", live: 1},
		{name: "lives on", answer: livingAnswer, want: "ExpectWrite", live: 1},
		{name: "lives on, no lock", noLock: true, answer: livingAnswer, want: "ExpectWrite", live: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod("p")
			pod.Finalizers = []string{"example.com/hold"}
			pod.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			h := newHarness(t, pod)
			obj := h.stored(t, pod)
			if tc.ahead {
				other := obj.DeepCopy()
				other.Labels = map[string]string{"moved": "on"}
				if err := h.direct.Update(t.Context(), other); err != nil {
					t.Fatal(err)
				}
			}
			h.patchObject = tc.answer
			rec := &recorder{}
			p := statusupdate.New[*corev1.Pod](h.writer, h.live, statusupdate.Options{
				Expectations: rec, DisableOptimisticLock: tc.noLock,
			})
			got, err := p.PatchObject(t.Context(), obj, func(p *corev1.Pod) error {
				p.Finalizers = nil
				return nil
			})
			if err != nil {
				t.Fatalf("PatchObject: %v", err)
			}
			h.wantCounts(t, 0, tc.live, 0, 1)
			if diff := cmp.Diff([]string{tc.want + " " + got.ResourceVersion}, rec.calls); diff != "" {
				t.Errorf("recorder calls (-want +got):\n%s", diff)
			}
		})
	}
}

// A status patch on a kind without a status subresource answers NotFound
// although the object exists; the Patcher reports the missing subresource.
func TestPatchOnKindWithoutStatusSubresource(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "default"}}
	h := newHarness(t, cm) // the fake gives ConfigMap no status subresource
	var held corev1.ConfigMap
	if err := h.direct.Get(t.Context(), client.ObjectKeyFromObject(cm), &held); err != nil {
		t.Fatal(err)
	}
	p := statusupdate.New[*corev1.ConfigMap](h.writer, h.live, statusupdate.Options{})
	_, err := p.PatchStatus(t.Context(), &held, func(cm *corev1.ConfigMap) error {
		cm.Data = map[string]string{"k": "v"}
		return nil
	})
	wantSubresourceError(t, err, statusupdate.SubresourceError{
		Key:              client.ObjectKeyFromObject(cm),
		GroupVersionKind: corev1.SchemeGroupVersion.WithKind("ConfigMap"),
		Subresource:      "status",
	})
	h.wantCounts(t, 0, 1, 1, 0)
}

// wantSubresourceError fails t unless err reports the missing subresource
// of want: not as NotFound, which client.IgnoreNotFound would drop, but as
// a *SubresourceError equal to want and matching ErrNoStatusSubresource.
func wantSubresourceError(t *testing.T, err error, want statusupdate.SubresourceError) {
	t.Helper()
	if apierrors.IsNotFound(err) || client.IgnoreNotFound(err) == nil {
		t.Fatalf("error %v is NotFound: client.IgnoreNotFound would drop the write", err)
	}
	var serr *statusupdate.SubresourceError
	if !errors.As(err, &serr) || !errors.Is(err, statusupdate.ErrNoStatusSubresource) {
		t.Fatalf("error %v (%T), want a *SubresourceError matching ErrNoStatusSubresource", err, err)
	}
	if *serr != want {
		t.Errorf("SubresourceError %+v, want %+v", *serr, want)
	}
}

// A NotFound for an object that is gone, or was replaced by another of the
// same name, stays NotFound.
func TestPatchNotFoundForGoneObject(t *testing.T) {
	pod := testPod("p")
	pod.UID = "first"
	h := newHarness(t, pod)
	obj := h.stored(t, pod)
	h.beforeWrite = func(int32, client.Object) error {
		if err := h.direct.Delete(t.Context(), testPod("p")); err != nil {
			return err
		}
		again := testPod("p")
		again.UID = "second"
		if err := h.direct.Create(t.Context(), again); err != nil {
			return err
		}
		return apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "p")
	}
	p := statusupdate.New[*corev1.Pod](h.writer, h.live, statusupdate.Options{})
	_, err := p.PatchStatus(t.Context(), obj, setPhase(corev1.PodRunning))
	if !apierrors.IsNotFound(err) || errors.Is(err, statusupdate.ErrNoStatusSubresource) {
		t.Errorf("error %v, want NotFound: the object patched is gone", err)
	}
	h.wantCounts(t, 0, 1, 1, 0)
}

// Every input is an error, never a panic, and nothing is sent.
func TestPatchInvalidObjectIsAnError(t *testing.T) {
	h := newHarness(t, testPod("p"))
	holdsInt := unstructuredPod(t, h, "p")
	holdsInt.Object["spec"].(map[string]any)["priority"] = 7 // a Go int: DeepCopyObject panics on it
	unnamed := h.stored(t, testPod("p"))
	unnamed.Name = ""
	unnamedU := unstructuredPod(t, h, "p")
	unnamedU.SetName("")

	typed := statusupdate.New[*corev1.Pod](h.writer, h.live, statusupdate.Options{})
	u := statusupdate.New[*unstructured.Unstructured](h.writer, h.live, statusupdate.Options{})
	setLabel := func(u *unstructured.Unstructured) error { u.SetLabels(map[string]string{"a": "b"}); return nil }
	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"unstructured holding an int", func() error { _, err := u.Patch(t.Context(), holdsInt, setLabel); return err }, statusupdate.ErrInvalidObject},
		{"unstructured holding an int, object", func() error { _, err := u.PatchObject(t.Context(), holdsInt, setLabel); return err }, statusupdate.ErrInvalidObject},
		{"typed nil unstructured", func() error { _, err := u.Patch(t.Context(), nil, setLabel); return err }, statusupdate.ErrNilObject},
		{"no name", func() error { _, err := typed.Patch(t.Context(), unnamed, setPhase(corev1.PodRunning)); return err }, statusupdate.ErrNoName},
		{"no name, unstructured object", func() error { _, err := u.PatchObject(t.Context(), unnamedU, setLabel); return err }, statusupdate.ErrNoName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panic: %v", r)
					}
				}()
				err = tc.call()
			}()
			if !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
		})
	}
	h.wantCounts(t, 0, 0, 0, 0)
}

// failingReader is an API reader whose every Get fails with err.
func failingReader(h *harness, err error) client.Reader {
	return interceptor.NewClient(h.direct, interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			h.counts.liveGets.Add(1)
			return err
		},
	})
}

// When the read that tells a missing subresource from a missing object fails,
// the error is that read's, and still not NotFound.
func TestPatchSubresourceCheckFailureIsNotNotFound(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "default"}}
	h := newHarness(t, cm)
	var held corev1.ConfigMap
	if err := h.direct.Get(t.Context(), client.ObjectKeyFromObject(cm), &held); err != nil {
		t.Fatal(err)
	}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "cm", errors.New("injected"))
	p := statusupdate.New[*corev1.ConfigMap](h.writer, failingReader(h, forbidden), statusupdate.Options{})
	_, err := p.PatchStatus(t.Context(), &held, func(cm *corev1.ConfigMap) error {
		cm.Data = map[string]string{"k": "v"}
		return nil
	})
	if apierrors.IsNotFound(err) || client.IgnoreNotFound(err) == nil || !apierrors.IsForbidden(err) {
		t.Errorf("error %v: want the read's Forbidden, not NotFound", err)
	}
	h.wantCounts(t, 0, 1, 1, 0)
}

// A Recorder that refuses the live re-read ends the call before mutate runs
// again: nothing more is sent.
func TestPatchRecorderErrorOnLiveReadEndsCall(t *testing.T) {
	h := newHarness(t, testPod("p"))
	obj := h.stored(t, testPod("p"))
	h.beforeWrite = func(int32, client.Object) error {
		return apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "p", errors.New("injected"))
	}
	errFull := errors.New("tracker full")
	var calls atomic.Int32
	p := statusupdate.New[*corev1.Pod](h.writer, h.live, statusupdate.Options{Backoff: fastRetry, Expectations: &recorder{err: errFull}})
	got, err := p.PatchStatus(t.Context(), obj, func(pod *corev1.Pod) error {
		calls.Add(1)
		pod.Status.Phase = corev1.PodRunning
		return nil
	})
	if got != nil || !errors.Is(err, errFull) {
		t.Errorf("Patch = %v, %v; want nil and an error wrapping %v", got, err, errFull)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("mutate ran %d times, want 1", n)
	}
	h.wantCounts(t, 0, 1, 1, 0)
}

// When the read that tells whether the write removed the object fails, the
// write did happen: the written object comes back with the error, and nothing
// is recorded.
func TestPatchObjectDeletionCheckFailure(t *testing.T) {
	pod := testPod("p")
	pod.Finalizers = []string{"example.com/hold"}
	pod.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	h := newHarness(t, pod)
	obj := h.stored(t, pod)
	h.patchObject = livingAnswer
	unavailable := apierrors.NewServiceUnavailable("injected")
	rec := &recorder{}
	p := statusupdate.New[*corev1.Pod](h.writer, failingReader(h, unavailable), statusupdate.Options{Expectations: rec})
	got, err := p.PatchObject(t.Context(), obj, removeFinalizers[*corev1.Pod])
	if got == nil || got.ResourceVersion != "5000" || !errors.Is(err, unavailable) ||
		!strings.Contains(err.Error(), "written at resourceVersion 5000") {
		t.Errorf("PatchObject = %v, %v; want the written object and an error saying it was written", got, err)
	}
	if len(rec.calls) != 0 {
		t.Errorf("recorder calls %v, want none", rec.calls)
	}
	h.wantCounts(t, 0, 1, 0, 1)
}
