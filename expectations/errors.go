package expectations

import (
	"errors"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

var (
	// ErrStale is matched by errors.Is for every *StaleError: a cached read
	// is older than this controller's own last write or deletion of the object.
	// The caller should requeue and read again, not act on the object.
	ErrStale = errors.New("stale cache read")

	// ErrNilObject is returned for a nil object, including a typed nil
	// pointer such as (*corev1.ConfigMap)(nil).
	ErrNilObject = errors.New("nil object")

	// ErrNoName is returned for an object or key without a name: nothing can
	// be expected of an object the server has not named.
	ErrNoName = errors.New("object has no name")

	// ErrInvalidResourceVersion is matched by errors.Is for every
	// *ResourceVersionError.
	ErrInvalidResourceVersion = errors.New("invalid resourceVersion")
)

// StaleError reports a cached object older than what this controller wrote.
type StaleError struct {
	// Key names the object.
	Key client.ObjectKey
	// Want is the resourceVersion recorded by ExpectWrite or ExpectDeletion.
	Want string
	// Seen is the resourceVersion of the cached object.
	Seen string
	// Deletion is true when the object was expected gone and the cache still
	// shows it (or an earlier incarnation of it).
	Deletion bool
}

// Error implements error.
func (e *StaleError) Error() string {
	if e.Deletion {
		return fmt.Sprintf("%s: %s was deleted at resourceVersion %s but the cache still shows it at %s",
			ErrStale, e.Key, e.Want, e.Seen)
	}
	return fmt.Sprintf("%s: %s is at resourceVersion %s in the cache, older than %s written by this controller",
		ErrStale, e.Key, e.Seen, e.Want)
}

// Is reports whether target is ErrStale.
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// ResourceVersionError reports a resourceVersion that is not a positive
// decimal integer without leading zeros, the only form the API server emits.
// Such a value cannot be ordered, so it is neither fresh nor stale.
type ResourceVersionError struct {
	// Key names the object.
	Key client.ObjectKey
	// ResourceVersion is the offending value.
	ResourceVersion string
	// Err is the error of resourceversion.CompareResourceVersion.
	Err error
}

// Error implements error.
func (e *ResourceVersionError) Error() string {
	return fmt.Sprintf("%s %q of %s: %v", ErrInvalidResourceVersion, e.ResourceVersion, e.Key, e.Err)
}

// Is reports whether target is ErrInvalidResourceVersion.
func (e *ResourceVersionError) Is(target error) bool { return target == ErrInvalidResourceVersion }

// Unwrap returns Err.
func (e *ResourceVersionError) Unwrap() error { return e.Err }
