package statusupdate_test

import (
	"context"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/racesafe/racesafe/internal/testenv"
	"github.com/racesafe/racesafe/statusupdate"
)

// incidentUpdateStatus is the incident's updateStatus, with the reader it
// used made explicit: the manager's client read from the cache.
func incidentUpdateStatus(ctx context.Context, r client.Reader, w client.StatusClient, item *corev1.Pod, phase corev1.PodPhase) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := r.Get(ctx, client.ObjectKeyFromObject(item), item); err != nil {
			return err
		}
		before := item.DeepCopy()
		item.Status.Phase = phase
		return w.Status().Patch(ctx, item, client.MergeFrom(before))
	})
}

// phaseFor alternates phases, so that every transition is a real change.
func phaseFor(i int) corev1.PodPhase {
	if i%2 == 0 {
		return corev1.PodRunning
	}
	return corev1.PodPending
}

// staleReads counts Gets that moved the caller's object back to an older
// resourceVersion: the incident's rollback.
type staleReads struct {
	client.Reader
	mu    sync.Mutex
	count int
}

func (s *staleReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	held := obj.GetResourceVersion()
	if err := s.Reader.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if held != "" && obj.GetResourceVersion() != held {
		if n, err := resourceversion.CompareResourceVersion(obj.GetResourceVersion(), held); err == nil && n < 0 {
			s.mu.Lock()
			s.count++
			s.mu.Unlock()
		}
	}
	return nil
}

// TestRequestsPerTransition counts what N status transitions cost on a real
// API server, through the Patcher and through the incident's updateStatus.
func TestRequestsPerTransition(t *testing.T) {
	const n = 40
	env := testenv.Start(t, testenv.Options{})
	cfg, counter := countRequests(env.Config)
	c := newClient(t, cfg) // counted; direct to the API server

	perTransition := func(verbs map[string]int) (get, patch float64, other int) {
		for verb, k := range verbs {
			switch verb {
			case "GET":
			case "PATCH":
			default:
				other += k
			}
		}
		return float64(verbs["GET"]) / n, float64(verbs["PATCH"]) / n, other
	}
	report := func(t *testing.T, name string, verbs map[string]int) (get, patch float64) {
		get, patch, other := perTransition(verbs)
		t.Logf("%-34s %d transitions: %.2f GET + %.2f PATCH per transition (other requests: %d)", name, n, get, patch, other)
		if other != 0 {
			t.Errorf("%s: unexpected requests %v", name, verbs)
		}
		return get, patch
	}

	t.Run("Patcher", func(t *testing.T) {
		held := createPod(t, c, "patcher") // also warms the client's REST mapping
		counter.take()
		p := statusupdate.New[*corev1.Pod](c, c, statusupdate.Options{})
		for i := range n {
			written, err := p.PatchStatus(t.Context(), held, setPhase(phaseFor(i)))
			if err != nil {
				t.Fatalf("transition %d: %v", i, err)
			}
			if written.Status.Phase != phaseFor(i) {
				t.Errorf("transition %d: returned phase %s, want %s", i, written.Status.Phase, phaseFor(i))
			}
			held = written
		}
		verbs, _ := counter.take()
		if get, patch := report(t, "Patcher", verbs); get != 0 || patch != 1 {
			t.Errorf("Patcher: %.2f GET + %.2f PATCH per transition, want 0 + 1", get, patch)
		}
	})

	t.Run("IncidentDirectGet", func(t *testing.T) {
		item := createPod(t, c, "incident-direct")
		counter.take()
		for i := range n {
			if err := incidentUpdateStatus(t.Context(), c, c, item, phaseFor(i)); err != nil {
				t.Fatalf("transition %d: %v", i, err)
			}
		}
		verbs, _ := counter.take()
		if get, patch := report(t, "incident updateStatus, live Get", verbs); get != 1 || patch != 1 {
			t.Errorf("incident: %.2f GET + %.2f PATCH per transition, want 1 + 1", get, patch)
		}
	})

	// With the Get served by an informer cache, as in the incident, the GETs
	// leave the API server, but the Get can roll the object back. The cache
	// lists and watches through its own, uncounted config.
	t.Run("IncidentCachedGet", func(t *testing.T) {
		informers, err := cache.New(env.Config, cache.Options{Scheme: scheme.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		testenv.Run(t.Context(), t, informers)
		item := createPod(t, c, "incident-cached")
		// The first Get starts the Pod informer and waits for its sync.
		if err := informers.Get(t.Context(), client.ObjectKeyFromObject(item), &corev1.Pod{}); err != nil {
			t.Fatal(err)
		}
		reader := &staleReads{Reader: informers}
		counter.take()
		lost := 0
		for i := range n {
			if err := incidentUpdateStatus(t.Context(), reader, c, item, phaseFor(i)); err != nil {
				t.Fatalf("transition %d: %v", i, err)
			}
			// A stale Get that already showed the wanted phase makes the
			// merge patch empty: the transition was never written.
			if item.Status.Phase != phaseFor(i) {
				lost++
			}
		}
		verbs, _ := counter.take()
		get, patch := report(t, "incident updateStatus, cached Get", verbs)
		t.Logf("%-34s stale Gets that rolled the object back: %d; transitions not written: %d of %d",
			"", reader.count, lost, n)
		if get != 0 || patch != 1 {
			t.Errorf("incident with cache: %.2f GET + %.2f PATCH per transition, want 0 + 1", get, patch)
		}
	})
}
