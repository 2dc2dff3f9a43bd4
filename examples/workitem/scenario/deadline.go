package scenario

import (
	"errors"
	"fmt"
	"time"
)

// readsPerItem bounds the reads after a write one item's create flow makes in
// the incident's code (finalizer, Installing, DryRun condition, the child, the
// install poll's requeue, Failed, with room to spare). On the read-your-writes
// client each of them may wait about one watch lag.
const readsPerItem = 8

// SetupDeadline is how long the create flow may take, from the first create
// to every item Failed, before the run ends with a *SetupError. An explicit
// o.SetupTimeout wins. Otherwise it grows with the items and the lag: the
// burst Timeout, plus per item its creation pace and 50ms of API work, plus
// readsPerItem lags for each item a worker handles in turn, so a controller
// whose reads wait for its cache still reaches the burst.
func SetupDeadline(o Options) time.Duration {
	o = defaults(o)
	if o.SetupTimeout > 0 {
		return o.SetupTimeout
	}
	perWorker := (o.Items + o.MaxConcurrentReconciles - 1) / o.MaxConcurrentReconciles
	return o.Timeout +
		time.Duration(o.Items)*(o.CreateEvery+50*time.Millisecond) +
		time.Duration(perWorker*readsPerItem)*o.Lag
}

// ErrSetup is matched (errors.Is) by every *SetupError.
var ErrSetup = errors.New("create flow did not finish")

// SetupError says how far the create flow got when the run gave up on it.
type SetupError struct {
	Controller Kind
	Items      int
	// Reached is how many items were Failed with the finalizer at the last
	// look; LastReachedAt when that count last grew, after the first create.
	Reached       int
	LastReachedAt time.Duration
	Deadline      time.Duration // the setup deadline, after the first create
	Err           error         // why the wait ended
}

func (e *SetupError) Error() string {
	return fmt.Sprintf("%s: setup: %d of %d items reached Failed with the finalizer by the setup deadline of %s (the last of them at %s): %v",
		e.Controller, e.Reached, e.Items, e.Deadline, e.LastReachedAt.Round(100*time.Millisecond), e.Err)
}

func (e *SetupError) Unwrap() []error { return []error{ErrSetup, e.Err} }
