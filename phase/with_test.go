package phase_test

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/racesafe/racesafe/phase"
)

func setDryRun(p *corev1.Pod) error {
	if !hasDryRun(p) {
		p.Status.Conditions = append(p.Status.Conditions, dryRunTrue)
	}
	return nil
}

// TestTransitionWithIsOneWrite: a condition set with the phase arrives in
// the same patch, at one resourceVersion.
func TestTransitionWithIsOneWrite(t *testing.T) {
	e := newEnv(t, newPod(Failed))
	in := e.live(t)
	var saw *corev1.Pod
	opts := podOptions(e.writer, handlerMap{
		Failed: decide(phase.TransitionWith(Deleting, setDryRun), nil),
		Deleting: func(_ context.Context, s *phase.Step[*corev1.Pod, Phase]) (phase.Decision, error) {
			saw = s.Object().DeepCopy()
			return phase.WaitForEvent("uninstall job finishes"), nil
		},
	})
	opts.Name = "with"
	opts.Transitions = map[Phase][]Phase{Failed: {Deleting}}
	counted := counterDelta(t, "racesafe_phase_transitions_total", map[string]string{"controller": "with", "from": "Failed", "to": "Deleting"})
	if _, err := mustNew(t, opts).Reconcile(t.Context(), in); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if n := e.statusPatches.Load(); n != 1 {
		t.Errorf("%d status patches sent, want 1", n)
	}
	live := e.live(t)
	if getPhase(live) != Deleting || !hasDryRun(live) {
		t.Errorf("server holds phase %q, DryRun %v; want Deleting, true", getPhase(live), hasDryRun(live))
	}
	if saw == nil || saw.ResourceVersion != live.ResourceVersion || !hasDryRun(saw) {
		t.Errorf("the Deleting handler did not get the written object at resourceVersion %s", live.ResourceVersion)
	}
	if d := counted(); d != 1 {
		t.Errorf("racesafe_phase_transitions_total grew by %v, want 1", d)
	}

	// client.Object works for any machine, with a type assertion.
	e = newEnv(t, newPod(Failed))
	opts.Writer = e.writer
	opts.Handlers[Failed] = decide(phase.TransitionWith(Deleting, func(obj client.Object) error {
		obj.SetAnnotations(map[string]string{"dropped": "by the status subresource"})
		return setDryRun(obj.(*corev1.Pod))
	}), nil)
	if _, err := mustNew(t, opts).Reconcile(t.Context(), e.live(t)); err != nil {
		t.Fatalf("Reconcile with a func(client.Object): %v", err)
	}
	if live := e.live(t); !hasDryRun(live) || e.statusPatches.Load() != 1 {
		t.Errorf("func(client.Object): DryRun %v after %d patches, want true after 1", hasDryRun(live), e.statusPatches.Load())
	}
}

// TestTransitionWithIsCompareAndSwap: the extra change runs only on an
// object still in the pinned phase.
func TestTransitionWithIsCompareAndSwap(t *testing.T) {
	e := newEnv(t, newPod(Failed))
	stale := e.live(t)
	e.setServerPhase(t, Deleting)
	e.setServerPhase(t, Deleted)
	var ran []Phase
	opts := podOptions(e.writer, handlerMap{
		Failed: decide(phase.TransitionWith(Deleting, func(p *corev1.Pod) error {
			ran = append(ran, getPhase(p))
			return setDryRun(p)
		}), nil),
		Deleting: decide(phase.WaitForEvent("uninstall job finishes"), nil),
	})
	opts.Name = "with-cas"
	opts.Transitions = map[Phase][]Phase{Failed: {Deleting}}
	opts.Terminal = []Phase{Deleted}
	_, err := mustNew(t, opts).Reconcile(t.Context(), stale)
	checkPhaseMoved(t, err, "Failed", "Deleting", "Deleted")
	live := e.live(t)
	if getPhase(live) != Deleted || hasDryRun(live) {
		t.Errorf("server holds phase %q, DryRun %v; want Deleted, false", getPhase(live), hasDryRun(live))
	}
	// Once on the machine's copy, with the phase already set; never on the
	// live object in Deleted.
	if len(ran) != 1 || ran[0] != Deleting {
		t.Errorf("the extra change ran on objects in %v, want [Deleting] (the first try only)", ran)
	}
}

func TestTransitionWithRefused(t *testing.T) {
	tests := []struct {
		name     string
		decision phase.Decision
		want     []error
	}{
		{"nil function", phase.TransitionWith[Phase, *corev1.Pod](Deleting, nil),
			[]error{phase.ErrInvalidDecision, phase.ErrNilMutate}},
		{"another type", phase.TransitionWith(Deleting, func(*corev1.ConfigMap) error { return nil }),
			[]error{phase.ErrInvalidDecision}},
		{"phase changed", phase.TransitionWith(Deleting, func(p *corev1.Pod) error {
			setPhase(p, Deleted)
			return nil
		}), []error{phase.ErrPhaseChanged}},
		{"its own error", phase.TransitionWith(Deleting, func(*corev1.Pod) error { return errBoom }),
			[]error{errBoom}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, newPod(Failed))
			opts := podOptions(e.writer, handlerMap{
				Failed:   decide(tt.decision, nil),
				Deleting: decide(phase.WaitForEvent("uninstall job finishes"), nil),
			})
			opts.Name = "with-refused"
			opts.Transitions = map[Phase][]Phase{Failed: {Deleting}}
			counted := counterDelta(t, "racesafe_phase_transitions_total", map[string]string{"controller": opts.Name, "from": "Failed", "to": "Deleting"})
			_, err := mustNew(t, opts).Reconcile(t.Context(), e.live(t))
			for _, want := range tt.want {
				if !errors.Is(err, want) {
					t.Errorf("Reconcile = %v, want errors.Is %v", err, want)
				}
			}
			if n := e.statusPatches.Load(); n != 0 {
				t.Errorf("%d status patches sent, want 0", n)
			}
			if got := getPhase(e.live(t)); got != Failed {
				t.Errorf("server phase = %q, want Failed", got)
			}
			if d := counted(); d != 0 {
				t.Errorf("racesafe_phase_transitions_total grew by %v, want 0", d)
			}
		})
	}
}

var errBoom = errors.New("boom")
