package expectations

import (
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// Predicate returns an event filter that lets through the event in which
// the cache catches up with a pending expectation of t:
//
//   - Update, when the new object catches its form up with it (Satisfied);
//   - Delete, when an expectation is recorded for the object's kind and key
//     that its form has not caught up with: absence settles writes and
//     deletions alike (see CheckAbsent);
//   - never Create or Generic.
//
// T's kind is told as Tracker.Check tells it: T may be a typed object,
// *metav1.PartialObjectMetadata or *unstructured.Unstructured, each the form
// its informer delivers. An object whose kind cannot be told never passes.
//
// It is meant to be OR'ed with the controller's usual filter, which often
// drops status-only updates. The update that carries the controller's own
// status write is then let through exactly when a reconcile refused a stale
// read and is waiting for it:
//
//	builder.WithPredicates(predicate.Or(
//		predicate.GenerationChangedPredicate{},
//		expectations.Predicate[client.Object](t)))
//
// The filter only reads t. It must not be the only way the reconcile comes
// back: a watch that never delivers the event also never runs the filter,
// so requeue after a *StaleError as well.
func Predicate[T client.Object](t *Tracker) predicate.TypedPredicate[T] {
	return predicate.TypedFuncs[T]{
		CreateFunc:  func(event.TypedCreateEvent[T]) bool { return false },
		GenericFunc: func(event.TypedGenericEvent[T]) bool { return false },
		UpdateFunc: func(e event.TypedUpdateEvent[T]) bool {
			return t.Satisfied(e.ObjectNew)
		},
		DeleteFunc: func(e event.TypedDeleteEvent[T]) bool {
			return t.awaits(e.Object)
		},
	}
}
