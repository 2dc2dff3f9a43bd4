package racetest_test

import (
	"context"
	"errors"
	"math"
	"net/url"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/racesafe/racesafe/racetest"
)

func testPod() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}
}

// passThrough counts the status patches that get past the faults, and
// accepts them without doing them: a fake client takes milliseconds a patch,
// too slow for the ten thousand calls the rates are measured over.
func passThrough(reached *int) client.WithWatch {
	base := fake.NewClientBuilder().Build()
	return interceptor.NewClient(base, interceptor.Funcs{
		SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
			*reached++
			return nil
		},
	})
}

var emptyPatch = client.RawPatch(types.MergePatchType, []byte("{}"))

// within3Sigma reports whether got is within three binomial standard
// deviations of n*p; a seeded run either always passes or always fails.
func within3Sigma(got, n int, p float64) bool {
	mean := float64(n) * p
	sigma := math.Sqrt(float64(n) * p * (1 - p))
	return math.Abs(float64(got)-mean) <= 3*sigma
}

func TestFaultRatesAndCounts(t *testing.T) {
	const n = 10000
	rates := map[racetest.Fault]float64{
		racetest.FaultConflict:           0.1,
		racetest.FaultServerError:        0.05,
		racetest.FaultTooManyRequests:    0.02,
		racetest.FaultAppliedServerError: 0.04,
		racetest.FaultAppliedTimeout:     0.03,
	}
	f, err := racetest.NewFaults(racetest.FaultOptions{
		Seed:               7,
		Conflict:           rates[racetest.FaultConflict],
		ServerError:        rates[racetest.FaultServerError],
		TooManyRequests:    rates[racetest.FaultTooManyRequests],
		AppliedServerError: rates[racetest.FaultAppliedServerError],
		AppliedTimeout:     rates[racetest.FaultAppliedTimeout],
		RetryAfterSeconds:  3,
	})
	if err != nil {
		t.Fatal(err)
	}
	reached := 0
	c := interceptor.NewClient(passThrough(&reached), f.Funcs())

	seen := map[racetest.Fault]int{}
	for range n {
		before := reached
		err := c.Status().Patch(t.Context(), testPod(), emptyPatch)
		switch {
		case err == nil:
		case errors.Is(err, context.DeadlineExceeded):
			seen[racetest.FaultAppliedTimeout]++
		case apierrors.IsInternalError(err) && reached > before:
			seen[racetest.FaultAppliedServerError]++
		case apierrors.IsConflict(err):
			seen[racetest.FaultConflict]++
		case apierrors.IsInternalError(err):
			seen[racetest.FaultServerError]++
		case apierrors.IsTooManyRequests(err):
			seen[racetest.FaultTooManyRequests]++
			if s, ok := apierrors.SuggestsClientDelay(err); !ok || s != 3 {
				t.Fatalf("SuggestsClientDelay(%v) = %d, %v; want 3, true", err, s, ok)
			}
		default:
			t.Fatalf("unexpected error %v", err)
		}
	}

	counts := f.Injected()
	for fault, p := range rates {
		if !within3Sigma(seen[fault], n, p) {
			t.Errorf("%s: %d in %d calls, want %.0f ± 3σ", fault, seen[fault], n, n*p)
		}
		if got := counts.Of(fault); got != seen[fault] {
			t.Errorf("Injected().Of(%s) = %d, callers saw %d", fault, got, seen[fault])
		}
		if got := counts.Injected[racetest.Injection{Fault: fault, Operation: racetest.OpStatusPatch}]; got != seen[fault] {
			t.Errorf("Injected[%s, status patch] = %d, want %d", fault, got, seen[fault])
		}
	}
	if counts.Calls[racetest.OpStatusPatch] != n {
		t.Errorf("Calls[status patch] = %d, want %d", counts.Calls[racetest.OpStatusPatch], n)
	}
	applied := counts.Of(racetest.FaultAppliedServerError) + counts.Of(racetest.FaultAppliedTimeout)
	if reached != n-counts.Total()+applied {
		t.Errorf("%d patches reached the client, want %d calls - %d faults + %d applied ones",
			reached, n, counts.Total(), applied)
	}
}

