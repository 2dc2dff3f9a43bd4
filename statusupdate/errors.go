package statusupdate

import (
	"errors"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

var (
	// ErrNilObject is returned when the object to patch is nil, including a
	// typed nil pointer such as (*corev1.Pod)(nil).
	ErrNilObject = errors.New("statusupdate: nil object")

	// ErrNilMutate is returned when the mutate function is nil.
	ErrNilMutate = errors.New("statusupdate: nil mutate function")

	// ErrConflictRetriesExhausted matches, through errors.Is, a [*ConflictError]:
	// every attempt the backoff allowed ended in 409 Conflict.
	ErrConflictRetriesExhausted = errors.New("conflict retries exhausted")

	// ErrNoResourceVersion is returned when optimistic locking is on and the
	// object has no resourceVersion to use as a precondition: it was not read
	// from, or written to, the API server.
	ErrNoResourceVersion = errors.New("object has no resourceVersion for the optimistic lock")
)

// ConflictError reports that every attempt to patch an object conflicted.
//
// It matches [ErrConflictRetriesExhausted] with errors.Is and unwraps to the
// last conflict, so apierrors.IsConflict(err) is still true. The Patcher wraps
// it in a message that names the object, so Error does not repeat Key.
type ConflictError struct {
	// Key is the object that could not be written.
	Key client.ObjectKey
	// Attempts is the number of patches sent, all of which got 409 Conflict.
	Attempts int
	// Err is the last conflict the server answered.
	Err error
}

// Error implements error.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s after %d attempts: %v", ErrConflictRetriesExhausted, e.Attempts, e.Err)
}

// Is reports whether target is [ErrConflictRetriesExhausted].
func (e *ConflictError) Is(target error) bool {
	return target == ErrConflictRetriesExhausted
}

// Unwrap returns the last conflict.
func (e *ConflictError) Unwrap() error {
	return e.Err
}
