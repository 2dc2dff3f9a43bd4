package racetest_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

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
		racetest.FaultConflict:        0.1,
		racetest.FaultServerError:     0.05,
		racetest.FaultTooManyRequests: 0.02,
	}
	f, err := racetest.NewFaults(racetest.FaultOptions{
		Seed:              7,
		Conflict:          rates[racetest.FaultConflict],
		ServerError:       rates[racetest.FaultServerError],
		TooManyRequests:   rates[racetest.FaultTooManyRequests],
		RetryAfterSeconds: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	reached := 0
	c := interceptor.NewClient(passThrough(&reached), f.Funcs())

	seen := map[racetest.Fault]int{}
	for range n {
		err := c.Status().Patch(t.Context(), testPod(), emptyPatch)
		switch {
		case err == nil:
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
	if reached != n-counts.Total() {
		t.Errorf("%d patches reached the client, want %d calls - %d faults", reached, n, counts.Total())
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
		"unknown operation":    {Operations: []racetest.Operation{"create"}},
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
