package objcopy

import "errors"

// The bad-input errors every racesafe package returns for an object it
// cannot use. phase, statusupdate and expectations each export them under
// the same name and as the same value, so a caller's errors.Is matches
// whichever package's name it tests against, whichever package refused.
var (
	// ErrNilObject: a nil object, or a typed nil pointer.
	ErrNilObject = errors.New("racesafe: nil object")

	// ErrNoName: an object or key without a name.
	ErrNoName = errors.New("racesafe: object has no name")
)
