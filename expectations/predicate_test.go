package expectations_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/racesafe/racesafe/expectations"
)

func withGeneration(cm *corev1.ConfigMap, gen int64) *corev1.ConfigMap {
	cm.Generation = gen
	return cm
}

// TestPredicateOrGenerationChanged: the filter a controller actually installs
// lets a status-only update through only when it is the event that satisfies
// a pending expectation.
func TestPredicateOrGenerationChanged(t *testing.T) {
	old := withGeneration(configMap("a", "u1", "4"), 1)
	tests := []struct {
		name   string
		expect *corev1.ConfigMap // recorded with ExpectWrite, if not nil
		newObj *corev1.ConfigMap
		want   bool
	}{
		{name: "status-only, nothing pending", newObj: withGeneration(configMap("a", "u1", "5"), 1)},
		{name: "status-only, satisfies our write", expect: configMap("a", "u1", "5"), newObj: withGeneration(configMap("a", "u1", "5"), 1), want: true},
		{name: "status-only, still older than our write", expect: configMap("a", "u1", "6"), newObj: withGeneration(configMap("a", "u1", "5"), 1)},
		{name: "status-only, another object's write", expect: configMap("b", "u2", "5"), newObj: withGeneration(configMap("a", "u1", "5"), 1)},
		{name: "spec change passes anyway", newObj: withGeneration(configMap("a", "u1", "5"), 2), want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := expectations.New(expectations.Options{Name: "predicate-" + tc.name})
			if tc.expect != nil {
				if err := tr.ExpectWrite(tc.expect); err != nil {
					t.Fatal(err)
				}
			}
			p := predicate.Or(predicate.GenerationChangedPredicate{}, expectations.Predicate[client.Object](tr))
			if got := p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: tc.newObj}); got != tc.want {
				t.Errorf("Update = %v, want %v", got, tc.want)
			}
			wantPending := 0
			if tc.expect != nil {
				wantPending = 1
			}
			if got := tr.Pending(); got != wantPending {
				t.Errorf("Pending() = %d, want %d: the filter must not drop", got, wantPending)
			}
		})
	}
}

// TestPredicateEvents covers each event kind of the typed predicate alone.
func TestPredicateEvents(t *testing.T) {
	tr := expectations.New(expectations.Options{Name: "predicate-events"})
	if err := tr.ExpectDeletion(configMap("a", "u1", "5")); err != nil {
		t.Fatal(err)
	}
	p := expectations.Predicate[*corev1.ConfigMap](tr)
	pending, other := configMap("a", "u1", "5"), configMap("b", "u2", "5")
	var typedNil *corev1.ConfigMap

	if p.Create(event.TypedCreateEvent[*corev1.ConfigMap]{Object: pending}) {
		t.Error("Create passed")
	}
	if p.Generic(event.TypedGenericEvent[*corev1.ConfigMap]{Object: pending}) {
		t.Error("Generic passed")
	}
	if !p.Delete(event.TypedDeleteEvent[*corev1.ConfigMap]{Object: pending}) {
		t.Error("Delete of a key expected deleted did not pass")
	}
	if p.Delete(event.TypedDeleteEvent[*corev1.ConfigMap]{Object: other}) {
		t.Error("Delete of a key with no expectation passed")
	}
	if p.Delete(event.TypedDeleteEvent[*corev1.ConfigMap]{Object: typedNil}) {
		t.Error("Delete of a nil object passed")
	}
	if p.Update(event.TypedUpdateEvent[*corev1.ConfigMap]{ObjectOld: pending, ObjectNew: configMap("a", "u1", "6")}) {
		t.Error("Update of the incarnation expected deleted passed")
	}
	if !p.Update(event.TypedUpdateEvent[*corev1.ConfigMap]{ObjectOld: pending, ObjectNew: configMap("a", "u3", "9")}) {
		t.Error("Update to a successor incarnation did not pass")
	}
	if p.Update(event.TypedUpdateEvent[*corev1.ConfigMap]{ObjectOld: pending, ObjectNew: typedNil}) {
		t.Error("Update to a nil object passed")
	}
	if got := tr.Pending(); got != 1 {
		t.Errorf("Pending() = %d, want 1", got)
	}
}

// TestPredicateKeepsKindsAndFormsApart: the filter of one kind's or one
// form's informer is not woken by another's expectation, and lets its own
// catching-up event through once.
func TestPredicateKeepsKindsAndFormsApart(t *testing.T) {
	tr := expectations.New(expectations.Options{Name: "predicate-kinds"})
	if err := tr.ExpectWrite(pod("a", "p1", "10")); err != nil {
		t.Fatal(err)
	}
	p := expectations.Predicate[client.Object](tr)
	if p.Update(event.UpdateEvent{ObjectOld: configMap("a", "c1", "11"), ObjectNew: configMap("a", "c1", "12")}) {
		t.Error("a ConfigMap's update passed for a Pod's expectation")
	}
	if p.Delete(event.DeleteEvent{Object: configMap("a", "c1", "12")}) {
		t.Error("a ConfigMap's deletion passed for a Pod's expectation")
	}
	metaUpdate := event.UpdateEvent{ObjectOld: podMetadata("a", "p1", "9"), ObjectNew: podMetadata("a", "p1", "10")}
	if !p.Update(metaUpdate) {
		t.Error("the metadata-only update that catches up did not pass")
	}
	if err := tr.Check(podMetadata("a", "p1", "10")); err != nil {
		t.Fatal(err)
	}
	if p.Update(metaUpdate) {
		t.Error("a metadata-only update passed after that form caught up")
	}
	if p.Delete(event.DeleteEvent{Object: podMetadata("a", "p1", "10")}) {
		t.Error("a metadata-only deletion passed after that form caught up")
	}
	if !p.Update(event.UpdateEvent{ObjectOld: pod("a", "p1", "9"), ObjectNew: pod("a", "p1", "10")}) {
		t.Error("the typed update that catches up did not pass: the metadata form caught up, not this one")
	}
	if !p.Delete(event.DeleteEvent{Object: pod("a", "p1", "10")}) {
		t.Error("a typed deletion did not pass while the typed form has not caught up")
	}
}
