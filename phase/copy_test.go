package phase_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/racesafe/racesafe/phase"
)

// TestTransitionComputedAgainstServerCopy: what a handler does to
// s.Object() cannot make a transition look written. The write is computed
// against the machine's own copy of what the server last returned.
func TestTransitionComputedAgainstServerCopy(t *testing.T) {
	t.Run("handler set the new phase in place", func(t *testing.T) {
		e := newEnv(t, newPod(Failed))
		var deletingSaw *corev1.Pod
		opts := podOptions(e.writer, handlerMap{
			Failed: func(_ context.Context, s *phase.Step[*corev1.Pod, Phase]) (phase.Decision, error) {
				setPhase(s.Object(), Deleting)
				return phase.Transition(Deleting), nil
			},
			Deleting: func(_ context.Context, s *phase.Step[*corev1.Pod, Phase]) (phase.Decision, error) {
				deletingSaw = s.Object().DeepCopy()
				return phase.WaitForEvent("uninstall job finishes"), nil
			},
		})
		opts.Name = "in-place"
		opts.Transitions = map[Phase][]Phase{Failed: {Deleting}}
		counted := counterDelta(t, "racesafe_phase_transitions_total", map[string]string{"controller": "in-place", "from": "Failed", "to": "Deleting"})
		in := e.live(t)
		if _, err := mustNew(t, opts).Reconcile(t.Context(), in); err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
		if got := getPhase(e.live(t)); got != Deleting {
			t.Errorf("server phase = %q, want Deleting", got)
		}
		if n := e.statusPatches.Load(); n != 1 {
			t.Errorf("%d status patches sent, want 1", n)
		}
		if deletingSaw == nil || deletingSaw.ResourceVersion == in.ResourceVersion {
			t.Errorf("Deleting handler ran on an object at resourceVersion %s, want the one the server wrote, newer than %s",
				deletingSaw.GetResourceVersion(), in.ResourceVersion)
		}
		if d := counted(); d != 1 {
			t.Errorf("racesafe_phase_transitions_total grew by %v, want 1", d)
		}
	})
	t.Run("stale helper read into Object", func(t *testing.T) {
		// The server went Running -> Pending; the cache still shows Running.
		e := newEnv(t, newPod(Running))
		e.freezeCache(t)
		e.setServerPhase(t, Pending)
		var runningSaw []Phase
		opts := podOptions(e.writer, handlerMap{
			Pending: func(ctx context.Context, s *phase.Step[*corev1.Pod, Phase]) (phase.Decision, error) {
				if err := e.mgrClient.Get(ctx, key, s.Object()); err != nil {
					return phase.Decision{}, err
				}
				if getPhase(s.Object()) != Running {
					t.Fatalf("the helper's read loaded %q, want the stale Running", getPhase(s.Object()))
				}
				return phase.Transition(Running), nil
			},
			Running: func(_ context.Context, s *phase.Step[*corev1.Pod, Phase]) (phase.Decision, error) {
				runningSaw = append(runningSaw, s.Phase(), getPhase(s.Object()))
				return phase.WaitForEvent("job finishes"), nil
			},
		})
		opts.Name = "stale-read"
		opts.Transitions = map[Phase][]Phase{Pending: {Running}}
		counted := counterDelta(t, "racesafe_phase_transitions_total", map[string]string{"controller": "stale-read", "from": "Pending", "to": "Running"})
		if _, err := mustNew(t, opts).Reconcile(t.Context(), e.live(t)); err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
		if got := getPhase(e.live(t)); got != Running {
			t.Errorf("server phase = %q, want Running", got)
		}
		if n := e.statusPatches.Load(); n != 1 {
			t.Errorf("%d status patches sent, want 1", n)
		}
		if len(runningSaw) != 2 || runningSaw[0] != Running || runningSaw[1] != Running {
			t.Errorf("Running handler saw Phase, Object phase = %v, want [Running Running]", runningSaw)
		}
		if d := counted(); d != 1 {
			t.Errorf("racesafe_phase_transitions_total grew by %v, want 1", d)
		}
	})
}

