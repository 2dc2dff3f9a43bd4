package phase

import (
	"errors"
	"fmt"

	"github.com/racesafe/racesafe/expectations"
	"github.com/racesafe/racesafe/internal/objcopy"
)

var (
	// ErrNilObject is returned by [Machine.Reconcile] for a nil object,
	// including a typed nil pointer such as (*corev1.Pod)(nil). It is the
	// same value as statusupdate.ErrNilObject and expectations.ErrNilObject.
	ErrNilObject = objcopy.ErrNilObject

	// ErrNilMutate is returned by [Step.Patch] for a nil mutate function.
	ErrNilMutate = errors.New("phase: nil mutate function")

	// ErrTransitionNotAllowed is matched by errors.Is for every
	// [*TransitionError].
	ErrTransitionNotAllowed = errors.New("phase transition not allowed")

	// ErrPhaseChanged is matched by errors.Is for every [*PhaseChangeError].
	ErrPhaseChanged = errors.New("phase changed outside a transition")

	// ErrPhaseNotWritten is the cause of a [*WriteError] of a transition the
	// Writer returned without error but that the server did not acknowledge:
	// the returned object is missing, carries another phase than the one
	// written (Set touches a field the write drops, say outside status), or
	// carries the resourceVersion that was sent (nothing was written).
	ErrPhaseNotWritten = errors.New("written object does not carry the new phase")

	// ErrReleaseNotWritten is the cause of a [*WriteError] of a [Release]
	// the Writer returned without error but that the server did not
	// acknowledge: the returned object is missing, or carries the
	// resourceVersion that was sent and does not show the object removed.
	ErrReleaseNotWritten = errors.New("release not written")

	// ErrSelfTransition is matched by errors.Is for a [*TransitionError]
	// whose From and To are the same phase: it would write nothing.
	ErrSelfTransition = errors.New("transition to the phase itself")

	// ErrPhaseMoved is matched by errors.Is for every [*PhaseMovedError].
	ErrPhaseMoved = errors.New("phase moved on the server")

	// ErrInvalidDecision is matched by errors.Is for a decision the machine
	// cannot carry out: a [TransitionWith] or [Release] with a nil function,
	// or one that takes another type than the machine's objects.
	ErrInvalidDecision = errors.New("invalid decision")

	// ErrObjectCopy is matched by errors.Is when the machine cannot make its
	// private copy of an object (its DeepCopyObject panics or returns
	// another type).
	ErrObjectCopy = errors.New("cannot copy the object")

	// ErrInvalidOptions is matched by errors.Is for every [*OptionsError].
	ErrInvalidOptions = errors.New("invalid phase machine options")
)

// TransitionError reports a transition that [Options].Transitions does not
// allow, or a transition from a phase to itself. Nothing was written.
type TransitionError struct {
	// Machine is the machine's Name.
	Machine string
	// From is the pinned phase whose handler asked for the transition.
	From string
	// To is the phase it asked for.
	To string
}

// Error implements error.
func (e *TransitionError) Error() string {
	if e.From == e.To {
		return fmt.Sprintf("phase machine %q: %s: %s %q", e.Machine, ErrTransitionNotAllowed, ErrSelfTransition, e.To)
	}
	return fmt.Sprintf("phase machine %q: %s: %q -> %q", e.Machine, ErrTransitionNotAllowed, e.From, e.To)
}

// Is reports whether target is [ErrTransitionNotAllowed], or
// [ErrSelfTransition] when From equals To.
func (e *TransitionError) Is(target error) bool {
	return target == ErrTransitionNotAllowed || (target == ErrSelfTransition && e.From == e.To)
}

// PhaseMovedError reports a write refused because the object being written
// (the machine's copy, or the live object re-read after a conflict) is no
// longer in the pinned phase: another reconcile or writer moved it, and the
// handler decided on a stale copy. Nothing was written; the next reconcile
// dispatches on the live phase.
//
// errors.Is matches both [ErrPhaseMoved] and expectations.ErrStale, so
// requeue.OnStale turns it into a short, quiet requeue.
type PhaseMovedError struct {
	// Machine is the machine's Name.
	Machine string
	// Object names the object, as namespace/name.
	Object string
	// From is the pinned phase the write was decided in.
	From string
	// To is the phase being written: the target of a transition, From for
	// a [Step.Patch], empty for a [Release].
	To string
	// Release is true when the refused write was a [Release].
	Release bool
	// Live is the phase of the object the write was computed against.
	Live string
}

// Error implements error.
func (e *PhaseMovedError) Error() string {
	what := fmt.Sprintf("%q -> %q", e.From, e.To)
	if e.Release {
		what = fmt.Sprintf("release in %q", e.From)
	}
	return fmt.Sprintf("phase machine %q: %s: %s of %s not written: the object is in %q",
		e.Machine, ErrPhaseMoved, what, e.Object, e.Live)
}

// Is reports whether target is [ErrPhaseMoved] or expectations.ErrStale.
func (e *PhaseMovedError) Is(target error) bool {
	return target == ErrPhaseMoved || target == expectations.ErrStale
}

// WriteError reports a transition or a [Release] whose write failed or was
// not acknowledged. The phase stays pinned at From; the object may or may
// not have been written (a conflict, a timeout), so the next reconcile reads
// it again.
type WriteError struct {
	// Machine is the machine's Name.
	Machine string
	// From is the pinned phase.
	From string
	// To is the phase that was being written; empty for a Release.
	To string
	// Release is true when the write was a [Release].
	Release bool
	// Object names the object, as namespace/name.
	Object string
	// Err is the Writer's error, [ErrPhaseNotWritten] or
	// [ErrReleaseNotWritten].
	Err error
}

// Error implements error.
func (e *WriteError) Error() string {
	if e.Release {
		return fmt.Sprintf("phase machine %q: release in %q of %s: %v", e.Machine, e.From, e.Object, e.Err)
	}
	return fmt.Sprintf("phase machine %q: write %q -> %q of %s: %v", e.Machine, e.From, e.To, e.Object, e.Err)
}

// Unwrap returns Err, so apierrors.IsConflict and its siblings see through a
// WriteError.
func (e *WriteError) Unwrap() error { return e.Err }

// PhaseChangeError reports a [Step.Patch] whose mutate function changed the
// phase field. Phases change only through a transition, which the table
// checks and the machine pins; nothing was written.
type PhaseChangeError struct {
	// Machine is the machine's Name.
	Machine string
	// From is the phase the object had before mutate.
	From string
	// To is the phase mutate set.
	To string
}

// Error implements error.
func (e *PhaseChangeError) Error() string {
	return fmt.Sprintf("phase machine %q: %s: mutate set %q -> %q; return Transition instead",
		e.Machine, ErrPhaseChanged, e.From, e.To)
}

// Is reports whether target is [ErrPhaseChanged].
func (e *PhaseChangeError) Is(target error) bool { return target == ErrPhaseChanged }

// OptionsError reports one problem with the [Options] given to [New]. New
// joins several with errors.Join.
type OptionsError struct {
	// Field names the offending option, such as "Get" or "Transitions[Failed]".
	Field string
	// Problem says what is wrong with it.
	Problem string
}

// Error implements error.
func (e *OptionsError) Error() string {
	return fmt.Sprintf("%s: %s: %s", ErrInvalidOptions, e.Field, e.Problem)
}

// Is reports whether target is [ErrInvalidOptions].
func (e *OptionsError) Is(target error) bool { return target == ErrInvalidOptions }
