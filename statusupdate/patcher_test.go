package statusupdate_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/racesafe/racesafe/statusupdate"
)

// A client.Client, what a manager hands out, is a statusupdate.Client.
var _ statusupdate.Client = client.Client(nil)

// fastRetry keeps conflict tests fast; its shape is retry.DefaultRetry's.
var fastRetry = wait.Backoff{Steps: 5, Duration: time.Millisecond, Factor: 1, Jitter: 0.1}

// counts are the requests one harness saw. The cache and the API server are
// counted apart: the Patcher must never read the cache, and reads the API
// server only after a conflict.
type counts struct {
	cacheGets, liveGets, statusPatches, objectPatches atomic.Int32
}

func (c *counts) requests() int32 {
	return c.cacheGets.Load() + c.liveGets.Load() + c.statusPatches.Load() + c.objectPatches.Load()
}

// harness is a fake API server seen through three clients: writer (the
// manager's client; its Get stands for the cache), live (the manager's API
// reader) and direct (the test's own, uncounted, for setup and checks).
type harness struct {
	direct client.WithWatch
	writer client.WithWatch
	live   client.WithWatch
	counts counts

	mu          sync.Mutex
	statusBody  []string // patch bodies sent to the status subresource
	statusOpts  []client.SubResourcePatchOptions
	beforeWrite func(n int32, obj client.Object) error // runs before each status PATCH; an error replaces it
	// patchObject, when set, answers each object PATCH in place of the fake.
	patchObject func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch) error
}

func newHarness(t *testing.T, objs ...client.Object) *harness {
	t.Helper()
	h := &harness{}
	h.direct = fake.NewClientBuilder().
		WithScheme(scheme.Scheme).
		WithStatusSubresource(&corev1.Pod{}).
		WithObjects(objs...).
		Build()
	h.writer = interceptor.NewClient(h.direct, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			h.counts.cacheGets.Add(1)
			return c.Get(ctx, key, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			h.counts.objectPatches.Add(1)
			h.mu.Lock()
			answer := h.patchObject
			h.mu.Unlock()
			if answer != nil {
				return answer(ctx, c, obj, patch)
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			n := h.counts.statusPatches.Add(1)
			body, err := patch.Data(obj)
			if err != nil {
				return err
			}
			var o client.SubResourcePatchOptions
			o.ApplyOptions(opts)
			h.mu.Lock()
			h.statusBody = append(h.statusBody, string(body))
			h.statusOpts = append(h.statusOpts, o)
			before := h.beforeWrite
			h.mu.Unlock()
			if before != nil {
				if err := before(n, obj); err != nil {
					return err
				}
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	h.live = interceptor.NewClient(h.direct, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			h.counts.liveGets.Add(1)
			return c.Get(ctx, key, obj, opts...)
		},
	})
	return h
}

// get reads the stored object as the test's truth.
func (h *harness) get(t *testing.T, key client.ObjectKey) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	if err := h.direct.Get(t.Context(), key, &pod); err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return &pod
}

// stored returns the object as the fake holds it, as a caller would have read
// it: with the resourceVersion the server assigned.
func (h *harness) stored(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	return h.get(t, client.ObjectKeyFromObject(pod))
}

func (h *harness) wantCounts(t *testing.T, cache, live, status, object int32) {
	t.Helper()
	got := [4]int32{h.counts.cacheGets.Load(), h.counts.liveGets.Load(), h.counts.statusPatches.Load(), h.counts.objectPatches.Load()}
	want := [4]int32{cache, live, status, object}
	if got != want {
		t.Errorf("requests [cache GET, live GET, status PATCH, object PATCH] = %v, want %v", got, want)
	}
}

func testPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
}

// setCondition returns a mutate that sets one condition, leaving the others.
func setCondition(condType, message string) func(*corev1.Pod) error {
	return func(p *corev1.Pod) error {
		for i := range p.Status.Conditions {
			if string(p.Status.Conditions[i].Type) == condType {
				p.Status.Conditions[i].Status = corev1.ConditionTrue
				p.Status.Conditions[i].Message = message
				return nil
			}
		}
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
			Type: corev1.PodConditionType(condType), Status: corev1.ConditionTrue, Message: message,
		})
		return nil
	}
}

