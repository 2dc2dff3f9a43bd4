package phase_test

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/racesafe/racesafe/phase"
)

const dryRun corev1.PodConditionType = "DryRun"

var dryRunTrue = corev1.PodCondition{Type: dryRun, Status: corev1.ConditionTrue}

func hasDryRun(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == dryRun })
}

// naiveReconcileDelete is the post-mortem's reconcileDelete, with its
// updateStatus and syncDryRunCondition, minus the retry loop (no conflicts
// here). It reports the phase its switch dispatched on.
func naiveReconcileDelete(ctx context.Context, c client.Client, item *corev1.Pod) (reconcile.Result, Phase, error) {
	updateStatus := func(ph Phase) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(item), item); err != nil {
			return err
		}
		before := item.DeepCopy()
		setPhase(item, ph)
		return c.Status().Patch(ctx, item, client.MergeFrom(before))
	}
	syncDryRunCondition := func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(item), item); err != nil {
			return err
		}
		if hasDryRun(item) {
			return nil
		}
		before := item.DeepCopy()
		item.Status.Conditions = append(item.Status.Conditions, dryRunTrue)
		return c.Status().Patch(ctx, item, client.MergeFrom(before))
	}

	if ph := getPhase(item); ph != Deleting && ph != Deleted {
		if err := updateStatus(Deleting); err != nil {
			return reconcile.Result{}, "", err
		}
	}
	if err := syncDryRunCondition(); err != nil {
		return reconcile.Result{}, "", err
	}
	switch ph := getPhase(item); ph {
	case Deleting:
		return reconcile.Result{}, ph, nil // executeUninstall, then wait for its job
	case Deleted:
		return reconcile.Result{}, ph, nil
	default:
		return reconcile.Result{}, ph, nil // "unexpected phase during deletion"
	}
}

