package phase

import (
	"reflect"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/racesafe/racesafe/requeue"
)

type decisionKind uint8

const (
	// kindDone is the zero value, so Decision{} means Done.
	kindDone decisionKind = iota
	kindTransition
	kindRequeueAfter
	kindRequeueInterval
	kindWait
	kindRelease
)

// Decision is what a [Handler] asks the machine to do next. It is not generic,
// so handlers build one without type arguments: phase.Transition(Deleting),
// phase.WaitForEvent("uninstall job finishes"). The zero value is [Done].
type Decision struct {
	kind     decisionKind
	to       string
	after    time.Duration
	interval requeue.Interval
	reason   string
	mutate   *objectMutate // TransitionWith's extra change, Release's change
}

// objectMutate is a handler's func(T) error with T erased, so that Decision
// needs no type parameter.
type objectMutate struct {
	typ   string // T, for errors
	isNil bool   // the handler passed a nil function
	fits  func(client.Object) bool
	run   func(client.Object) error
}

func newObjectMutate[T client.Object](f func(T) error) *objectMutate {
	return &objectMutate{
		typ:   reflect.TypeFor[T]().String(),
		isNil: f == nil,
		fits: func(obj client.Object) bool {
			_, ok := obj.(T)
			return ok
		},
		run: func(obj client.Object) error { return f(obj.(T)) },
	}
}

// Transition asks the machine to write phase to, if [Options].Transitions
// allows it from the pinned phase, and then to run the handler of to on the
// object the write returned, within the same reconcile.
func Transition[P ~string](to P) Decision {
	return Decision{kind: kindTransition, to: string(to)}
}

// TransitionWith is [Transition] carrying other changes in the same write:
// mutate runs inside the Writer's Patch, on the copy being written, after the
// machine checked that copy is still in the pinned phase and set phase to.
// One request, one resourceVersion. Through a status Writer such as
// *statusupdate.Patcher only status changes reach the server. mutate must
// not change the phase (a
// [*PhaseChangeError]); T must be the machine's object type, or an interface
// it implements such as client.Object. A nil mutate is [ErrInvalidDecision].
func TransitionWith[P ~string, T client.Object](to P, mutate func(T) error) Decision {
	return Decision{kind: kindTransition, to: string(to), mutate: newObjectMutate(mutate)}
}

// Release ends the flow by letting go of the object rather than writing a
// terminal phase: mutate, typically removing the controller's finalizer,
// runs inside the Writer's PatchObject on a copy of the object, which is
// compare-and-swap on the pinned phase like a transition (a
// [*PhaseMovedError] if the object moved on). It is counted in
// racesafe_phase_releases_total{controller,from}, and the reconcile then ends
// with an empty result. mutate must not change the phase; T must be the
// machine's object type or an interface it implements. A nil mutate is
// [ErrInvalidDecision].
func Release[T client.Object](mutate func(T) error) Decision {
	return Decision{kind: kindRelease, mutate: newObjectMutate(mutate)}
}

// RequeueAfter ends the reconcile with a requeue after d. A d that is zero
// or negative means the machine's [Options].Interval, never "no requeue".
func RequeueAfter(d time.Duration) Decision {
	return Decision{kind: kindRequeueAfter, after: d}
}

// Requeue ends the reconcile with a requeue after i's current delay (see
// [requeue.Interval.Duration]); a nil i means the machine's
// [Options].Interval.
func Requeue(i requeue.Interval) Decision {
	return Decision{kind: kindRequeueInterval, interval: i}
}

// WaitForEvent ends the reconcile without a requeue, because a watch event
// will bring the object back: reason names it ("uninstall job finishes").
// It is the only way a non-terminal phase ends without a requeue, so the
// handler must make sure the event reaches the controller through its
// watches and predicates. An empty reason is not a decision to wait: the
// machine requeues after Interval, as for [Done].
func WaitForEvent(reason string) Decision {
	return Decision{kind: kindWait, reason: reason}
}

// Done ends the reconcile with nothing more to do. In a terminal phase it
// returns an empty result. In any other phase it is taken as a forgotten
// requeue: the machine requeues after Interval, logs it and counts it in
// racesafe_phase_floor_total.
func Done() Decision {
	return Decision{}
}

// String describes the decision for logs.
func (d Decision) String() string {
	switch d.kind {
	case kindTransition:
		if d.mutate != nil {
			return "TransitionWith(" + d.to + ")"
		}
		return "Transition(" + d.to + ")"
	case kindRelease:
		return "Release"
	case kindRequeueAfter:
		return "RequeueAfter(" + d.after.String() + ")"
	case kindRequeueInterval:
		return "Requeue(interval)"
	case kindWait:
		return "WaitForEvent(" + d.reason + ")"
	default:
		return "Done"
	}
}