func condition(p *corev1.Pod, condType string) (corev1.PodCondition, bool) {
	for _, c := range p.Status.Conditions {
		if string(c.Type) == condType {
			return c, true
		}
	}
	return corev1.PodCondition{}, false
}

func setPhase(phase corev1.PodPhase) func(*corev1.Pod) error {
	return func(p *corev1.Pod) error {
		p.Status.Phase = phase
		return nil
	}
}

func TestPatchWritesOnceWithoutReading(t *testing.T) {
	h := newHarness(t, testPod("p"))
	obj := h.stored(t, testPod("p"))
	before := obj.DeepCopy()

	p := statusupdate.New[*corev1.Pod](h.writer, h.live, statusupdate.Options{Backoff: fastRetry})
	got, err := p.PatchStatus(t.Context(), obj, setPhase(corev1.PodRunning))
	if err != nil {
		t.Fatalf("Patch: %v", err)
	}

	h.wantCounts(t, 0, 0, 1, 0)
	if diff := cmp.Diff(before, obj); diff != "" {
		t.Errorf("caller's object changed (-before +after):\n%s", diff)
	}
	if got == obj {
		t.Error("Patch returned the caller's pointer")
	}
	server := h.stored(t, obj)
	if got.Status.Phase != corev1.PodRunning || server.Status.Phase != corev1.PodRunning {
		t.Errorf("phase returned %q, stored %q, want %q", got.Status.Phase, server.Status.Phase, corev1.PodRunning)
	}
	if got.ResourceVersion != server.ResourceVersion || got.ResourceVersion == before.ResourceVersion {
		t.Errorf("returned resourceVersion %q, stored %q, before %q: want the stored, new one",
			got.ResourceVersion, server.ResourceVersion, before.ResourceVersion)
	}
}

