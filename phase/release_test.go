package phase_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/racesafe/racesafe/phase"
)

const finalizer = "racesafe.test/uninstall"

func removeFinalizer(p *corev1.Pod) error {
	controllerutil.RemoveFinalizer(p, finalizer)
	return nil
}

// deletingPod is an item whose deletion was requested while in phase ph:
// the fake client keeps it because of the finalizer.
func deletingEnv(t *testing.T, ph Phase) *env {
	t.Helper()
	p := newPod(ph)
	p.Finalizers = []string{finalizer}
	e := newEnv(t, p)
	if err := e.server.Delete(t.Context(), e.live(t)); err != nil {
		t.Fatalf("request deletion: %v", err)
	}
	if e.live(t).DeletionTimestamp == nil {
		t.Fatalf("the fixture's pod has no deletionTimestamp after Delete")
	}
	return e
}

func releaseOptions(e *env, name string, handlers handlerMap) phase.Options[*corev1.Pod, Phase] {
	opts := podOptions(e.writer, handlers)
	opts.Name = name
	opts.Transitions = map[Phase][]Phase{Failed: {Deleting}}
	return opts
}

// TestReleaseEndsTheFlow: a flow ends by removing the finalizer in one
// write, without a terminal phase written first.
func TestReleaseEndsTheFlow(t *testing.T) {
	e := deletingEnv(t, Deleting)
	opts := releaseOptions(e, "release", handlerMap{
		Failed:   decide(phase.Transition(Deleting), nil),
		Deleting: decide(phase.Release(removeFinalizer), nil),
	})
	released := counterDelta(t, "racesafe_phase_releases_total", map[string]string{"controller": "release", "from": "Deleting"})
	var (
		mu    sync.Mutex
		lines []string
	)
	ctx := log.IntoContext(t.Context(), funcr.New(func(_, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{}))
	res, err := mustNew(t, opts).Reconcile(ctx, e.live(t))
	if err != nil || !res.IsZero() {
		t.Fatalf("Reconcile = %+v, %v; want an empty result after the release", res, err)
	}
	if n, s := e.objectPatches.Load(), e.statusPatches.Load(); n != 1 || s != 0 {
		t.Errorf("%d object patches and %d status patches sent, want 1 and 0", n, s)
	}
	if err := e.server.Get(t.Context(), key, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get after the release = %v, want NotFound: the server removes a deleted object without finalizers", err)
	}
	if d := released(); d != 1 {
		t.Errorf("racesafe_phase_releases_total grew by %v, want 1", d)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.ContainsFunc(lines, func(l string) bool {
		return strings.Contains(l, `"msg"="released"`) && strings.Contains(l, `"machine"="release"`) &&
			strings.Contains(l, `"phase"="Deleting"`)
	}) {
		t.Errorf("no release log line with machine and phase in %q", lines)
	}
}

// TestReleaseIsCompareAndSwap: a stale copy in an older phase cannot
// release the object.
func TestReleaseIsCompareAndSwap(t *testing.T) {
	p := newPod(Failed)
	p.Finalizers = []string{finalizer}
	e := newEnv(t, p)
	stale := e.live(t)
	e.setServerPhase(t, Deleting)
	if err := e.server.Delete(t.Context(), e.live(t)); err != nil {
		t.Fatal(err)
	}
	opts := releaseOptions(e, "release-cas", handlerMap{
		// A handler that would release from Failed, say "nothing was ever
		// installed", run on the stale copy.
		Failed:   decide(phase.Release(removeFinalizer), nil),
		Deleting: decide(phase.WaitForEvent("uninstall job finishes"), nil),
	})
	released := counterDelta(t, "racesafe_phase_releases_total", map[string]string{"controller": "release-cas", "from": "Failed"})
	_, err := mustNew(t, opts).Reconcile(t.Context(), stale)
	var pm *phase.PhaseMovedError
	if !errors.As(err, &pm) || !pm.Release || pm.From != "Failed" || pm.Live != "Deleting" {
		t.Fatalf("Reconcile = %v, want a *PhaseMovedError of a release in Failed, live Deleting", err)
	}
	live := e.live(t)
	if !controllerutil.ContainsFinalizer(live, finalizer) || getPhase(live) != Deleting {
		t.Errorf("server holds finalizers %v, phase %q; want the finalizer kept, Deleting", live.Finalizers, getPhase(live))
	}
	if n := e.objectPatches.Load(); n != 1 {
		t.Errorf("%d object patches sent, want 1 (the one that conflicted)", n)
	}
	if d := released(); d != 0 {
		t.Errorf("racesafe_phase_releases_total grew by %v, want 0", d)
	}
}

func TestReleaseRefused(t *testing.T) {
	// unchanged runs mutate but answers with the object it was given, as a
	// Writer does when it finds nothing to send.
	var unchanged writerFunc = func(_ context.Context, obj *corev1.Pod, mutate func(*corev1.Pod) error) (*corev1.Pod, error) {
		if err := mutate(obj.DeepCopy()); err != nil {
			return nil, err
		}
		return obj.DeepCopy(), nil
	}
	// unsent answers with its own changed copy, at the resourceVersion sent.
	var unsent writerFunc = func(_ context.Context, obj *corev1.Pod, mutate func(*corev1.Pod) error) (*corev1.Pod, error) {
		c := obj.DeepCopy()
		return c, mutate(c)
	}
	tests := []struct {
		name        string
		decision    phase.Decision
		writer      phase.Writer[*corev1.Pod]
		notDeleting bool
		want        []error
	}{
		{name: "nil function", decision: phase.Release[*corev1.Pod](nil),
			want: []error{phase.ErrInvalidDecision, phase.ErrNilMutate}},
		{name: "another type", decision: phase.Release(func(*corev1.ConfigMap) error { return nil }),
			want: []error{phase.ErrInvalidDecision}},
		{name: "phase changed", decision: phase.Release(func(p *corev1.Pod) error {
			setPhase(p, Deleted)
			return removeFinalizer(p)
		}), want: []error{phase.ErrPhaseChanged}},
		{name: "answer unchanged", decision: phase.Release(removeFinalizer), writer: unchanged,
			want: []error{phase.ErrReleaseNotWritten}},
		{name: "answer at the resourceVersion sent, object kept", decision: phase.Release(removeFinalizer),
			writer: unsent, notDeleting: true, want: []error{phase.ErrReleaseNotWritten}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e *env
			if tt.notDeleting {
				p := newPod(Deleting)
				p.Finalizers = []string{finalizer}
				e = newEnv(t, p)
			} else {
				e = deletingEnv(t, Deleting)
			}
			opts := releaseOptions(e, "release-refused", handlerMap{
				Failed:   decide(phase.Transition(Deleting), nil),
				Deleting: decide(tt.decision, nil),
			})
			if tt.writer != nil {
				opts.Writer = tt.writer
			}
			released := counterDelta(t, "racesafe_phase_releases_total", map[string]string{"controller": opts.Name, "from": "Deleting"})
			_, err := mustNew(t, opts).Reconcile(t.Context(), e.live(t))
			for _, want := range tt.want {
				if !errors.Is(err, want) {
					t.Errorf("Reconcile = %v, want errors.Is %v", err, want)
				}
			}
			if n := e.objectPatches.Load(); n != 0 {
				t.Errorf("%d object patches sent, want 0", n)
			}
			if !controllerutil.ContainsFinalizer(e.live(t), finalizer) {
				t.Errorf("the finalizer is gone")
			}
			if d := released(); d != 0 {
				t.Errorf("racesafe_phase_releases_total grew by %v, want 0", d)
			}
		})
	}
}

// TestReleaseRemovalAnswer: the API server answers a write that removed the
// object with the object it was sent, at the resourceVersion sent; that
// answer acknowledges the release.
func TestReleaseRemovalAnswer(t *testing.T) {
	e := deletingEnv(t, Deleting)
	var asServer writerFunc = func(_ context.Context, obj *corev1.Pod, mutate func(*corev1.Pod) error) (*corev1.Pod, error) {
		c := obj.DeepCopy()
		return c, mutate(c)
	}
	opts := releaseOptions(e, "release-answer", handlerMap{
		Failed:   decide(phase.Transition(Deleting), nil),
		Deleting: decide(phase.Release(removeFinalizer), nil),
	})
	opts.Writer = asServer
	released := counterDelta(t, "racesafe_phase_releases_total", map[string]string{"controller": opts.Name, "from": "Deleting"})
	if res, err := mustNew(t, opts).Reconcile(t.Context(), e.live(t)); err != nil || !res.IsZero() {
		t.Fatalf("Reconcile = %+v, %v; want an empty result", res, err)
	}
	if d := released(); d != 1 {
		t.Errorf("racesafe_phase_releases_total grew by %v, want 1", d)
	}
}
