// Package silentdefault defines an Analyzer that reports a phase switch
// whose default ends the reconcile silently.
//
// # Analyzer silentdefault
//
// silentdefault: report phase switches whose default returns an empty result and nil
//
// In the incident, a stale re-read put an object's phase back from Deleting
// to Failed; the delete flow's switch had no case for Failed, and its
// default returned ctrl.Result{}, nil. Nothing requeued the object, and the
// controller's GenerationChangedPredicate dropped the status event that
// would have: the deletion never finished. A default (or a fall-through
// past the switch) that ends the reconcile with an empty result and a nil
// error is where a phase the code did not expect disappears.
//
// Most such defaults are benign: the object is in a terminal phase there.
// To keep its reports worth reading, the checker reports one only when the
// switched-on object was written earlier on the same path (so the value
// switched on may be a stale read of it), or when the package filters its
// events with GenerationChangedPredicate (so no status event brings the
// object back). It looks at switch statements on a field whose name
// contains "Phase" or "State", and at if / else-if chains of two or more
// equality tests of one such field (their final else, or the statement
// after a chain without one, is the default). A single if on the phase is a
// guard, not a dispatch, and is not checked.
//
// No fix is suggested: what a phase nobody expected should do (an error, a
// requeue, a terminal state) is the author's decision.
package silentdefault
