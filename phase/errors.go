package phase

import (
	"errors"
	"fmt"
)

var (
	// ErrNilObject is returned by [Machine.Reconcile] for a nil object,
	// including a typed nil pointer such as (*corev1.Pod)(nil).
	ErrNilObject = errors.New("phase: nil object")

	// ErrNilMutate is returned by [Step.Patch] for a nil mutate function.
	ErrNilMutate = errors.New("phase: nil mutate function")

	// ErrTransitionNotAllowed is matched by errors.Is for every
	// [*TransitionError].
	ErrTransitionNotAllowed = errors.New("phase transition not allowed")

	// ErrPhaseChanged is matched by errors.Is for every [*PhaseChangeError].
	ErrPhaseChanged = errors.New("phase changed outside a transition")

	// ErrPhaseNotWritten is the cause of a [*WriteError] whose write succeeded
	// but returned an object in another phase than the one written: Set
	// touches a field the write drops (say, outside status), or the Writer
	// does not return what the server wrote.
	ErrPhaseNotWritten = errors.New("written object does not carry the new phase")

	// ErrInvalidOptions is matched by errors.Is for every [*OptionsError].
	ErrInvalidOptions = errors.New("invalid phase machine options")
)

// TransitionError reports a transition that [Options].Transitions does not
// allow. Nothing was written.
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
	return fmt.Sprintf("phase machine %q: %s: %q -> %q", e.Machine, ErrTransitionNotAllowed, e.From, e.To)
}

// Is reports whether target is [ErrTransitionNotAllowed].
func (e *TransitionError) Is(target error) bool { return target == ErrTransitionNotAllowed }

// WriteError reports a transition whose write failed. The phase stays pinned
// at From; the object may or may not have been written (a conflict, a
// timeout), so the next reconcile reads it again.
type WriteError struct {
	// Machine is the machine's Name.
	Machine string
	// From is the pinned phase.
	From string
	// To is the phase that was being written.
	To string
	// Object names the object, as namespace/name.
	Object string
	// Err is the Writer's error, or [ErrPhaseNotWritten].
	Err error
}

// Error implements error.
func (e *WriteError) Error() string {
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
