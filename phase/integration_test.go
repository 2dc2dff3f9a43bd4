package phase_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/racesafe/racesafe/internal/testenv"
	"github.com/racesafe/racesafe/phase"
	"github.com/racesafe/racesafe/statusupdate"
)

var itemGVK = schema.GroupVersionKind{Group: "test.racesafe.io", Version: "v1", Kind: "Item"}

type item = *unstructured.Unstructured

func itemPhase(u item) Phase {
	p, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	return Phase(p)
}

func setItemPhase(u item, p Phase) {
	_ = unstructured.SetNestedField(u.Object, string(p), "status", "phase")
}

// apiServer is a control plane with the Item kind and a client that counts
// the PATCH requests it sends.
type apiServer struct {
	c       client.Client
	patches atomic.Int32
}

func startAPIServer(t *testing.T) *apiServer {
	t.Helper()
	env := testenv.Start(t, testenv.Options{CRDs: []*apiextensionsv1.CustomResourceDefinition{testenv.OpenCRD(itemGVK, "items", true)}})
	s := &apiServer{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPatch {
				s.patches.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	s.c = testenv.Client(t, cfg, client.Options{})
	return s
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// create makes an Item named name in phase ph.
func (s *apiServer) create(t *testing.T, name string, ph Phase, finalizers ...string) item {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(itemGVK)
	u.SetNamespace(metav1.NamespaceDefault)
	u.SetName(name)
	u.SetFinalizers(finalizers)
	if err := s.c.Create(t.Context(), u); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	s.setPhase(t, u, ph)
	return s.get(t, name)
}

func (s *apiServer) get(t *testing.T, name string) item {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(itemGVK)
	if err := s.c.Get(t.Context(), client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: name}, u); err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	return u
}

// setPhase writes ph as another writer would.
func (s *apiServer) setPhase(t *testing.T, u item, ph Phase) {
	t.Helper()
	live := s.get(t, u.GetName())
	setItemPhase(live, ph)
	if err := s.c.Status().Update(t.Context(), live); err != nil {
		t.Fatalf("set phase %s of %s: %v", ph, u.GetName(), err)
	}
}

func itemMachine(t *testing.T, s *apiServer, name string, handlers map[Phase]phase.Handler[item, Phase]) *phase.Machine[item, Phase] {
	t.Helper()
	m, err := phase.New(phase.Options[item, Phase]{
		Name:        name,
		Get:         itemPhase,
		Set:         setItemPhase,
		Writer:      statusupdate.New[item](s.c, s.c, statusupdate.Options{Backoff: wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 5}}),
		Handlers:    handlers,
		Transitions: map[Phase][]Phase{Failed: {Deleting}, Deleting: {Deleted}},
		Terminal:    []Phase{Deleted},
		Interval:    func() time.Duration { return 7 * time.Second },
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func itemDecide(d phase.Decision) phase.Handler[item, Phase] {
	return func(context.Context, *phase.Step[item, Phase]) (phase.Decision, error) { return d, nil }
}

// TestIntegrationWritesAreCompareAndSwap runs the guarantees whose point is
// the API server's own answer: its resourceVersion precondition, the object
// it returns, and its removal of a deleted object without finalizers.
func TestIntegrationWritesAreCompareAndSwap(t *testing.T) {
	s := startAPIServer(t)

	t.Run("stale transition refused", func(t *testing.T) {
		stale := s.create(t, "stale-transition", Failed)
		s.setPhase(t, stale, Deleting)
		s.setPhase(t, stale, Deleted)
		var dispatched []Phase
		m := itemMachine(t, s, "it-cas", map[Phase]phase.Handler[item, Phase]{
			Failed:   itemDecide(phase.Transition(Deleting)),
			Deleting: itemDecide(phase.WaitForEvent("uninstall job finishes")),
			Deleted: func(_ context.Context, st *phase.Step[item, Phase]) (phase.Decision, error) {
				dispatched = append(dispatched, st.Phase())
				return phase.Done(), nil
			},
		})
		_, err := m.Reconcile(t.Context(), stale)
		var pm *phase.PhaseMovedError
		if !errors.As(err, &pm) || pm.From != "Failed" || pm.To != "Deleting" || pm.Live != "Deleted" {
			t.Fatalf("Reconcile of the stale copy = %v, want a *PhaseMovedError Failed -> Deleting, live Deleted", err)
		}
		if got := itemPhase(s.get(t, "stale-transition")); got != Deleted {
			t.Errorf("server phase = %q, want Deleted", got)
		}
		if _, err := m.Reconcile(t.Context(), s.get(t, "stale-transition")); err != nil || len(dispatched) != 1 {
			t.Errorf("Reconcile of the live object = %v, dispatched %v; want [Deleted]", err, dispatched)
		}
	})

	// Issue 19, defect 1: a stale copy of uid1 (Failed) is replayed after
	// uid1 was deleted and a new object of its name (uid2) reached Failed.
	// The transition conflicts; the re-read finds uid2 in the pinned phase.
	// Nothing may be written to uid2 and no handler of the next phase runs.
	t.Run("transition never crosses incarnations", func(t *testing.T) {
		old := s.create(t, "incarnation", Failed)
		if err := s.c.Delete(t.Context(), old); err != nil {
			t.Fatal(err)
		}
		current := s.create(t, "incarnation", Failed)
		if current.GetUID() == old.GetUID() {
			t.Fatal("the new object has the old UID")
		}
		uninstalls := 0
		m := itemMachine(t, s, "it-incarnation", map[Phase]phase.Handler[item, Phase]{
			Failed: itemDecide(phase.Transition(Deleting)),
			Deleting: func(context.Context, *phase.Step[item, Phase]) (phase.Decision, error) {
				uninstalls++
				return phase.WaitForEvent("uninstall job finishes"), nil
			},
		})
		_, err := m.Reconcile(t.Context(), old)
		if !errors.Is(err, statusupdate.ErrIncarnation) {
			t.Fatalf("Reconcile of the old incarnation = %v, want ErrIncarnation", err)
		}
		live := s.get(t, "incarnation")
		if got := itemPhase(live); got != Failed || live.GetResourceVersion() != current.GetResourceVersion() || uninstalls != 0 {
			t.Fatalf("the new incarnation was acted on: phase %q, resourceVersion %s (was %s), %d uninstalls",
				got, live.GetResourceVersion(), current.GetResourceVersion(), uninstalls)
		}
	})

	t.Run("transition with a condition is one request", func(t *testing.T) {
		in := s.create(t, "with", Failed)
		m := itemMachine(t, s, "it-with", map[Phase]phase.Handler[item, Phase]{
			Failed: itemDecide(phase.TransitionWith(Deleting, func(u item) error {
				return unstructured.SetNestedField(u.Object, "True", "status", "uninstalling")
			})),
			Deleting: itemDecide(phase.WaitForEvent("uninstall job finishes")),
		})
		before := s.patches.Load()
		if _, err := m.Reconcile(t.Context(), in); err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
		if n := s.patches.Load() - before; n != 1 {
			t.Errorf("%d PATCH requests, want 1", n)
		}
		live := s.get(t, "with")
		if got, _, _ := unstructured.NestedString(live.Object, "status", "uninstalling"); itemPhase(live) != Deleting || got != "True" {
			t.Errorf("server holds phase %q, uninstalling %q; want Deleting, True", itemPhase(live), got)
		}
	})

	release := phase.Release(func(u item) error {
		controllerutil.RemoveFinalizer(u, finalizer)
		return nil
	})
	t.Run("release removes the object", func(t *testing.T) {
		in := s.create(t, "release", Deleting, finalizer)
		if err := s.c.Delete(t.Context(), in); err != nil {
			t.Fatal(err)
		}
		m := itemMachine(t, s, "it-release", map[Phase]phase.Handler[item, Phase]{
			Failed:   itemDecide(phase.Transition(Deleting)),
			Deleting: itemDecide(release),
		})
		released := counterDelta(t, "racesafe_phase_releases_total", map[string]string{"controller": "it-release", "from": "Deleting"})
		before := s.patches.Load()
		if res, err := m.Reconcile(t.Context(), s.get(t, "release")); err != nil || !res.IsZero() {
			t.Fatalf("Reconcile = %+v, %v; want an empty result", res, err)
		}
		if n := s.patches.Load() - before; n != 1 {
			t.Errorf("%d PATCH requests, want 1", n)
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(itemGVK)
		if err := s.c.Get(t.Context(), client.ObjectKeyFromObject(in), u); !apierrors.IsNotFound(err) {
			t.Errorf("Get after the release = %v, want NotFound", err)
		}
		if d := released(); d != 1 {
			t.Errorf("racesafe_phase_releases_total grew by %v, want 1", d)
		}
	})

	t.Run("stale release refused", func(t *testing.T) {
		stale := s.create(t, "stale-release", Failed, finalizer)
		s.setPhase(t, stale, Deleting)
		if err := s.c.Delete(t.Context(), stale); err != nil {
			t.Fatal(err)
		}
		m := itemMachine(t, s, "it-release-cas", map[Phase]phase.Handler[item, Phase]{
			Failed:   itemDecide(release),
			Deleting: itemDecide(phase.WaitForEvent("uninstall job finishes")),
		})
		_, err := m.Reconcile(t.Context(), stale)
		var pm *phase.PhaseMovedError
		if !errors.As(err, &pm) || !pm.Release || pm.Live != "Deleting" {
			t.Fatalf("Reconcile of the stale copy = %v, want a *PhaseMovedError of a release, live Deleting", err)
		}
		if live := s.get(t, "stale-release"); !controllerutil.ContainsFinalizer(live, finalizer) {
			t.Errorf("the finalizer is gone: the stale copy released the object")
		}
	})
}
