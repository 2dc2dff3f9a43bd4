package objcopy_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/racesafe/racesafe/expectations"
	"github.com/racesafe/racesafe/phase"
	"github.com/racesafe/racesafe/statusupdate"
)

// TestOneErrNilObjectAndErrNoName: a caller that tests a refusal against any
// package's ErrNilObject (or ErrNoName) matches it, whichever package
// refused, as each package's doc says.
func TestOneErrNilObjectAndErrNoName(t *testing.T) {
	nils := []error{phase.ErrNilObject, statusupdate.ErrNilObject, expectations.ErrNilObject}
	for _, got := range nils {
		for _, want := range nils {
			if !errors.Is(fmt.Errorf("refused: %w", got), want) {
				t.Errorf("errors.Is(%v, %v) = false", got, want)
			}
		}
	}
	if !errors.Is(fmt.Errorf("refused: %w", statusupdate.ErrNoName), expectations.ErrNoName) ||
		!errors.Is(fmt.Errorf("refused: %w", expectations.ErrNoName), statusupdate.ErrNoName) {
		t.Error("statusupdate.ErrNoName and expectations.ErrNoName do not match each other")
	}
}
