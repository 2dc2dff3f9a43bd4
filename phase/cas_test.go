package phase_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/racesafe/racesafe/expectations"
	"github.com/racesafe/racesafe/phase"
	"github.com/racesafe/racesafe/requeue"
)

// setServerPhase writes ph to the server directly, as another writer would.
func (e *env) setServerPhase(t *testing.T, ph Phase) {
	t.Helper()
	p := e.live(t)
	setPhase(p, ph)
	if err := e.server.Status().Update(t.Context(), p); err != nil {
		t.Fatalf("set the server's phase to %s: %v", ph, err)
	}
}

// TestTransitionIsCompareAndSwap replays a stale copy: the server went
// Failed -> Deleting -> Deleted, and the machine reconciles the copy that
// still says Failed. Its transition to Deleting conflicts, the live re-read
// shows Deleted, and the transition must not be written over it.
func TestTransitionIsCompareAndSwap(t *testing.T) {
	e := newEnv(t, newPod(Failed))
	stale := e.live(t)
	e.setServerPhase(t, Deleting)
	e.setServerPhase(t, Deleted)
	patchesBefore := e.statusPatches.Load()

	var dispatched []Phase
	record := func(d phase.Decision) phase.Handler[*corev1.Pod, Phase] {
		return func(_ context.Context, s *phase.Step[*corev1.Pod, Phase]) (phase.Decision, error) {
			dispatched = append(dispatched, s.Phase())
			return d, nil
		}
	}
	opts := podOptions(e.writer, handlerMap{
		Failed:   record(phase.Transition(Deleting)),
		Deleting: record(phase.WaitForEvent("uninstall job finishes")), // the incident's executeUninstall
		Deleted:  record(phase.Done()),
	})
	opts.Name = "cas"
	opts.Transitions = map[Phase][]Phase{Failed: {Deleting}, Deleting: {Deleted}}
	opts.Terminal = []Phase{Deleted}
	m := mustNew(t, opts)
	counted := counterDelta(t, "racesafe_phase_transitions_total", map[string]string{"controller": "cas", "from": "Failed", "to": "Deleting"})

	res, err := m.Reconcile(t.Context(), stale)
	if got := getPhase(e.live(t)); got != Deleted {
		t.Errorf("server phase = %q after the stale replay, want Deleted: the transition is not compare-and-swap", got)
	}
	if err == nil {
		t.Errorf("Reconcile of the stale copy = %+v, nil; want an error saying the phase moved", res)
	}
	checkPhaseMoved(t, err, "Failed", "Deleting", "Deleted")
	if want := []Phase{Failed}; len(dispatched) != 1 || dispatched[0] != Failed {
		t.Errorf("dispatched %v, want %v: nothing runs after the phase moved", dispatched, want)
	}
	if n := e.statusPatches.Load() - patchesBefore; n != 1 {
		t.Errorf("%d status patches sent, want 1 (the one that conflicted)", n)
	}
	if d := counted(); d != 0 {
		t.Errorf("racesafe_phase_transitions_total Failed->Deleting grew by %v, want 0", d)
	}

	dispatched = nil
	if _, err := m.Reconcile(t.Context(), e.live(t)); err != nil {
		t.Fatalf("Reconcile of the live object: %v", err)
	}
	if len(dispatched) != 1 || dispatched[0] != Deleted {
		t.Errorf("next reconcile dispatched %v, want [Deleted]", dispatched)
	}
}

// checkPhaseMoved asserts err is a *PhaseMovedError from -> to with the
// live phase live, matched by ErrPhaseMoved and expectations.ErrStale, and
// that requeue.OnStale turns it into a quiet requeue.
func checkPhaseMoved(t *testing.T, err error, from, to, live string) {
	t.Helper()
	var pm *phase.PhaseMovedError
	if !errors.As(err, &pm) {
		t.Fatalf("error = %v, want a *PhaseMovedError", err)
	}
	if pm.From != from || pm.To != to || pm.Live != live || pm.Object != "default/item" {
		t.Errorf("PhaseMovedError = %+v, want From %q, To %q, Live %q of default/item", pm, from, to, live)
	}
	if !errors.Is(err, phase.ErrPhaseMoved) || !errors.Is(err, expectations.ErrStale) {
		t.Errorf("errors.Is(%v, ErrPhaseMoved / expectations.ErrStale) = %v / %v, want true / true",
			err, errors.Is(err, phase.ErrPhaseMoved), errors.Is(err, expectations.ErrStale))
	}
	if res, err := requeue.OnStale(err, time.Second); err != nil || res.RequeueAfter != time.Second {
		t.Errorf("requeue.OnStale = %+v, %v; want a requeue after 1s and no error", res, err)
	}
}

// TestStepPatchIsCompareAndSwap: a handler's status change decided on a
// stale copy is not written onto an object whose phase moved.
func TestStepPatchIsCompareAndSwap(t *testing.T) {
	e := newEnv(t, newPod(Failed))
	stale := e.live(t)
	e.setServerPhase(t, Deleted)
	var patchErr error
	opts := podOptions(e.writer, handlerMap{
		Failed: func(ctx context.Context, s *phase.Step[*corev1.Pod, Phase]) (phase.Decision, error) {
			patchErr = s.Patch(ctx, setDryRun)
			return phase.Decision{}, patchErr
		},
	})
	opts.Name = "patch-cas"
	opts.Terminal = []Phase{Deleted}
	_, err := mustNew(t, opts).Reconcile(t.Context(), stale)
	checkPhaseMoved(t, patchErr, "Failed", "Failed", "Deleted")
	if !errors.Is(err, phase.ErrPhaseMoved) {
		t.Errorf("Reconcile = %v, want the handler's ErrPhaseMoved", err)
	}
	if live := e.live(t); hasDryRun(live) {
		t.Errorf("the condition was written onto the Deleted object")
	}
}