// TestIncidentReplayed replays the incident: the cache stops seeing writes
// (a lagging informer), the object is written Failed -> Deleting, and the
// helper that enters Deleting re-reads the object from the cache into the
// same pointer, loading phase Failed again.
func TestIncidentReplayed(t *testing.T) {
	t.Run("naive controller dispatches on the stale phase", func(t *testing.T) {
		// The control: proves the fixture reproduces the incident, so the
		// machine's subtests below pass for the right reason.
		e := newEnv(t, newPod(Failed, dryRunTrue))
		e.freezeCache(t)
		var item corev1.Pod
		if err := e.mgrClient.Get(t.Context(), key, &item); err != nil {
			t.Fatal(err)
		}
		res, dispatched, err := naiveReconcileDelete(t.Context(), e.mgrClient, &item)
		if err != nil {
			t.Fatal(err)
		}
		if dispatched != Failed || !res.IsZero() {
			t.Fatalf("naive switch dispatched on %q with %+v; the fixture no longer reproduces the incident", dispatched, res)
		}
		if got := getPhase(e.live(t)); got != Deleting {
			t.Fatalf("server phase = %q, want Deleting: the write itself succeeded", got)
		}
	})

	for _, tt := range []struct {
		name       string
		conditions []corev1.PodCondition
	}{
		// The incident's shape: the condition is already there, so the
		// helper's Get leaves the stale snapshot in the pointer.
		{"condition already synced", []corev1.PodCondition{dryRunTrue}},
		// The helper writes after its stale Get: Step.Patch, through the
		// Patcher, conflicts on the stale resourceVersion and re-reads the
		// server.
		{"condition written after the stale read", nil},
	} {
		t.Run("machine: "+tt.name, func(t *testing.T) {
			e := newEnv(t, newPod(Failed, tt.conditions...))
			var (
				dispatched      []Phase
				atEntry         []Phase // the phase of s.Object() when a handler starts
				staleReads      []Phase // what the helper's Get loaded
				uninstalls      int
				uninstallFinish bool
			)
			// The incident's helper, with its write moved to Step.Patch but its
			// Get into the same pointer left in place.
			syncDryRunCondition := func(ctx context.Context, s *phase.Step[*corev1.Pod, Phase]) error {
				if err := e.mgrClient.Get(ctx, key, s.Object()); err != nil {
					return err
				}
				staleReads = append(staleReads, getPhase(s.Object()))
				if hasDryRun(s.Object()) {
					return nil
				}
				return s.Patch(ctx, func(p *corev1.Pod) error {
					p.Status.Conditions = append(p.Status.Conditions, dryRunTrue)
					return nil
				})
			}
			opts := podOptions(e.writer, map[Phase]phase.Handler[*corev1.Pod, Phase]{
				Failed: func(ctx context.Context, s *phase.Step[*corev1.Pod, Phase]) (phase.Decision, error) {
					dispatched = append(dispatched, s.Phase())
					atEntry = append(atEntry, getPhase(s.Object()))
					return phase.Transition(Deleting), nil
				},
				Deleting: func(ctx context.Context, s *phase.Step[*corev1.Pod, Phase]) (phase.Decision, error) {
					dispatched = append(dispatched, s.Phase())
					atEntry = append(atEntry, getPhase(s.Object()))
					if err := syncDryRunCondition(ctx, s); err != nil {
						return phase.Decision{}, err
					}
					if s.Phase() != Deleting {
						t.Errorf("after the helper's read, Phase() = %q, want Deleting", s.Phase())
					}
					if uninstallFinish {
						return phase.Transition(Deleted), nil
					}
					uninstalls++ // executeUninstall
					return phase.WaitForEvent("uninstall job finishes"), nil
				},
			})
			opts.Name = "incident-" + tt.name
			opts.Transitions = map[Phase][]Phase{Failed: {Deleting}, Deleting: {Deleted}}
			opts.Terminal = []Phase{Deleted}
			m := mustNew(t, opts)
			var counted []func() float64
			for _, tr := range [][2]Phase{{Failed, Deleting}, {Deleting, Deleted}} {
				labels := map[string]string{"controller": opts.Name, "from": string(tr[0]), "to": string(tr[1])}
				counted = append(counted, counterDelta(t, "racesafe_phase_transitions_total", labels))
			}

			e.freezeCache(t)
			var item corev1.Pod
			if err := e.mgrClient.Get(t.Context(), key, &item); err != nil {
				t.Fatal(err)
			}
			res, err := m.Reconcile(t.Context(), &item)
			if err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if !res.IsZero() {
				t.Errorf("result = %+v, want the empty result of a named wait", res)
			}
			if want := []Phase{Failed, Deleting}; !slices.Equal(dispatched, want) {
				t.Errorf("dispatched %v, want %v", dispatched, want)
			}
			if want := []Phase{Failed, Deleting}; !slices.Equal(atEntry, want) {
				t.Errorf("handlers started on objects in %v, want %v: the next handler gets the written object", atEntry, want)
			}
			if want := []Phase{Failed}; !slices.Equal(staleReads, want) {
				t.Fatalf("the helper's cache read loaded %v, want %v: the fixture does not lag", staleReads, want)
			}
			if uninstalls != 1 {
				t.Errorf("uninstall started %d times, want 1", uninstalls)
			}
			live := e.live(t)
			if getPhase(live) != Deleting || !hasDryRun(live) {
				t.Errorf("server holds phase %q, DryRun %v; want Deleting, true", getPhase(live), hasDryRun(live))
			}
			if getPhase(&item) != Failed {
				t.Errorf("the object passed to Reconcile now reads %q; the Writer must not write into it", getPhase(&item))
			}

			// The uninstall job finishes; its event starts a reconcile that
			// reads the server's object. The cache still lags, so the
			// helper's Get loads Failed again, and the transition to Deleted
			// must still be checked and written from Deleting.
			uninstallFinish = true
			dispatched, staleReads = nil, nil
			res, err = m.Reconcile(t.Context(), e.live(t))
			if err != nil || !res.IsZero() {
				t.Fatalf("second Reconcile = %+v, %v; want the empty result of a terminal phase", res, err)
			}
			if want := []Phase{Deleting}; !slices.Equal(dispatched, want) {
				t.Errorf("second reconcile dispatched %v, want %v", dispatched, want)
			}
			if want := []Phase{Failed}; !slices.Equal(staleReads, want) {
				t.Errorf("second reconcile: the helper read %v, want %v", staleReads, want)
			}
			if got := getPhase(e.live(t)); got != Deleted {
				t.Errorf("server phase = %q, want Deleted", got)
			}
			for i, tr := range [][2]Phase{{Failed, Deleting}, {Deleting, Deleted}} {
				if got := counted[i](); got != 1 {
					t.Errorf("racesafe_phase_transitions_total %s -> %s grew by %v, want 1", tr[0], tr[1], got)
				}
			}
		})
	}
}
