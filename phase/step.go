package phase

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// errNoObject is the cause of a Step.Patch whose Writer returned no object.
var errNoObject = errors.New("the Writer returned no object")

// Step is a handler's view of the reconcile in one phase: the pinned phase
// and the latest object written. A Step is valid only during the handler
// call it was passed to, and only in that goroutine.
type Step[T client.Object, P ~string] struct {
	m     *Machine[T, P]
	phase P
	obj   T
}

// Phase returns the pinned phase: the phase read at the start of the
// reconcile, or the phase the last successful transition wrote. Whatever
// happens to Object() in the meantime, Phase does not change during the
// handler call.
func (s *Step[T, P]) Phase() P { return s.phase }

// Object returns the latest object: the one passed to Reconcile, or the one
// the last successful write (a transition or [Step.Patch]) returned. It is
// the same pointer across calls until the next write, so a helper that reads
// into it (the incident's r.Get(ctx, key, item)) changes what Object returns,
// but not Phase.
func (s *Step[T, P]) Object() T { return s.obj }

// Patch writes a change other than the phase, such as a condition, through
// the machine's Writer, and on success makes the written object the one
// Object returns. mutate receives a copy to change; if it changes the phase
// field, Patch writes nothing and returns a *PhaseChangeError: a handler
// changes phase by returning [Transition], which the table checks and the
// machine pins. Errors from the Writer are returned wrapped.
func (s *Step[T, P]) Patch(ctx context.Context, mutate func(T) error) error {
	fail := func(err error) error {
		return fmt.Errorf("phase machine %q: patch %s in phase %q: %w", s.m.name, klog.KObj(s.obj), s.phase, err)
	}
	if mutate == nil {
		return fail(ErrNilMutate)
	}
	written, err := s.m.writer.Patch(ctx, s.obj, func(obj T) error {
		// Compare with the copy's own phase, not the pin: after a stale read
		// into Object(), or after a conflict, the copy may lag the pin, and
		// only a change made by mutate is refused.
		before := s.m.get(obj)
		if err := mutate(obj); err != nil {
			return err
		}
		if after := s.m.get(obj); after != before {
			return &PhaseChangeError{Machine: s.m.name, From: string(before), To: string(after)}
		}
		return nil
	})
	if err != nil {
		return fail(err)
	}
	if isNil(written) {
		return fail(errNoObject)
	}
	s.obj = written
	return nil
}
