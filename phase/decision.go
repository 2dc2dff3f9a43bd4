package phase

import (
	"time"

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
}

// Transition asks the machine to write phase to, if [Options].Transitions
// allows it from the pinned phase, and then to run the handler of to on the
// object the write returned, within the same reconcile.
func Transition[P ~string](to P) Decision {
	return Decision{kind: kindTransition, to: string(to)}
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
		return "Transition(" + d.to + ")"
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
