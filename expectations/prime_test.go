package expectations_test

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/racesafe/racesafe/expectations"
)

// listedAt answers Lists of c with the collection resourceVersion rv, as
// the API server does (the fake client leaves it empty).
func listedAt(c client.WithWatch, rv string) client.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			list.SetResourceVersion(rv)
			return nil
		},
	})
}

// A new leader's cache lags its predecessor's last writes: Prime makes the
// copies it lags on stale, and only those.
func TestPrimeRecordsOnlyWhatTheCacheLags(t *testing.T) {
	live := listedAt(fake.NewClientBuilder().WithObjects(
		configMap("behind", "u1", "20"),
		configMap("same", "u2", "15"),
		configMap("uncached", "u3", "25"),
	).Build(), "30")
	elsewhere := configMap("elsewhere", "u6", "1")
	elsewhere.Namespace = "other"
	cached := fake.NewClientBuilder().WithObjects(
		configMap("behind", "u1", "10"),  // the server has rv 20
		configMap("same", "u2", "15"),    // as new as the server
		configMap("deleted", "u4", "5"),  // gone before the live List at 30
		configMap("newborn", "u5", "40"), // created after the live List
		elsewhere,                        // outside the namespace asked for
	).Build()
	tr := expectations.New(expectations.Options{Name: "prime-gap"})

	res, err := tr.Prime(t.Context(), live, cached, &corev1.ConfigMapList{}, client.InNamespace("default"))
	if err != nil {
		t.Fatalf("Prime: %v", err)
	}
	want := expectations.PrimeResult{Listed: 3, ResourceVersion: "30", Behind: 1, Gone: 1}
	if res != want {
		t.Fatalf("Prime = %+v, want %+v", res, want)
	}
	if got := tr.Pending(); got != 2 {
		t.Fatalf("Pending = %d after Prime, want 2 (behind, deleted)", got)
	}
	r := expectations.NewReader(cached, tr)
	for _, tc := range []struct {
		name  string
		stale bool
	}{
		{"behind", true},
		{"deleted", true},
		{"same", false},
		{"newborn", false},
	} {
		var cm corev1.ConfigMap
		err := r.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: tc.name}, &cm)
		if stale := errors.Is(err, expectations.ErrStale); stale != tc.stale || (!tc.stale && err != nil) {
			t.Errorf("Get %s after Prime = %v; want stale %v", tc.name, err, tc.stale)
		}
	}
}

