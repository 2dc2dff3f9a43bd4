package statusupdate

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/racesafe/racesafe/internal/objcopy"
)

var (
	// ErrNilObject is returned when the object to patch is nil, including a
	// typed nil pointer such as (*corev1.Pod)(nil). It is the same value as
	// phase.ErrNilObject and expectations.ErrNilObject.
	ErrNilObject = objcopy.ErrNilObject

	// ErrNoName is returned when the object to patch has no name. It is the
	// same value as expectations.ErrNoName.
	ErrNoName = objcopy.ErrNoName

	// ErrInvalidObject is returned when the object to patch cannot be copied
	// or re-created: its DeepCopyObject panics (an unstructured object holding
	// a Go int, say) or returns another type, or it is not a pointer.
	ErrInvalidObject = errors.New("statusupdate: invalid object")

	// ErrNoStatusSubresource matches, through errors.Is, a [*SubresourceError]
	// for the status subresource: [Patcher.PatchStatus] was used on a kind without
	// one.
	ErrNoStatusSubresource = errors.New("no status subresource")

	// ErrNilMutate is returned when the mutate function is nil.
	ErrNilMutate = errors.New("statusupdate: nil mutate function")

	// ErrConflictRetriesExhausted matches, through errors.Is, a [*ConflictError]:
	// every attempt the backoff allowed ended in 409 Conflict.
	ErrConflictRetriesExhausted = errors.New("conflict retries exhausted")

	// ErrIncarnation matches, through errors.Is, an [*IncarnationError]: the
	// object of that name on the server is another incarnation (another
	// UID) than the one the caller holds, so nothing was written to it.
	ErrIncarnation = errors.New("another incarnation of the object")

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
	// A mutate that fails ends the call without a ConflictError, whatever
	// it returns.
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

// SubresourceError reports that the server has no such subresource for the
// object's kind: a status patch answered NotFound, yet the object exists.
// A kind without a status subresource (a CRD that does not enable it, a
// ConfigMap) answers every status write that way.
//
// It matches [ErrNoStatusSubresource] with errors.Is. It deliberately does not
// unwrap to the server's NotFound, so apierrors.IsNotFound(err) is false and
// client.IgnoreNotFound does not drop the write.
type SubresourceError struct {
	// Key is the object that exists without the subresource.
	Key client.ObjectKey
	// GroupVersionKind is the object's kind, empty when the client cannot tell.
	GroupVersionKind schema.GroupVersionKind
	// Subresource is the subresource the server does not have: "status".
	Subresource string
}

// Error implements error.
func (e *SubresourceError) Error() string {
	kind := e.GroupVersionKind.GroupKind().String()
	if kind == "" {
		kind = "the object's kind"
	}
	return fmt.Sprintf("%s has no %s subresource: the server answered NotFound for an object that exists",
		kind, e.Subresource)
}

// Is reports whether target is [ErrNoStatusSubresource] and the missing
// subresource is status.
func (e *SubresourceError) Is(target error) bool {
	return target == ErrNoStatusSubresource && e.Subresource == subresourceStatus
}

// IncarnationError reports that after a conflict the API server held another
// object under the caller's name: the caller's was deleted and a new one
// (another UID) created. A write meant for the old incarnation is never
// applied to the new one; the Patcher stops and writes nothing. It matches
// [ErrIncarnation] with errors.Is.
type IncarnationError struct {
	// Key is the name both incarnations share.
	Key client.ObjectKey
	// Want is the UID of the object the caller holds.
	Want types.UID
	// Got is the UID the API server holds under Key.
	Got types.UID
}

// Error implements error.
func (e *IncarnationError) Error() string {
	return fmt.Sprintf("%v: %s holds UID %s, the write was for UID %s", ErrIncarnation, e.Key, e.Got, e.Want)
}

// Is makes errors.Is(err, ErrIncarnation) hold.
func (e *IncarnationError) Is(target error) bool { return target == ErrIncarnation }