// sequence records which calls failed, and how, for a seed.
func sequence(t *testing.T, seed uint64) []string {
	t.Helper()
	f, err := racetest.NewFaults(racetest.FaultOptions{Seed: seed, Conflict: 0.2, ServerError: 0.1, TooManyRequests: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	reached := 0
	c := interceptor.NewClient(passThrough(&reached), f.Funcs())
	var out []string
	for range 200 {
		err := c.Status().Patch(t.Context(), testPod(), emptyPatch)
		out = append(out, string(apierrors.ReasonForError(err)))
	}
	return out
}

func TestFaultsSameSeedSameSequence(t *testing.T) {
	a, b := sequence(t, 42), sequence(t, 42)
	if !slices.Equal(a, b) {
		t.Fatalf("seed 42 gave two sequences:\n%v\n%v", a, b)
	}
	if slices.Equal(a, sequence(t, 43)) {
		t.Fatal("seeds 42 and 43 gave the same 200 draws: the seed is ignored")
	}
}

func TestFaultsOperationsAndMatch(t *testing.T) {
	f, err := racetest.NewFaults(racetest.FaultOptions{
		Conflict:   1,
		Operations: []racetest.Operation{racetest.OpUpdate, racetest.OpPatch},
		Match:      func(_ racetest.Operation, obj client.Object) bool { return obj.GetName() == "p" },
	})
	if err != nil {
		t.Fatal(err)
	}
	base := fake.NewClientBuilder().
		WithObjects(testPod(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "default"}}).
		WithStatusSubresource(&corev1.Pod{}).Build()
	c := interceptor.NewClient(base, f.Funcs())

	err = c.Patch(t.Context(), testPod(), emptyPatch)
	if !apierrors.IsConflict(err) {
		t.Fatalf("patch at rate 1: %v, want a conflict", err)
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details.Kind != "pods" || status.Status().Details.Name != "p" {
		t.Errorf("conflict names %+v, want pods \"p\"", status.Status().Details)
	}
	var got corev1.Pod
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(testPod()), &got); err != nil {
		t.Fatal(err)
	}
	if err := c.Update(t.Context(), &got); !apierrors.IsConflict(err) {
		t.Fatalf("update at rate 1: %v, want a conflict", err)
	}
	if err := c.Status().Patch(t.Context(), testPod(), emptyPatch); err != nil {
		t.Errorf("status patch is not in Operations but failed: %v", err)
	}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "default"}}
	if err := c.Patch(t.Context(), other, emptyPatch); err != nil {
		t.Errorf("patch of an object Match rejects failed: %v", err)
	}
	counts := f.Injected()
	if counts.Calls[racetest.OpPatch] != 1 || counts.Calls[racetest.OpUpdate] != 1 || counts.Calls[racetest.OpStatusPatch] != 0 {
		t.Errorf("Calls = %v, want one patch and one update in scope", counts.Calls)
	}
}

func TestNewFaultsRejectsInvalidOptions(t *testing.T) {
	for name, opts := range map[string]racetest.FaultOptions{
		"negative rate":        {Conflict: -0.1},
		"rate above one":       {ServerError: 1.1},
		"NaN rate":             {TooManyRequests: math.NaN()},
		"rates sum above one":  {Conflict: 0.6, ServerError: 0.5},
		"negative retry after": {TooManyRequests: 0.1, RetryAfterSeconds: -1},
		"unknown operation":    {Operations: []racetest.Operation{"get"}},
	} {
		t.Run(name, func(t *testing.T) {
			f, err := racetest.NewFaults(opts)
			var optsErr *racetest.FaultOptionsError
			if f != nil || !errors.Is(err, racetest.ErrInvalidFaultOptions) || !errors.As(err, &optsErr) {
				t.Fatalf("NewFaults(%+v) = %v, %v; want nil and a *FaultOptionsError", opts, f, err)
			}
		})
	}
}