// A cached copy as new as the server's answer settles what Prime recorded.
func TestPrimeSettlesWhenTheCacheCatchesUp(t *testing.T) {
	live := listedAt(fake.NewClientBuilder().WithObjects(configMap("a", "u1", "20")).Build(), "20")
	cached := fake.NewClientBuilder().WithObjects(configMap("a", "u1", "10")).Build()
	tr := expectations.New(expectations.Options{Name: "prime-settle"})
	if _, err := tr.Prime(t.Context(), live, cached, &corev1.ConfigMapList{}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Check(configMap("a", "u1", "10")); !errors.Is(err, expectations.ErrStale) {
		t.Fatalf("Check rv 10 = %v, want stale", err)
	}
	if err := tr.Check(configMap("a", "u1", "20")); err != nil {
		t.Fatalf("Check rv 20 = %v, want fresh", err)
	}
	if got := tr.Pending(); got != 0 {
		t.Fatalf("Pending = %d after the cache caught up, want 0", got)
	}
}

// pagedReader serves a List in two pages of one snapshot.
type pagedReader struct {
	client.Reader
	pages [][]corev1.ConfigMap
	asked []string // the continue token of each List
}

func (p *pagedReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	p.asked = append(p.asked, o.Continue)
	i := len(p.asked) - 1
	l := list.(*corev1.ConfigMapList)
	l.Items = p.pages[i]
	l.ResourceVersion = "50"
	if i+1 < len(p.pages) {
		l.Continue = "page-2"
	}
	return nil
}

func TestPrimeReadsEveryPage(t *testing.T) {
	live := &pagedReader{pages: [][]corev1.ConfigMap{
		{*configMap("a", "u1", "40")},
		{*configMap("b", "u2", "45")},
	}}
	cached := fake.NewClientBuilder().WithObjects(configMap("a", "u1", "30"), configMap("b", "u2", "35")).Build()
	tr := expectations.New(expectations.Options{Name: "prime-pages"})
	res, err := tr.Prime(t.Context(), live, cached, &corev1.ConfigMapList{})
	if err != nil {
		t.Fatalf("Prime: %v", err)
	}
	if res.Listed != 2 || res.Behind != 2 || res.Gone != 0 {
		t.Fatalf("Prime = %+v, want both pages listed, both behind, none gone", res)
	}
	if len(live.asked) != 2 || live.asked[0] != "" || live.asked[1] != "page-2" {
		t.Fatalf("continue tokens asked %q, want [\"\" \"page-2\"]", live.asked)
	}
}

func TestPrimeRefusesBadInput(t *testing.T) {
	cached := fake.NewClientBuilder().WithObjects(configMap("gone", "u1", "5")).Build()
	tr := expectations.New(expectations.Options{Name: "prime-bad"})

	if _, err := tr.Prime(t.Context(), cached, cached, nil); !errors.Is(err, expectations.ErrNilObject) {
		t.Errorf("Prime(nil list) = %v, want ErrNilObject", err)
	}
	var nilList *corev1.ConfigMapList
	if _, err := tr.Prime(t.Context(), cached, cached, nilList); !errors.Is(err, expectations.ErrNilObject) {
		t.Errorf("Prime(typed nil list) = %v, want ErrNilObject", err)
	}

	boom := errors.New("apiserver down")
	failing := interceptor.NewClient(fake.NewClientBuilder().Build(), interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error { return boom },
	})
	if _, err := tr.Prime(t.Context(), failing, cached, &corev1.ConfigMapList{}); !errors.Is(err, boom) {
		t.Errorf("Prime with a failing live List = %v, want it wrapped", err)
	}

	// A List version that cannot be ordered decides nothing.
	malformed := listedAt(fake.NewClientBuilder().Build(), "not-a-version")
	_, err := tr.Prime(t.Context(), malformed, cached, &corev1.ConfigMapList{})
	var rvErr *expectations.ResourceVersionError
	if !errors.As(err, &rvErr) || !errors.Is(err, expectations.ErrInvalidResourceVersion) || rvErr.ResourceVersion != "not-a-version" {
		t.Errorf("Prime with a malformed list version = %v, want *ResourceVersionError naming it", err)
	}
	if got := tr.Pending(); got != 0 {
		t.Errorf("Pending = %d after refused Primes, want 0", got)
	}
}

// TestPrimeWithASelectorTellsRelabelledFromDeleted: with a selector, an
// object absent from the live List may only have stopped matching. It is
// then a copy the cache lags, not a deletion: recorded as deleted, it would
// be refused as "the incarnation recorded as deleted" for the whole TTL.
func TestPrimeWithASelectorTellsRelabelledFromDeleted(t *testing.T) {
	labelled := func(cm *corev1.ConfigMap, app string) *corev1.ConfigMap {
		cm.Labels = map[string]string{"app": app}
		return cm
	}
	live := listedAt(fake.NewClientBuilder().WithObjects(
		labelled(configMap("relabelled", "u1", "20"), "b"),
		labelled(configMap("replaced", "u2-new", "22"), "b"),
		labelled(configMap("kept", "u3", "15"), "a"),
	).Build(), "30")
	cached := fake.NewClientBuilder().WithObjects(
		labelled(configMap("relabelled", "u1", "10"), "a"), // the server has rv 20, app=b
		labelled(configMap("replaced", "u2", "12"), "a"),   // another incarnation holds the name
		labelled(configMap("deleted", "u4", "5"), "a"),     // gone
		labelled(configMap("kept", "u3", "15"), "a"),
	).Build()
	tr := expectations.New(expectations.Options{Name: "prime-selector"})
	res, err := tr.Prime(t.Context(), live, cached, &corev1.ConfigMapList{}, client.InNamespace("default"), client.MatchingLabels{"app": "a"})
	if err != nil {
		t.Fatalf("Prime: %v", err)
	}
	want := expectations.PrimeResult{Listed: 1, ResourceVersion: "30", Behind: 1, Gone: 2}
	if res != want {
		t.Fatalf("Prime = %+v, want %+v", res, want)
	}
	r := expectations.NewReader(cached, tr)
	var cm corev1.ConfigMap
	err = r.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "relabelled"}, &cm)
	var stale *expectations.StaleError
	if !errors.As(err, &stale) || stale.Deletion || stale.Want != "20" {
		t.Fatalf("Get of the relabelled object = %v, want a *StaleError for a lagging copy, not a deletion", err)
	}
}
