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
	// pin is the machine's private copy of the object the server last
	// returned (or of the object passed to Reconcile): every write is
	// computed against it. Handlers never see it.
	pin T
	// view is the copy Object hands out.
	view T
}

// Phase returns the pinned phase: the phase read at the start of the
// reconcile, or the phase the last acknowledged transition wrote. Whatever
// happens to Object() in the meantime, Phase does not change during the
// handler call.
func (s *Step[T, P]) Phase() P { return s.phase }

// Object returns a copy of the latest object: the one passed to Reconcile,
// or the one the last acknowledged write (a transition or [Step.Patch])
// returned. It is the same pointer across calls until the next write.
// Handlers and helpers may read it and change it, including reading a stale
// cache snapshot into it (the incident's r.Get(ctx, key, item)): the machine
// computes its writes against its own copy, so nothing done to Object is
// written, and nothing moves Phase.
func (s *Step[T, P]) Object() T { return s.view }

// Patch writes a change other than the phase, such as a condition, through
// the machine's Writer, and on success makes a copy of the written object
// the one Object returns. mutate receives a copy of the object the server
// last returned (or, after a conflict, of the live object) to change. If
// that copy is no longer in the pinned phase, Patch writes nothing and
// returns a *PhaseMovedError; if mutate changes the phase field, Patch
// writes nothing and returns a *PhaseChangeError: a handler changes phase by
// returning [Transition], which the table checks and the machine pins.
// Errors from the Writer are returned wrapped.
func (s *Step[T, P]) Patch(ctx context.Context, mutate func(T) error) error {
	fail := func(err error) error {
		return fmt.Errorf("phase machine %q: patch %s in phase %q: %w", s.m.name, klog.KObj(s.pin), s.phase, err)
	}
	if mutate == nil {
		return fail(ErrNilMutate)
	}
	written, err := s.m.writer.Patch(ctx, s.pin, func(obj T) error {
		if err := s.m.moved(s, obj, s.phase, false); err != nil {
			return err
		}
		if err := mutate(obj); err != nil {
			return err
		}
		if after := s.m.get(obj); after != s.phase {
			return &PhaseChangeError{Machine: s.m.name, From: string(s.phase), To: string(after)}
		}
		return nil
	})
	if err != nil {
		return fail(err)
	}
	if isNil(written) {
		return fail(errNoObject)
	}
	if err := s.m.moved(s, written, s.phase, false); err != nil {
		return fail(err)
	}
	next, err := s.m.newStep(written)
	if err != nil {
		return err
	}
	s.pin, s.view = next.pin, next.view
	return nil
}
