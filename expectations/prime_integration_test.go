package expectations_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/racesafe/racesafe/expectations"
	"github.com/racesafe/racesafe/internal/testenv"
	"github.com/racesafe/racesafe/racetest"
)

// primeLag is how late the cache's watch events arrive. Every check that
// relies on the cache being behind runs within it, a few requests after
// the writes; the catch-up is polled for, never slept on.
const primeLag = 2 * time.Second

// TestIntegrationPrimeRefusesWhatTheCacheLags is a leader change on a real
// API server: the previous leader updated a and deleted b, and the new
// leader's cache, whose watch lags, still shows the old a and still holds b.
// A tracker primed from a live List refuses both cached copies until the
// cache has caught up; a tracker that was not primed hands out the old a,
// which is the incident.
func TestIntegrationPrimeRefusesWhatTheCacheLags(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := t.Context()
	direct := testenv.Client(t, env.Config, client.Options{})
	const ns = "prime-lag"
	testenv.Namespace(t, direct, ns)
	a := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"},
		Data:       map[string]string{"phase": "Running"},
	}
	b := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b"},
		Data:       map[string]string{"phase": "Running"},
	}
	for _, cm := range []*corev1.ConfigMap{a, b} {
		if err := direct.Create(ctx, cm); err != nil {
			t.Fatalf("create %s: %v", cm.Name, err)
		}
	}
	keyA, keyB := client.ObjectKeyFromObject(a), client.ObjectKeyFromObject(b)

	// The new leader's cache: its watch events, the initial ones included,
	// arrive primeLag late.
	lagging, err := racetest.LaggedCache(racetest.LagOptions{Delay: primeLag})(env.Config, cache.Options{
		DefaultNamespaces: map[string]cache.Config{ns: {}},
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunCache(ctx, t, lagging, &corev1.ConfigMap{})
	waitFor(t, "the cache to hold a and b as created", func(ctx context.Context) (bool, error) {
		for _, cm := range []*corev1.ConfigMap{a, b} {
			var got corev1.ConfigMap
			err := lagging.Get(ctx, client.ObjectKeyFromObject(cm), &got)
			if err != nil || got.ResourceVersion != cm.ResourceVersion {
				return false, client.IgnoreNotFound(err)
			}
		}
		return true, nil
	})
	oldA := a.DeepCopy()

	// The previous leader's last writes, which the cache will not show for
	// primeLag.
	wrote := time.Now()
	updated := a.DeepCopy()
	updated.Data["phase"] = "Deleting"
	if err := direct.Update(ctx, updated); err != nil {
		t.Fatalf("update a: %v", err)
	}
	if err := direct.Delete(ctx, b); err != nil {
		t.Fatalf("delete b: %v", err)
	}

	// The fault: the cache still shows the old a, and b.
	var cachedA, cachedB corev1.ConfigMap
	if err := lagging.Get(ctx, keyA, &cachedA); err != nil {
		t.Fatalf("cached get a: %v", err)
	}
	if err := lagging.Get(ctx, keyB, &cachedB); err != nil {
		t.Fatalf("cached get b after its deletion = %v, want the deleted b still cached (%v since the writes, lag %v)", err, time.Since(wrote), primeLag)
	}
	if cachedA.ResourceVersion != oldA.ResourceVersion || cachedA.Data["phase"] != "Running" {
		t.Fatalf("cache shows a at rv %s phase %q, want the old rv %s phase Running (%v since the writes, lag %v)",
			cachedA.ResourceVersion, cachedA.Data["phase"], oldA.ResourceVersion, time.Since(wrote), primeLag)
	}

	// The control: a tracker that knows nothing of the previous leader's
	// writes hands out the old a and the deleted b.
	unprimed := expectations.New(expectations.Options{Name: "prime-integration-unprimed"})
	control := expectations.NewReader(lagging, unprimed)
	var handedA, handedB corev1.ConfigMap
	if err := control.Get(ctx, keyA, &handedA); err != nil {
		t.Fatalf("unprimed Get a = %v, want the stale copy handed out", err)
	}
	if handedA.ResourceVersion != oldA.ResourceVersion || handedA.Data["phase"] != "Running" {
		t.Fatalf("unprimed Get a handed out rv %s phase %q, want the stale rv %s phase Running",
			handedA.ResourceVersion, handedA.Data["phase"], oldA.ResourceVersion)
	}
	if err := control.Get(ctx, keyB, &handedB); err != nil {
		t.Fatalf("unprimed Get b = %v, want the deleted b handed out", err)
	}

	// The new leader primes its own tracker before acting on the cache.
	tr := expectations.New(expectations.Options{Name: "prime-integration"})
	res, err := tr.Prime(ctx, direct, lagging, &corev1.ConfigMapList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatalf("Prime: %v", err)
	}
	if res.Listed != 1 || res.Behind != 1 || res.Gone != 1 || res.ResourceVersion == "" {
		t.Fatalf("Prime = %+v, want Listed 1 (a), Behind 1 (a), Gone 1 (b), a ResourceVersion", res)
	}
	if n := tr.Pending(); n != 2 {
		t.Fatalf("Pending after Prime = %d, want 2 (a, b)", n)
	}

	reader := expectations.NewReader(lagging, tr)
	mine := updated.DeepCopy() // the caller's copy: the server's
	err = reader.Get(ctx, keyA, mine)
	var stale *expectations.StaleError
	if !errors.Is(err, expectations.ErrStale) || !errors.As(err, &stale) {
		t.Fatalf("primed Get a = %v, want ErrStale (%v since the writes, lag %v)", err, time.Since(wrote), primeLag)
	}
	if stale.Deletion || stale.Want != updated.ResourceVersion || stale.Seen != oldA.ResourceVersion {
		t.Errorf("primed Get a: %+v, want a write expectation for rv %s seen at %s", *stale, updated.ResourceVersion, oldA.ResourceVersion)
	}
	if diff := cmp.Diff(updated, mine); diff != "" {
		t.Errorf("stale Get a changed the caller's object (-want +got):\n%s", diff)
	}
	var gotB corev1.ConfigMap
	err = reader.Get(ctx, keyB, &gotB)
	if !errors.Is(err, expectations.ErrStale) || !errors.As(err, &stale) {
		t.Fatalf("primed Get b = %v, want ErrStale (%v since the writes, lag %v)", err, time.Since(wrote), primeLag)
	}
	if !stale.Deletion || stale.Seen != cachedB.ResourceVersion {
		t.Errorf("primed Get b: %+v, want a deletion expectation seen at %s", *stale, cachedB.ResourceVersion)
	}
	if gotB.ResourceVersion != "" || gotB.Name != "" {
		t.Errorf("stale Get b filled the caller's object: %+v", gotB.ObjectMeta)
	}

	// The cache catches up: the Reader hands out the server's a, and b is
	// gone, which settles both expectations.
	waitFor(t, "the cache to catch up with a's update", func(ctx context.Context) (bool, error) {
		err := reader.Get(ctx, keyA, mine)
		if errors.Is(err, expectations.ErrStale) {
			return false, nil
		}
		return err == nil, err
	})
	if mine.ResourceVersion != updated.ResourceVersion || mine.Data["phase"] != "Deleting" {
		t.Errorf("after catching up a is at rv %s phase %q, want rv %s phase Deleting", mine.ResourceVersion, mine.Data["phase"], updated.ResourceVersion)
	}
	waitFor(t, "the cache to see b's deletion", func(ctx context.Context) (bool, error) {
		err := reader.Get(ctx, keyB, &corev1.ConfigMap{})
		if errors.Is(err, expectations.ErrStale) {
			return false, nil
		}
		if err == nil {
			return false, errors.New("b handed out while its deletion is expected")
		}
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	waitFor(t, "the primed tracker to settle", func(context.Context) (bool, error) {
		return tr.Pending() == 0, nil
	})
	if since := time.Since(wrote); since < primeLag {
		t.Errorf("the cache caught up %v after the writes, before the lag of %v: the stale window was not the lag's", since, primeLag)
	}
}