func TestPatchSendsResourceVersionPrecondition(t *testing.T) {
	for _, tc := range []struct {
		name    string
		disable bool
		want    string
	}{
		{"default", false, `{"metadata":{"resourceVersion":"999"},"status":{"phase":"Running"}}`},
		{"DisableOptimisticLock", true, `{"status":{"phase":"Running"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testPod("p"))
			obj := h.stored(t, testPod("p"))
			p := statusupdate.New[*corev1.Pod](h.writer, h.live, statusupdate.Options{DisableOptimisticLock: tc.disable})
			if _, err := p.PatchStatus(t.Context(), obj, setPhase(corev1.PodRunning)); err != nil {
				t.Fatalf("Patch: %v", err)
			}
			if diff := cmp.Diff([]string{tc.want}, h.statusBody); diff != "" {
				t.Errorf("patch bodies (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPatchConflictRereadsLive has a second writer change the status between
// the caller's read and its patch. The lock turns that into a conflict; the
// retry reads the API server (never the cache) and keeps both writes.
func TestPatchConflictRereadsLive(t *testing.T) {
	h := newHarness(t, testPod("p"))
	obj := h.stored(t, testPod("p"))
	before := obj.DeepCopy()
	h.beforeWrite = func(n int32, _ client.Object) error {
		if n != 1 {
			return nil
		}
		other := h.stored(t, obj)
		if err := setCondition("example.com/Other", "theirs")(other); err != nil {
			return err
		}
		return h.direct.Status().Update(t.Context(), other)
	}

	var mutations atomic.Int32
	p := statusupdate.New[*corev1.Pod](h.writer, h.live, statusupdate.Options{Backoff: fastRetry})
	got, err := p.PatchStatus(t.Context(), obj, func(pod *corev1.Pod) error {
		mutations.Add(1)
		return setCondition("example.com/Mine", "ours")(pod)
	})
	if err != nil {
		t.Fatalf("Patch: %v", err)
	}

	h.wantCounts(t, 0, 1, 2, 0)
	if n := mutations.Load(); n != 2 {
		t.Errorf("mutate ran %d times, want 2 (once per attempt)", n)
	}
	if diff := cmp.Diff(before, obj); diff != "" {
		t.Errorf("caller's object changed (-before +after):\n%s", diff)
	}
	server := h.stored(t, obj)
	for _, c := range []string{"example.com/Other", "example.com/Mine"} {
		if _, ok := condition(server, c); !ok {
			t.Errorf("stored object lost condition %s: %+v", c, server.Status.Conditions)
		}
		if _, ok := condition(got, c); !ok {
			t.Errorf("returned object lacks condition %s: %+v", c, got.Status.Conditions)
		}
	}
	if got.ResourceVersion != server.ResourceVersion {
		t.Errorf("returned resourceVersion %q, stored %q", got.ResourceVersion, server.ResourceVersion)
	}
}

func TestPatchConflictRetriesExhausted(t *testing.T) {
	h := newHarness(t, testPod("p"))
	obj := h.stored(t, testPod("p"))
	before := obj.DeepCopy()
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "p", errors.New("injected"))
	h.beforeWrite = func(int32, client.Object) error { return conflict }

	backoff := wait.Backoff{Steps: 3, Duration: time.Millisecond, Factor: 1}
	p := statusupdate.New[*corev1.Pod](h.writer, h.live, statusupdate.Options{Backoff: backoff})
	got, err := p.PatchStatus(t.Context(), obj, setPhase(corev1.PodRunning))

	if got != nil {
		t.Errorf("Patch returned %v with its error, want nil", got)
	}
	var cerr *statusupdate.ConflictError
	if !errors.As(err, &cerr) {
		t.Fatalf("Patch error %v (%T), want a *ConflictError", err, err)
	}
	if cerr.Attempts != 3 || cerr.Key != client.ObjectKeyFromObject(obj) {
		t.Errorf("ConflictError{Key: %v, Attempts: %d}, want {default/p, 3}", cerr.Key, cerr.Attempts)
	}
	if !errors.Is(err, statusupdate.ErrConflictRetriesExhausted) || !apierrors.IsConflict(err) || !errors.Is(err, conflict) {
		t.Errorf("errors.Is(ErrConflictRetriesExhausted), IsConflict, Is(last conflict) = %v, %v, %v; want all true",
			errors.Is(err, statusupdate.ErrConflictRetriesExhausted), apierrors.IsConflict(err), errors.Is(err, conflict))
	}
	if !strings.HasPrefix(err.Error(), "patch status of default/p: ") || !strings.Contains(err.Error(), "after 3 attempts") {
		t.Errorf("error message %q does not name the object and the attempts", err)
	}
	h.wantCounts(t, 0, 2, 3, 0)
	if diff := cmp.Diff(before, obj); diff != "" {
		t.Errorf("caller's object changed (-before +after):\n%s", diff)
	}
}

// The zero Options retry like retry.DefaultRetry: 5 attempts.
func TestPatchDefaultBackoff(t *testing.T) {
	h := newHarness(t, testPod("p"))
	obj := h.stored(t, testPod("p"))
	h.beforeWrite = func(int32, client.Object) error {
		return apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "p", errors.New("injected"))
	}
	p := statusupdate.New[*corev1.Pod](h.writer, h.live, statusupdate.Options{})
	_, err := p.PatchStatus(t.Context(), obj, setPhase(corev1.PodRunning))
	var cerr *statusupdate.ConflictError
	if !errors.As(err, &cerr) || cerr.Attempts != 5 {
		t.Fatalf("Patch error %v, want a *ConflictError after 5 attempts", err)
	}
	h.wantCounts(t, 0, 4, 5, 0)
}

// The wait between attempts ends with the context, not with the backoff.
func TestPatchBackoffHonoursContext(t *testing.T) {
	h := newHarness(t, testPod("p"))
	obj := h.stored(t, testPod("p"))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	h.beforeWrite = func(int32, client.Object) error {
		cancel()
		return apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "p", errors.New("injected"))
	}
	p := statusupdate.New[*corev1.Pod](h.writer, h.live, statusupdate.Options{
		Backoff: wait.Backoff{Steps: 5, Duration: 30 * time.Second, Factor: 1},
	})
	start := time.Now()
	_, err := p.PatchStatus(ctx, obj, setPhase(corev1.PodRunning))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Patch error %v, want context.Canceled", err)
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("Patch took %v: the backoff wait ignored the context", elapsed)
	}
	h.wantCounts(t, 0, 0, 1, 0)
}

func TestPatchUnchangedSendsNothing(t *testing.T) {
	h := newHarness(t, testPod("p"))
	obj := h.stored(t, testPod("p"))
	before := obj.DeepCopy()

	p := statusupdate.New[*corev1.Pod](h.writer, h.live, statusupdate.Options{Backoff: fastRetry})
	for name, mutate := range map[string]func(*corev1.Pod) error{
		"same value": setPhase(corev1.PodPending),
		"nothing":    func(*corev1.Pod) error { return nil },
	} {
		got, err := p.PatchStatus(t.Context(), obj, mutate)
		if err != nil {
			t.Fatalf("%s: Patch: %v", name, err)
		}
		if diff := cmp.Diff(before, got); diff != "" {
			t.Errorf("%s: returned object differs from the input (-input +returned):\n%s", name, diff)
		}
		if got == obj {
			t.Errorf("%s: Patch returned the caller's pointer, want a copy", name)
		}
	}
	h.wantCounts(t, 0, 0, 0, 0)
	if diff := cmp.Diff(before, obj); diff != "" {
		t.Errorf("caller's object changed (-before +after):\n%s", diff)
	}
}

func TestPatchMutateErrorWritesNothing(t *testing.T) {
	h := newHarness(t, testPod("p"))
	obj := h.stored(t, testPod("p"))
	before := obj.DeepCopy()
	errBoom := errors.New("boom")

	p := statusupdate.New[*corev1.Pod](h.writer, h.live, statusupdate.Options{Backoff: fastRetry})
	_, err := p.PatchStatus(t.Context(), obj, func(pod *corev1.Pod) error {
		pod.Status.Phase = corev1.PodFailed // half-done work must not be sent
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Patch error %v, want it to wrap %v", err, errBoom)
	}
	if want := "patch status of default/p: mutate: boom"; err.Error() != want {
		t.Errorf("error message %q, want %q", err, want)
	}
	h.wantCounts(t, 0, 0, 0, 0)
	if diff := cmp.Diff(before, obj); diff != "" {
		t.Errorf("caller's object changed (-before +after):\n%s", diff)
	}
	if got := h.stored(t, obj).Status.Phase; got != corev1.PodPending {
		t.Errorf("stored phase %q, want %q unchanged", got, corev1.PodPending)
	}
}

func TestPatchServerErrorsWrapped(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	for _, tc := range []struct {
		name   string
		inject error // nil: the object is really missing
		is     func(error) bool
		live   int32 // live GETs: a NotFound is checked for a missing subresource
	}{
		{"NotFound", nil, apierrors.IsNotFound, 1},
		{"Forbidden", apierrors.NewForbidden(gr, "p", errors.New("injected")), apierrors.IsForbidden, 0},
		{"Invalid", apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p",
			field.ErrorList{field.Invalid(field.NewPath("status", "phase"), "x", "injected")}), apierrors.IsInvalid, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stored := testPod("p")
			stored.ResourceVersion = "7"
			var h *harness
			if tc.inject == nil {
				h = newHarness(t)
			} else {
				h = newHarness(t, testPod("p"))
				stored = h.stored(t, stored)
				h.beforeWrite = func(int32, client.Object) error { return tc.inject }
			}
			before := stored.DeepCopy()
			p := statusupdate.New[*corev1.Pod](h.writer, h.live, statusupdate.Options{Backoff: fastRetry})
			_, err := p.PatchStatus(t.Context(), stored, setPhase(corev1.PodRunning))
			if !tc.is(err) {
				t.Fatalf("Patch error %v: apierrors.Is%s is false", err, tc.name)
			}
			if !strings.HasPrefix(err.Error(), "patch status of default/p: ") {
				t.Errorf("error message %q does not name the object", err)
			}
			h.wantCounts(t, 0, tc.live, 1, 0) // no retry for these
			if diff := cmp.Diff(before, stored); diff != "" {
				t.Errorf("caller's object changed (-before +after):\n%s", diff)
			}
		})
	}
}

func TestPatchWithoutResourceVersion(t *testing.T) {
	h := newHarness(t, testPod("p"))
	p := statusupdate.New[*corev1.Pod](h.writer, h.live, statusupdate.Options{})
	_, err := p.PatchStatus(t.Context(), testPod("p"), setPhase(corev1.PodRunning))
	if !errors.Is(err, statusupdate.ErrNoResourceVersion) {
		t.Fatalf("Patch error %v, want ErrNoResourceVersion", err)
	}
	h.wantCounts(t, 0, 0, 0, 0)
}

func TestPatchNilArguments(t *testing.T) {
	h := newHarness(t, testPod("p"))
	obj := h.stored(t, testPod("p"))
	typed := statusupdate.New[*corev1.Pod](h.writer, h.live, statusupdate.Options{})
	iface := statusupdate.New[client.Object](h.writer, h.live, statusupdate.Options{})
	noop := func(client.Object) error { return nil }

	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"typed nil pointer", func() error { _, err := typed.Patch(t.Context(), nil, setPhase(corev1.PodRunning)); return err }, statusupdate.ErrNilObject},
		{"nil interface", func() error { _, err := iface.Patch(t.Context(), nil, noop); return err }, statusupdate.ErrNilObject},
		{"typed nil in interface", func() error { _, err := iface.PatchObject(t.Context(), (*corev1.Pod)(nil), noop); return err }, statusupdate.ErrNilObject},
		{"nil mutate", func() error { _, err := typed.Patch(t.Context(), obj, nil); return err }, statusupdate.ErrNilMutate},
		{"nil mutate, object", func() error { _, err := typed.PatchObject(t.Context(), obj, nil); return err }, statusupdate.ErrNilMutate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := statusupdate.New[*corev1.Pod](nil, nil, statusupdate.Options{}).Patch(t.Context(), obj, setPhase(corev1.PodRunning)); err == nil {
		t.Error("Patch with a nil client returned no error")
	}
	h.wantCounts(t, 0, 0, 0, 0)
}

// recorder records what the Patcher reported, as "method rv".
type recorder struct {
	mu    sync.Mutex
	calls []string
	err   error
}

// note adds an event of the test's own to calls, to check the order.
func (r *recorder) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, s)
}

func (r *recorder) ExpectWrite(obj client.Object) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "ExpectWrite "+obj.GetResourceVersion())
	return r.err
}

func (r *recorder) ExpectDeletion(obj client.Object) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "ExpectDeletion "+obj.GetResourceVersion())
	return r.err
}

func TestPatchRecordsWrittenResourceVersion(t *testing.T) {
	h := newHarness(t, testPod("p"))
	obj := h.stored(t, testPod("p"))
	rec := &recorder{}
	p := statusupdate.New[*corev1.Pod](h.writer, h.live, statusupdate.Options{Expectations: rec})

	got, err := p.PatchStatus(t.Context(), obj, setPhase(corev1.PodRunning))
	if err != nil {
		t.Fatalf("Patch: %v", err)
	}
	if _, err := p.PatchStatus(t.Context(), got, setPhase(corev1.PodRunning)); err != nil { // a no-op is not a write
		t.Fatalf("Patch: %v", err)
	}
	if diff := cmp.Diff([]string{"ExpectWrite " + got.ResourceVersion}, rec.calls); diff != "" {
		t.Errorf("recorder calls (-want +got):\n%s", diff)
	}
}

func TestPatchRecorderErrorAfterWrite(t *testing.T) {
	h := newHarness(t, testPod("p"))
	obj := h.stored(t, testPod("p"))
	errFull := errors.New("tracker full")
	rec := &recorder{err: errFull}
	p := statusupdate.New[*corev1.Pod](h.writer, h.live, statusupdate.Options{Expectations: rec})

	got, err := p.PatchStatus(t.Context(), obj, setPhase(corev1.PodRunning))
	if !errors.Is(err, errFull) || !strings.Contains(err.Error(), "written at resourceVersion") {
		t.Fatalf("Patch error %v, want it to wrap %v and say the write happened", err, errFull)
	}
	server := h.stored(t, obj)
	if got == nil || got.ResourceVersion != server.ResourceVersion || server.Status.Phase != corev1.PodRunning {
		t.Errorf("returned %v, stored phase %q: want the written object along with the error", got, server.Status.Phase)
	}
}

func TestPatchObjectFinalizers(t *testing.T) {
	for _, tc := range []struct {
		name       string
		finalizers []string
		want       string // recorder method
		gone       bool
		live       int32 // live GETs: the fake's answer to a removal has a new resourceVersion
	}{
		{"last finalizer", []string{"example.com/hold"}, "ExpectDeletion", true, 1},
		{"one of two", []string{"example.com/hold", "example.com/other"}, "ExpectWrite", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod("p")
			pod.Finalizers = tc.finalizers
			pod.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			h := newHarness(t, pod)
			obj := h.stored(t, pod)
			before := obj.DeepCopy()
			rec := &recorder{}
			p := statusupdate.New[*corev1.Pod](h.writer, h.live, statusupdate.Options{Expectations: rec})

			got, err := p.PatchObject(t.Context(), obj, func(p *corev1.Pod) error {
				p.Finalizers = p.Finalizers[1:]
				return nil
			})
			if err != nil {
				t.Fatalf("PatchObject: %v", err)
			}
			h.wantCounts(t, 0, tc.live, 0, 1)
			if diff := cmp.Diff([]string{tc.want + " " + got.ResourceVersion}, rec.calls); diff != "" {
				t.Errorf("recorder calls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.finalizers[1:], got.Finalizers, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("returned finalizers (-want +got):\n%s", diff)
			}
			err = h.direct.Get(t.Context(), client.ObjectKeyFromObject(obj), &corev1.Pod{})
			if gone := apierrors.IsNotFound(err); gone != tc.gone {
				t.Errorf("object deleted = %v (Get: %v), want %v", gone, err, tc.gone)
			}
			if diff := cmp.Diff(before, obj); diff != "" {
				t.Errorf("caller's object changed (-before +after):\n%s", diff)
			}
		})
	}
}

func podGVK() schema.GroupVersionKind { return corev1.SchemeGroupVersion.WithKind("Pod") }

func unstructuredPod(t *testing.T, h *harness, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(podGVK())
	if err := h.direct.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: name}, u); err != nil {
		t.Fatalf("get: %v", err)
	}
	return u
}

func TestPatchUnstructured(t *testing.T) {
	h := newHarness(t, testPod("p"))
	obj := unstructuredPod(t, h, "p")
	before := obj.DeepCopy()
	// The first status write conflicts, so the retry must re-read into an
	// unstructured object, which only works if it carries the kind.
	h.beforeWrite = func(n int32, _ client.Object) error {
		if n == 1 {
			return apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "p", errors.New("injected"))
		}
		return nil
	}

	p := statusupdate.New[*unstructured.Unstructured](h.writer, h.live, statusupdate.Options{Backoff: fastRetry})
	got, err := p.PatchStatus(t.Context(), obj, func(u *unstructured.Unstructured) error {
		return unstructured.SetNestedField(u.Object, "Running", "status", "phase")
	})
	if err != nil {
		t.Fatalf("Patch: %v", err)
	}
	h.wantCounts(t, 0, 1, 2, 0)
	if phase, _, _ := unstructured.NestedString(got.Object, "status", "phase"); phase != "Running" {
		t.Errorf("returned phase %q, want Running", phase)
	}

	got, err = p.PatchObject(t.Context(), got, func(u *unstructured.Unstructured) error {
		u.SetLabels(map[string]string{"stage": "two"})
		return nil
	})
	if err != nil {
		t.Fatalf("PatchObject: %v", err)
	}
	h.wantCounts(t, 0, 1, 2, 1)
	server := h.stored(t, testPod("p"))
	if server.Labels["stage"] != "two" || server.Status.Phase != corev1.PodRunning || got.GetResourceVersion() != server.ResourceVersion {
		t.Errorf("stored labels %v, phase %q, rv %q; returned rv %q", server.Labels, server.Status.Phase, server.ResourceVersion, got.GetResourceVersion())
	}
	if diff := cmp.Diff(before, obj); diff != "" {
		t.Errorf("caller's object changed (-before +after):\n%s", diff)
	}
}

func TestPatchFieldOwner(t *testing.T) {
	h := newHarness(t, testPod("p"))
	obj := h.stored(t, testPod("p"))
	p := statusupdate.New[*corev1.Pod](h.writer, h.live, statusupdate.Options{FieldOwner: "workitem-controller"})
	if _, err := p.PatchStatus(t.Context(), obj, setPhase(corev1.PodRunning)); err != nil {
		t.Fatalf("Patch: %v", err)
	}
	if len(h.statusOpts) != 1 || h.statusOpts[0].FieldManager != "workitem-controller" {
		t.Errorf("patch options %+v, want FieldManager workitem-controller", h.statusOpts)
	}
}

func TestPatchLogsAtV1(t *testing.T) {
	h := newHarness(t, testPod("p"))
	obj := h.stored(t, testPod("p"))
	var buf bytes.Buffer
	logger := funcr.New(func(prefix, args string) { buf.WriteString(args + "\n") }, funcr.Options{Verbosity: 1})
	ctx := log.IntoContext(t.Context(), logger)
	p := statusupdate.New[*corev1.Pod](h.writer, h.live, statusupdate.Options{})

	got, err := p.PatchStatus(ctx, obj, setPhase(corev1.PodRunning))
	if err != nil {
		t.Fatalf("Patch: %v", err)
	}
	if _, err := p.PatchStatus(ctx, got, setPhase(corev1.PodRunning)); err != nil {
		t.Fatalf("Patch: %v", err)
	}
	out := buf.String()
	for _, want := range []string{
		`"msg"="patched"`,
		`"patch"="{\"metadata\":{\"resourceVersion\":\"999\"},\"status\":{\"phase\":\"Running\"}}"`,
		`"msg"="unchanged, nothing sent"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
}

func counter(t *testing.T, target, result string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "racesafe_statusupdate_patches_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if labels(m) == "controller=default,result="+result+",target="+target {
				return m.GetCounter().GetValue()
			}
		}
	}
	// A series is made by its first observation: absent is 0.
	return 0
}