// TestAppliedFaultsWriteAndFail proves an applied fault is ambiguous: the
// server has the write, the caller has an error and its own object back as
// it passed it.
func TestAppliedFaultsWriteAndFail(t *testing.T) {
	for _, tc := range []struct {
		fault racetest.Fault
		opts  racetest.FaultOptions
		is    func(error) bool
	}{
		{racetest.FaultAppliedServerError, racetest.FaultOptions{AppliedServerError: 1}, apierrors.IsInternalError},
		{racetest.FaultAppliedTimeout, racetest.FaultOptions{AppliedTimeout: 1}, func(err error) bool {
			var u *url.Error
			return errors.Is(err, context.DeadlineExceeded) && errors.As(err, &u) && u.Op == "Patch" &&
				u.URL == "/api/v1/namespaces/default/pods/p/status"
		}},
	} {
		t.Run(string(tc.fault), func(t *testing.T) {
			f, err := racetest.NewFaults(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			base := fake.NewClientBuilder().WithObjects(testPod()).WithStatusSubresource(&corev1.Pod{}).Build()
			c := interceptor.NewClient(base, f.Funcs())
			var pod corev1.Pod
			if err := c.Get(t.Context(), client.ObjectKeyFromObject(testPod()), &pod); err != nil {
				t.Fatal(err)
			}
			sent := pod.DeepCopy()
			sent.Status.Message = "written"
			callers := sent.DeepCopy()
			err = c.Status().Patch(t.Context(), callers, client.MergeFrom(&pod))
			if !tc.is(err) {
				t.Fatalf("status patch = %v, want the %s error", err, tc.fault)
			}
			if diff := cmp.Diff(sent, callers); diff != "" {
				t.Errorf("the caller's object changed (-sent +after):\n%s", diff)
			}
			var live corev1.Pod
			if err := base.Get(t.Context(), client.ObjectKeyFromObject(&pod), &live); err != nil {
				t.Fatal(err)
			}
			if live.Status.Message != "written" || live.ResourceVersion == pod.ResourceVersion {
				t.Errorf("server holds message %q at resourceVersion %s, want the write applied past %s",
					live.Status.Message, live.ResourceVersion, pod.ResourceVersion)
			}
			if got := f.Injected().Of(tc.fault); got != 1 {
				t.Errorf("Injected().Of(%s) = %d, want 1", tc.fault, got)
			}

			// A write the server refuses is not ambiguous: its own error,
			// nothing injected.
			stale := sent.DeepCopy()
			stale.Status.Message = "stale"
			if err := c.Status().Update(t.Context(), stale); !apierrors.IsConflict(err) {
				t.Fatalf("update at a stale resourceVersion = %v, want the server's conflict", err)
			}
			if got := f.Injected().Of(tc.fault); got != 1 {
				t.Errorf("after a refused write Injected().Of(%s) = %d, want still 1", tc.fault, got)
			}
		})
	}
}

// TestFaultsOnCreatesAndDeletes: creates and deletes fail only when named,
// and an applied fault on them is as ambiguous as on an update: the server
// created (or deleted) the object, and the caller got an error and its own
// object back, without the name the server generated.
func TestFaultsOnCreatesAndDeletes(t *testing.T) {
	ctx := t.Context()
	newPod := func() *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "child-", Namespace: "default"}}
	}
	byDefault, err := racetest.NewFaults(racetest.FaultOptions{AppliedTimeout: 1})
	if err != nil {
		t.Fatal(err)
	}
	base := fake.NewClientBuilder().Build()
	if err := interceptor.NewClient(base, byDefault.Funcs()).Create(ctx, newPod()); err != nil {
		t.Fatalf("Create with Operations nil = %v, want it to pass: creates fail only when named", err)
	}

	f, err := racetest.NewFaults(racetest.FaultOptions{AppliedTimeout: 1, Operations: []racetest.Operation{racetest.OpCreate, racetest.OpDelete}})
	if err != nil {
		t.Fatal(err)
	}
	base = fake.NewClientBuilder().Build()
	c := interceptor.NewClient(base, f.Funcs())
	pod := newPod()
	err = c.Create(ctx, pod)
	var u *url.Error
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &u) || u.Op != "Post" || u.URL != "/api/v1/namespaces/default/pods" {
		t.Fatalf("Create = %v, want a POST timeout", err)
	}
	if pod.Name != "" || pod.ResourceVersion != "" {
		t.Errorf("the caller's object got name %q, resourceVersion %q; want neither", pod.Name, pod.ResourceVersion)
	}
	var pods corev1.PodList
	if err := base.List(ctx, &pods); err != nil || len(pods.Items) != 1 {
		t.Fatalf("server has %d pods (%v), want the create applied", len(pods.Items), err)
	}
	err = c.Delete(ctx, &pods.Items[0])
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &u) || u.Op != "Delete" {
		t.Fatalf("Delete = %v, want a DELETE timeout", err)
	}
	if err := base.List(ctx, &pods); err != nil || len(pods.Items) != 0 {
		t.Fatalf("server has %d pods (%v), want the delete applied", len(pods.Items), err)
	}
	counts := f.Injected()
	if counts.Injected[racetest.Injection{Fault: racetest.FaultAppliedTimeout, Operation: racetest.OpCreate}] != 1 ||
		counts.Injected[racetest.Injection{Fault: racetest.FaultAppliedTimeout, Operation: racetest.OpDelete}] != 1 {
		t.Errorf("Injected = %v, want one applied timeout on a create and one on a delete", counts.Injected)
	}
}
