package expectations

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/racesafe/racesafe/internal/objcopy"
)

var (
	// ErrStale is matched by errors.Is for every *StaleError: a cached read
	// is older than this controller's own last write or deletion of the object.
	// The caller should requeue and read again, not act on the object.
	ErrStale = errors.New("stale cache read")

	// ErrNilObject is returned for a nil object, including a typed nil
	// pointer such as (*corev1.ConfigMap)(nil).
	// It is the same value as phase.ErrNilObject and
	// statusupdate.ErrNilObject.
	ErrNilObject = objcopy.ErrNilObject

	// ErrNoName is returned for an object or key without a name: nothing can
	// be expected of an object the server has not named.
	// It is the same value as statusupdate.ErrNoName.
	ErrNoName = objcopy.ErrNoName

	// ErrUnknownKind is returned for an object whose kind cannot be told: a
	// typed object whose Go type the tracker's scheme does not know (or
	// knows as several kinds), or an unstructured or metadata-only object
	// without apiVersion and kind. Expectations are kept per kind, so nothing
	// can be expected of, or checked for, such an object.
	ErrUnknownKind = errors.New("unknown kind")

	// ErrInvalidResourceVersion is matched by errors.Is for every
	// *ResourceVersionError.
	ErrInvalidResourceVersion = errors.New("invalid resourceVersion")
)

// StaleError reports a cached object older than what this controller wrote.
type StaleError struct {
	// Kind is the object's kind.
	Kind schema.GroupKind
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
			ErrStale, describe(e.Kind, e.Key), e.Want, e.Seen)
	}
	return fmt.Sprintf("%s: %s is at resourceVersion %s in the cache, older than %s written by this controller",
		ErrStale, describe(e.Kind, e.Key), e.Seen, e.Want)
}

// describe names an object as kubectl does, "Deployment.apps ns/name".
func describe(kind schema.GroupKind, key client.ObjectKey) string {
	if kind.Empty() {
		return key.String()
	}
	return kind.String() + " " + key.String()
}

// Is reports whether target is ErrStale.
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// ResourceVersionError reports a resourceVersion that is not a positive
// decimal integer without leading zeros, the only form the API server emits.
// Such a value cannot be ordered, so it is neither fresh nor stale.
type ResourceVersionError struct {
	// Kind is the object's kind.
	Kind schema.GroupKind
	// Key names the object.
	Key client.ObjectKey
	// ResourceVersion is the offending value.
	ResourceVersion string
	// Err is the error of resourceversion.CompareResourceVersion.
	Err error
}

// Error implements error.
func (e *ResourceVersionError) Error() string {
	return fmt.Sprintf("%s %q of %s: %v", ErrInvalidResourceVersion, e.ResourceVersion, describe(e.Kind, e.Key), e.Err)
}

// Is reports whether target is ErrInvalidResourceVersion.
func (e *ResourceVersionError) Is(target error) bool { return target == ErrInvalidResourceVersion }

// Unwrap returns Err.
func (e *ResourceVersionError) Unwrap() error { return e.Err }