func labels(m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	return strings.Join(parts, ",")
}

// TestMetrics is not parallel: the counters are process-wide.
func TestMetrics(t *testing.T) {
	type key struct{ target, result string }
	keys := []key{
		{"status", "written"}, {"status", "unchanged"}, {"status", "conflict"}, {"status", "error"},
		{"object", "written"}, {"object", "unchanged"}, {"object", "conflict"}, {"object", "error"},
	}
	start := map[key]float64{}
	for _, k := range keys {
		start[k] = counter(t, k.target, k.result)
	}

	h := newHarness(t, testPod("p"))
	obj := h.stored(t, testPod("p"))
	h.beforeWrite = func(n int32, _ client.Object) error {
		if n == 1 {
			return apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "p", errors.New("injected"))
		}
		return nil
	}
	p := statusupdate.New[*corev1.Pod](h.writer, h.live, statusupdate.Options{Backoff: fastRetry})
	got, err := p.PatchStatus(t.Context(), obj, setPhase(corev1.PodRunning)) // conflict, then written
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PatchStatus(t.Context(), got, setPhase(corev1.PodRunning)); err != nil { // unchanged
		t.Fatal(err)
	}
	_, _ = p.PatchObject(t.Context(), got, func(*corev1.Pod) error { return errors.New("no") }) // error
	got, err = p.PatchObject(t.Context(), got, func(p *corev1.Pod) error { p.Labels = map[string]string{"a": "b"}; return nil })
	if err != nil {
		t.Fatal(err)
	}

	want := map[key]float64{{"status", "conflict"}: 1, {"status", "written"}: 1, {"status", "unchanged"}: 1, {"object", "error"}: 1, {"object", "written"}: 1}
	for _, k := range keys {
		if d := counter(t, k.target, k.result) - start[k]; d != want[k] {
			t.Errorf("patches_total{target=%q,result=%q} grew by %v, want %v", k.target, k.result, d, want[k])
		}
	}
}
