package racetest

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"sync"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// serverState is one state an object had on the server, as the direct
// watch delivered it.
type serverState struct {
	Version
	// Gone marks the state of the deletion event: the object no longer
	// exists from this resourceVersion on.
	Gone bool
}

// truth is every state the server's objects of a history had, from a
// watch of its own straight to the API server, by UID in resourceVersion
// order.
type truth struct {
	mu     sync.Mutex
	states map[string][]serverState // by UID
	names  map[string]bool          // every name seen, for the sentinel
	err    error
}

// had reports whether the server had uid at rv: the version of its
// deletion is not a state it had.
func (t *truth) had(uid string, rv uint64) bool {
	for _, s := range t.states[uid] {
		if s.RV == rv && !s.Gone {
			return true
		}
	}
	return false
}

// deletedAfter reports whether uid was deleted (gone, or marked for
// deletion when mark is set) at a resourceVersion above rv.
func (t *truth) deletedAfter(uid string, rv uint64, mark bool) bool {
	for _, s := range t.states[uid] {
		if s.RV > rv && (s.Gone || (mark && s.Deleting)) {
			return true
		}
	}
	return false
}

// created returns the resourceVersion uid was created at, 0 if unknown.
func (t *truth) created(uid string) uint64 {
	if s := t.states[uid]; len(s) > 0 {
		return s[0].RV
	}
	return 0
}

// changedAfter reports whether uid had a state above rv for which keep is
// false: a newer state that, say, no longer matches a selector.
func (t *truth) changedAfter(uid string, rv uint64, keep func(serverState) bool) bool {
	for _, s := range t.states[uid] {
		if s.RV > rv && (s.Gone || !keep(s)) {
			return true
		}
	}
	return false
}

// watchTruth watches the PodDisruptionBudgets of ns from rv on and records
// every state in t until stop is called or the watch fails.
func watchTruth(ctx context.Context, c client.WithWatch, ns, rv string, t *truth) (stop func(), err error) {
	w, err := c.Watch(ctx, &policyv1.PodDisruptionBudgetList{}, client.InNamespace(ns), resourceVersionFrom(rv))
	if err != nil {
		return nil, fmt.Errorf("watch the server's state of %s: %w", ns, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			pdb, ok := ev.Object.(*policyv1.PodDisruptionBudget)
			if !ok {
				t.mu.Lock()
				if t.err == nil {
					t.err = fmt.Errorf("watch of %s ended with %v", ns, ev.Object)
				}
				t.mu.Unlock()
				continue
			}
			st := serverState{Version: versionOf(pdb), Gone: ev.Type == watch.Deleted}
			t.mu.Lock()
			t.states[st.UID] = append(t.states[st.UID], st)
			t.names[st.Name] = true
			t.mu.Unlock()
		}
	}()
	return func() { w.Stop(); <-done }, nil
}

// resourceVersionFrom is a list option that sets the watch's start.
type resourceVersionFrom string

// ApplyToList implements client.ListOption.
func (rv resourceVersionFrom) ApplyToList(o *client.ListOptions) {
	if o.Raw == nil {
		o.Raw = new(metav1.ListOptions)
	}
	o.Raw.ResourceVersion = string(rv)
}

// versionOf is obj's identity and version; an unparsable resourceVersion
// counts as 0, which no server state has.
func versionOf(obj client.Object) Version {
	rv, _ := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	return Version{
		Name: obj.GetName(), UID: string(obj.GetUID()), RV: rv,
		Labels: maps.Clone(obj.GetLabels()), Deleting: obj.GetDeletionTimestamp() != nil,
	}
}
