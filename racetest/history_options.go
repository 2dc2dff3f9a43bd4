package racetest

import (
	"fmt"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Subject is a client under test of [CheckHistories]: how to configure the
// manager whose cache it reads, and how to build it on that manager.
type Subject struct {
	// Name names the subject in reports; required.
	Name string
	// Namespaces is how many namespaces a history spreads its objects over,
	// all of them in the cache's DefaultNamespaces; 1 when zero. Two make a
	// multi-namespace cache.
	Namespaces int
	// Configure, if set, changes the manager's options after the checker
	// set its own (DefaultNamespaces, the lagged cache, the faults, a cache
	// of unstructured objects): a label-selected cache, a client option.
	Configure func(o *manager.Options) error
	// Client builds the client under test on the started manager; nil
	// means mgr.GetClient().
	Client func(mgr manager.Manager) (client.Client, error)
	// Refused, if set, tells a read the subject refused (an
	// expectations.ErrStale): counted, not a violation.
	Refused func(error) bool
}

// CheckOptions configure [CheckHistories]. Config and Subject.Name are
// required; every other field has a default at its zero value.
type CheckOptions struct {
	// Config reaches the API server as an administrator: the checker
	// creates a namespace per history with it.
	Config *rest.Config
	// Subject is the client under test.
	Subject Subject
	// Seed is the seed of the first history; history i has seed Seed+i.
	Seed uint64
	// Histories is how many histories to run; 1 when zero.
	Histories int
	// Ops is the number of operations a history has; 40 when zero.
	Ops int
	// Objects is the number of object names a history uses per namespace,
	// few so that its operations collide; 3 when zero.
	Objects int
	// Lag lags the subject's cache (see [LagOptions]); the zero value lags
	// nothing. Its WatchFaults, if set, break the cache's watches too.
	Lag LagOptions
	// Ambiguous is the rate of the subject's writes that are applied and
	// answered with a timeout; 0 means none, at most 1.
	Ambiguous float64
	// OpTimeout is the deadline of each operation's context; 5s when zero.
	OpTimeout time.Duration
	// Slack is how far past its deadline an operation may return before the
	// bounded rule counts it; 500ms when zero.
	Slack time.Duration
	// Only, if set, runs only the operations of the generated history whose
	// Index it holds: a shrunk reproducer, run again.
	Only []int
	// Shrink is how many reruns may be spent shrinking each failing history
	// to a short reproducer; 0 does not shrink.
	Shrink int
	// Parallel is how many histories run at once, each in namespaces and
	// a manager of its own; 1 when zero. The report is the same whatever
	// it is: histories are added, logged and shrunk in seed order, and
	// shrinking reruns one at a time.
	Parallel int
	// Log, if set, receives one line per finished history.
	Log func(format string, args ...any)
}

// CheckOptionsError says which field of [CheckOptions] is invalid.
// errors.Is(err, ErrInvalidCheckOptions) is true.
type CheckOptionsError struct {
	// Field names the field.
	Field string
	// Reason says what is wrong with it.
	Reason string
}

// ErrInvalidCheckOptions is matched by every *CheckOptionsError.
var ErrInvalidCheckOptions = fmt.Errorf("invalid check options")

// Error implements error.
func (e *CheckOptionsError) Error() string {
	return fmt.Sprintf("%v: CheckOptions.%s %s", ErrInvalidCheckOptions, e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidCheckOptions) true.
func (e *CheckOptionsError) Is(target error) bool { return target == ErrInvalidCheckOptions }

// withDefaults validates o and fills its defaults.
func (o CheckOptions) withDefaults() (CheckOptions, error) {
	switch {
	case o.Config == nil:
		return o, &CheckOptionsError{Field: "Config", Reason: "is nil"}
	case o.Subject.Name == "":
		return o, &CheckOptionsError{Field: "Subject.Name", Reason: "is empty"}
	case o.Histories < 0, o.Ops < 0, o.Objects < 0, o.Subject.Namespaces < 0, o.Shrink < 0, o.Parallel < 0:
		return o, &CheckOptionsError{Field: "Histories, Ops, Objects, Shrink, Parallel or Subject.Namespaces", Reason: "is negative"}
	case o.Ambiguous < 0 || o.Ambiguous > 1 || o.Ambiguous != o.Ambiguous:
		return o, &CheckOptionsError{Field: "Ambiguous", Reason: fmt.Sprintf("is %v, not in [0, 1]", o.Ambiguous)}
	case o.OpTimeout < 0 || o.Slack < 0:
		return o, &CheckOptionsError{Field: "OpTimeout or Slack", Reason: "is negative"}
	}
	if o.Histories == 0 {
		o.Histories = 1
	}
	if o.Parallel == 0 {
		o.Parallel = 1
	}
	if o.Ops == 0 {
		o.Ops = 40
	}
	if o.Objects == 0 {
		o.Objects = 3
	}
	if o.Subject.Namespaces == 0 {
		o.Subject.Namespaces = 1
	}
	if o.OpTimeout == 0 {
		o.OpTimeout = 5 * time.Second
	}
	if o.Slack == 0 {
		o.Slack = 500 * time.Millisecond
	}
	return o, nil
}
