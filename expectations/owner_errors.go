package expectations

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var (
	// ErrOwnerOptions is matched by errors.Is for an OwnerOptions that
	// NewOwnerTracker cannot build a tracker from.
	ErrOwnerOptions = errors.New("invalid OwnerOptions")

	// ErrNotOwned is returned by ExpectOwnedWrite and ExpectOwnedDeletion for an object
	// without a controller reference to the tracker's owner kind: there is
	// no owner to record the write against.
	ErrNotOwned = errors.New("object has no controller reference of the owner kind")

	// ErrOwnerKind is returned when an owner is not of the kind the tracker
	// was built For.
	ErrOwnerKind = errors.New("owner is not of the tracker's owner kind")

	// ErrOwnerExpired is matched by errors.Is for every *OwnerExpiredError.
	// It does not match ErrStale: the caller must not requeue, it must read
	// live.
	ErrOwnerExpired = errors.New("owned objects' cache did not catch up within the TTL")
)

// OwnerStaleError reports that the cache of an owned kind has not yet seen a
// write this controller made for the owner. errors.Is(err, ErrStale) holds,
// so requeue.OnStale turns it into a short requeue.
type OwnerStaleError struct {
	// Owner names the owner whose reconcile asked.
	Owner client.ObjectKey
	// Kind is the owned kind the cache is behind on.
	Kind schema.GroupKind
	// Namespace is the owned objects' namespace ("" for cluster-scoped ones).
	Namespace string
	// Want is the highest resourceVersion written for the owner in that
	// kind and namespace; empty when only a deletion is awaited.
	Want string
	// Seen is the cache's resourceVersion for the kind and namespace; empty
	// when the cache has seen nothing there yet.
	Seen string
	// Deleted names an owned object deleted by this controller that the
	// cache still shows, when that is what is awaited.
	Deleted string
	// Unprimed: OwnerOptions.AwaitPrime is set and Prime has not returned
	// yet; Kind and the versions are empty.
	Unprimed bool
}

// Error implements error.
func (e *OwnerStaleError) Error() string {
	if e.Unprimed {
		return fmt.Sprintf("%s: owner %s: the owned kinds have not been primed yet", ErrStale, e.Owner)
	}
	if e.Deleted != "" {
		return fmt.Sprintf("%s: owner %s deleted %s %s/%s but the cache still shows it",
			ErrStale, e.Owner, e.Kind, e.Namespace, e.Deleted)
	}
	return fmt.Sprintf("%s: owner %s wrote %s in namespace %q at resourceVersion %s, the cache is at %q",
		ErrStale, e.Owner, e.Kind, e.Namespace, e.Want, e.Seen)
}

// Is reports whether target is ErrStale.
func (e *OwnerStaleError) Is(target error) bool { return target == ErrStale }

// OwnerExpiredError is returned by Check, with OwnerOptions.LiveReadOnExpiry,
// once for an owner whose owned kind's cache did not catch up within the TTL.
// The records are dropped: the caller must take this reconcile's decision
// from a live read (the API reader), not from the cache.
type OwnerExpiredError struct {
	Owner     client.ObjectKey
	Kind      schema.GroupKind
	Namespace string
	Want      string
	Seen      string
	// Age is how long the record waited.
	Age time.Duration
}

// Error implements error.
func (e *OwnerExpiredError) Error() string {
	return fmt.Sprintf("%s: owner %s waited %s for %s in namespace %q at resourceVersion %s, the cache is at %q: read live",
		ErrOwnerExpired, e.Owner, e.Age, e.Kind, e.Namespace, e.Want, e.Seen)
}

// Is reports whether target is ErrOwnerExpired.
func (e *OwnerExpiredError) Is(target error) bool { return target == ErrOwnerExpired }

// OwnerResourceVersionError reports a resourceVersion that cannot be ordered:
// one written (ExpectWrite) or the cache's (Check). errors.Is(err,
// ErrInvalidResourceVersion) holds. It is never taken as fresh.
type OwnerResourceVersionError struct {
	// Owner names the owner.
	Owner client.ObjectKey
	// Kind is the owned kind.
	Kind schema.GroupKind
	// ResourceVersion is the offending value.
	ResourceVersion string
	// Cache is true when the value came from the cache, false when written.
	Cache bool
	// Err is the error of resourceversion.CompareResourceVersion.
	Err error
}

// Error implements error.
func (e *OwnerResourceVersionError) Error() string {
	from := "written"
	if e.Cache {
		from = "cache"
	}
	return fmt.Sprintf("%s %q (%s) of %s owned by %s: %v", ErrInvalidResourceVersion, e.ResourceVersion, from, e.Kind, e.Owner, e.Err)
}

// Is reports whether target is ErrInvalidResourceVersion.
func (e *OwnerResourceVersionError) Is(target error) bool { return target == ErrInvalidResourceVersion }

// Unwrap returns Err.
func (e *OwnerResourceVersionError) Unwrap() error { return e.Err }