// TestStepPatchComputedAgainstServerCopy: a change a handler made to
// s.Object() in place is not taken as already written.
func TestStepPatchComputedAgainstServerCopy(t *testing.T) {
	e := newEnv(t, newPod(Running))
	opts := podOptions(e.writer, handlerMap{
		Running: func(ctx context.Context, s *phase.Step[*corev1.Pod, Phase]) (phase.Decision, error) {
			s.Object().Status.Conditions = append(s.Object().Status.Conditions, dryRunTrue)
			s.Object().Status.Message = "scribbled"
			if err := s.Patch(ctx, func(p *corev1.Pod) error {
				if !hasDryRun(p) {
					p.Status.Conditions = append(p.Status.Conditions, dryRunTrue)
				}
				return nil
			}); err != nil {
				return phase.Decision{}, err
			}
			if s.Object().Status.Message != "" || !hasDryRun(s.Object()) {
				t.Errorf("after Patch, Object() = message %q, DryRun %v; want the written object", s.Object().Status.Message, hasDryRun(s.Object()))
			}
			return phase.WaitForEvent("job finishes"), nil
		},
	})
	if _, err := mustNew(t, opts).Reconcile(t.Context(), e.live(t)); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	live := e.live(t)
	if !hasDryRun(live) || live.Status.Message != "" {
		t.Errorf("server holds DryRun %v, message %q; want true and no message", hasDryRun(live), live.Status.Message)
	}
	if n := e.statusPatches.Load(); n != 1 {
		t.Errorf("%d status patches sent, want 1", n)
	}
}

// TestTransitionAcknowledged: a transition counts as written only if the
// Writer returned the new phase at a new resourceVersion.
func TestTransitionAcknowledged(t *testing.T) {
	pod := newPod(Failed)
	pod.ResourceVersion = "5"
	unsent := writerFunc(func(_ context.Context, obj *corev1.Pod, mutate func(*corev1.Pod) error) (*corev1.Pod, error) {
		c := obj.DeepCopy()
		return c, mutate(c) // ran mutate, sent nothing
	})
	var deletingRan bool
	opts := podOptions(unsent, handlerMap{
		Failed: decide(phase.Transition(Deleting), nil),
		Deleting: func(context.Context, *phase.Step[*corev1.Pod, Phase]) (phase.Decision, error) {
			deletingRan = true
			return phase.RequeueAfter(time.Second), nil
		},
	})
	opts.Name = "unacknowledged"
	opts.Transitions = map[Phase][]Phase{Failed: {Deleting}}
	counted := counterDelta(t, "racesafe_phase_transitions_total", map[string]string{"controller": "unacknowledged", "from": "Failed", "to": "Deleting"})
	_, err := mustNew(t, opts).Reconcile(t.Context(), pod)
	if !errors.Is(err, phase.ErrPhaseNotWritten) {
		t.Errorf("Reconcile = %v, want ErrPhaseNotWritten", err)
	}
	if deletingRan {
		t.Errorf("the Deleting handler ran although nothing was written")
	}
	if d := counted(); d != 0 {
		t.Errorf("racesafe_phase_transitions_total grew by %v, want 0", d)
	}
}

// TestSelfTransitionRefused: A -> A writes nothing the server could
// acknowledge, so New refuses a table listing it and Reconcile refuses it.
func TestSelfTransitionRefused(t *testing.T) {
	e := newEnv(t, newPod(Running))
	opts := podOptions(e.writer, handlerMap{Running: decide(phase.Transition(Running), nil)})
	opts.Name = "self"
	opts.Transitions = map[Phase][]Phase{Running: {Running}}
	if _, err := phase.New(opts); !errors.Is(err, phase.ErrInvalidOptions) {
		t.Errorf("New with Running -> Running = %v, want ErrInvalidOptions", err)
	}
	opts.Transitions = nil
	counted := counterDelta(t, "racesafe_phase_transitions_total", map[string]string{"controller": "self", "from": "Running", "to": "Running"})
	_, err := mustNew(t, opts).Reconcile(t.Context(), e.live(t))
	checkSelfTransition(t, err)
	if n := e.statusPatches.Load(); n != 0 {
		t.Errorf("%d status patches sent, want 0", n)
	}
	if d := counted(); d != 0 {
		t.Errorf("racesafe_phase_transitions_total grew by %v, want 0", d)
	}
}

func checkSelfTransition(t *testing.T, err error) {
	t.Helper()
	var te *phase.TransitionError
	if !errors.As(err, &te) || te.From != "Running" || te.To != "Running" {
		t.Fatalf("Reconcile = %v, want a *TransitionError Running -> Running", err)
	}
	if !errors.Is(err, phase.ErrSelfTransition) || !errors.Is(err, phase.ErrTransitionNotAllowed) {
		t.Errorf("errors.Is(%v, ErrSelfTransition / ErrTransitionNotAllowed) = false", err)
	}
}
