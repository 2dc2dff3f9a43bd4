package phase

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/racesafe/racesafe/internal/objcopy"
	"github.com/racesafe/racesafe/requeue"
)

// DefaultMaxSteps is the number of transitions one reconcile may chain when
// [Options].MaxSteps is zero.
const DefaultMaxSteps = 8

// Writer writes an object through the API server. *statusupdate.Patcher[T]
// satisfies it.
//
// Patch (status) and PatchObject (the object itself: finalizers, metadata)
// must run mutate on a copy of obj, send the difference with obj's
// resourceVersion as a precondition, and return the object the server
// wrote. On a conflict they may re-read the live object from the API server
// and run mutate again on a copy of it. An error from mutate must end the
// call with nothing more sent, returned wrapped. They must not write into
// obj. An error means the write the machine asked for is not known to be
// written; the machine then leaves its pinned phase as it was.
//
// The machine's compare-and-swap on the phase relies on the precondition: a
// Writer that sends no resourceVersion (statusupdate's
// DisableOptimisticLock) cannot detect that the server's phase moved.
type Writer[T client.Object] interface {
	Patch(ctx context.Context, obj T, mutate func(T) error) (T, error)
	PatchObject(ctx context.Context, obj T, mutate func(T) error) (T, error)
}

// Handler runs the work of one phase. It reads the pinned phase from
// s.Phase() and the object from s.Object(), may write status through
// s.Patch, and returns what to do next. An error ends the reconcile with
// that error, wrapped; the Decision returned with it is ignored.
type Handler[T client.Object, P ~string] func(ctx context.Context, s *Step[T, P]) (Decision, error)

// Options configure a [Machine]. Name, Get, Set, Writer and at least one
// handler are required; the rest have defaults.
type Options[T client.Object, P ~string] struct {
	// Name labels the machine's metrics and log lines: the controller or
	// the kind it drives.
	Name string

	// Get reads the phase of an object. The machine calls it once per
	// reconcile, on the object passed to Reconcile, and on objects a write
	// returned; never to decide which handler runs after a handler ran.
	Get func(T) P

	// Set sets the phase of an object. It is called inside Writer.Patch on
	// the copy being written.
	Set func(T, P)

	// Writer writes transitions and [Step.Patch] calls. Use a
	// *statusupdate.Patcher[T] when the phase lives in status.
	Writer Writer[T]

	// Handlers maps each phase to the handler that runs in it. A phase may be
	// missing only if it is terminal (it then ends the reconcile with an
	// empty result) or if Unknown handles it.
	Handlers map[P]Handler[T, P]

	// Transitions lists, for each phase, the phases its handler may move
	// to. A transition not listed is a *TransitionError and is not
	// written. Every phase named here must have a handler or be terminal.
	Transitions map[P][]P

	// Terminal lists the phases in which a reconcile may end with nothing
	// to do ([Done]). In every other phase a reconcile ends with a requeue
	// or with [WaitForEvent].
	Terminal []P

	// Unknown runs for a non-terminal phase that has no handler, for
	// instance a phase written by a newer version of the controller. Its
	// decisions are treated as any handler's. When nil, the machine requeues
	// after Interval. Either way, the phase is logged and counted in
	// racesafe_phase_unknown_total{controller,phase}; an unknown phase never
	// ends a reconcile with an empty result.
	Unknown Handler[T, P]

	// Interval is the delay of every requeue that no handler chose: the
	// unknown-phase default, the floor under Done, the step bound. It is
	// read at each use, so it can follow a reloaded configuration. Nil means
	// requeue.DefaultInterval.
	Interval requeue.Interval

	// MaxSteps bounds the transitions chained in one reconcile, so that a
	// cycle in the handlers cannot spin inside one reconcile. When the
	// bound is reached the machine requeues after Interval. Zero means
	// [DefaultMaxSteps].
	MaxSteps int
}

// Machine dispatches a reconcile to the handler of the object's phase. It
// reads the phase once, pins it, and advances the pin only when the server
// acknowledged the write of a transition. It holds no per-reconcile state, so
// one Machine serves all workers of a controller concurrently.
//
// Machine implements reconcile.ObjectReconciler[T]: reconcile.AsReconciler
// can fetch the object and hand it over.
type Machine[T client.Object, P ~string] struct {
	name        string
	get         func(T) P
	set         func(T, P)
	writer      Writer[T]
	handlers    map[P]Handler[T, P]
	transitions map[P]map[P]struct{}
	terminal    map[P]struct{}
	unknown     Handler[T, P]
	interval    requeue.Interval
	maxSteps    int
}

// New validates opts and returns a Machine. The error joins one
// *OptionsError per problem found: a missing function, a nil handler, a
// transition from a phase without a handler, a transition to a phase that
// has neither a handler nor is terminal, a transition from a phase to
// itself, a negative MaxSteps. New copies the
// maps and slices in opts; changing them afterwards has no effect.
func New[T client.Object, P ~string](opts Options[T, P]) (*Machine[T, P], error) {
	var errs []error
	bad := func(field, problem string) {
		errs = append(errs, &OptionsError{Field: field, Problem: problem})
	}
	if opts.Name == "" {
		bad("Name", "empty; it labels metrics and logs")
	}
	if opts.Get == nil {
		bad("Get", "nil")
	}
	if opts.Set == nil {
		bad("Set", "nil")
	}
	if isNil(opts.Writer) {
		bad("Writer", "nil")
	}
	if len(opts.Handlers) == 0 {
		bad("Handlers", "empty")
	}
	if opts.MaxSteps < 0 {
		bad("MaxSteps", fmt.Sprintf("negative (%d)", opts.MaxSteps))
	}

	m := &Machine[T, P]{
		name:        opts.Name,
		get:         opts.Get,
		set:         opts.Set,
		writer:      opts.Writer,
		handlers:    maps.Clone(opts.Handlers),
		transitions: make(map[P]map[P]struct{}, len(opts.Transitions)),
		terminal:    make(map[P]struct{}, len(opts.Terminal)),
		unknown:     opts.Unknown,
		interval:    opts.Interval,
		maxSteps:    opts.MaxSteps,
	}
	if m.maxSteps == 0 {
		m.maxSteps = DefaultMaxSteps
	}
	for _, p := range opts.Terminal {
		m.terminal[p] = struct{}{}
	}
	for _, p := range slices.Sorted(maps.Keys(opts.Handlers)) {
		if opts.Handlers[p] == nil {
			bad(fmt.Sprintf("Handlers[%q]", p), "nil handler")
		}
	}
	for _, from := range slices.Sorted(maps.Keys(opts.Transitions)) {
		field := fmt.Sprintf("Transitions[%q]", from)
		if _, ok := opts.Handlers[from]; !ok {
			bad(field, "phase has no handler, and only a handler can ask for a transition")
		}
		tos := make(map[P]struct{}, len(opts.Transitions[from]))
		for _, to := range opts.Transitions[from] {
			if to == from {
				bad(field, fmt.Sprintf("lists %q itself: a transition must change the phase", to))
			}
			if !m.known(to) {
				bad(field, fmt.Sprintf("target %q has no handler and is not terminal", to))
			}
			tos[to] = struct{}{}
		}
		m.transitions[from] = tos
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return m, nil
}

// errNotBuilt is returned by a Machine that New did not build.
var errNotBuilt = errors.New("phase: Machine not built by New")

// Reconcile runs the handler of obj's phase, and of each phase it
// transitions to, until a handler decides to requeue or wait, or a terminal
// phase is done.
//
// The phase is read once, here, from the machine's private copy of obj, and
// pinned. Handlers and the helpers they call may do anything to obj or to
// s.Object(), including reading a stale cache snapshot into it: the machine
// dispatches on the pin, checks transitions against the pin, computes every
// write against its private copy, and moves the pin only to the phase a
// write the server acknowledged returned.
//
// Reconcile never returns an empty result with a nil error in a non-terminal
// phase unless a handler decided [WaitForEvent] with a reason or a [Release]
// was written. A nil obj is [ErrNilObject]; a write refused because the
// server's phase moved is a [*PhaseMovedError].
func (m *Machine[T, P]) Reconcile(ctx context.Context, obj T) (reconcile.Result, error) {
	if m == nil || m.get == nil {
		return reconcile.Result{}, errNotBuilt
	}
	if isNil(obj) {
		return reconcile.Result{}, fmt.Errorf("phase machine %q: %w", m.name, ErrNilObject)
	}
	logger := log.FromContext(ctx).WithValues("machine", m.name)
	s, err := m.newStep(obj)
	if err != nil {
		return reconcile.Result{}, err
	}
	for steps := 0; ; steps++ {
		handler, ok := m.handlers[s.phase]
		_, terminal := m.terminal[s.phase]
		if !ok && terminal {
			return reconcile.Result{}, nil
		}
		if steps >= m.maxSteps {
			return m.floor(logger, s.phase, floorMaxSteps,
				"transitions in this reconcile reached MaxSteps; requeueing", "maxSteps", m.maxSteps), nil
		}
		if !ok {
			unknownTotal.WithLabelValues(m.name, string(s.phase)).Inc()
			if m.unknown == nil {
				after := m.interval.Duration()
				logger.Info("no handler for phase; requeueing", "phase", s.phase, "requeueAfter", after)
				return reconcile.Result{RequeueAfter: after}, nil
			}
			logger.Info("no handler for phase; running the Unknown handler", "phase", s.phase)
			handler = m.unknown
		}

		d, err := handler(ctx, s)
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("phase machine %q: handler of phase %q: %w", m.name, s.phase, err)
		}
		switch d.kind {
		case kindTransition:
			next, err := m.transition(ctx, logger, s, d)
			if err != nil {
				return reconcile.Result{}, err
			}
			s = next
			continue
		case kindRelease:
			return reconcile.Result{}, m.release(ctx, logger, s, d)
		case kindRequeueAfter:
			if d.after > 0 {
				return reconcile.Result{RequeueAfter: d.after}, nil
			}
			return reconcile.Result{RequeueAfter: m.interval.Duration()}, nil
		case kindRequeueInterval:
			if d.interval == nil {
				return reconcile.Result{RequeueAfter: m.interval.Duration()}, nil
			}
			return reconcile.Result{RequeueAfter: d.interval.Duration()}, nil
		case kindWait:
			if d.reason != "" {
				logger.V(1).Info("waiting for an event", "phase", s.phase, "event", d.reason)
				return reconcile.Result{}, nil
			}
			if terminal {
				return reconcile.Result{}, nil
			}
			return m.floor(logger, s.phase, floorUnnamed,
				"handler waits for an event it does not name; requeueing"), nil
		default:
			if terminal {
				return reconcile.Result{}, nil
			}
			return m.floor(logger, s.phase, floorDone,
				"handler of a non-terminal phase is done without a requeue; requeueing"), nil
		}
	}
}

// newStep pins the phase of a private copy of obj, the object the server
// last returned, and hands handlers another copy.
func (m *Machine[T, P]) newStep(obj T) (*Step[T, P], error) {
	pin, err := objcopy.DeepCopy(obj)
	if err == nil {
		var view T
		if view, err = objcopy.DeepCopy(pin); err == nil {
			return &Step[T, P]{m: m, phase: m.get(pin), pin: pin, view: view}, nil
		}
	}
	return nil, fmt.Errorf("phase machine %q: %s: %w: %w", m.name, klog.KObj(obj), ErrObjectCopy, err)
}

// checkMutate refuses a decision's mutate the machine cannot run on s's
// objects.
func (m *Machine[T, P]) checkMutate(s *Step[T, P], d Decision) error {
	switch {
	case d.mutate == nil && d.kind == kindRelease, d.mutate != nil && d.mutate.isNil:
		return fmt.Errorf("phase machine %q: %s in phase %q: %w: %w", m.name, d, s.phase, ErrInvalidDecision, ErrNilMutate)
	case d.mutate != nil && !d.mutate.fits(s.pin):
		return fmt.Errorf("phase machine %q: %s in phase %q: %w: its function takes %s, the machine writes %T",
			m.name, d, s.phase, ErrInvalidDecision, d.mutate.typ, s.pin)
	}
	return nil
}

// sent records what the Writer's last call of a mutate was given: the object
// the request was computed against.
type sent struct {
	called     bool
	rv         string
	finalizers int
}

func (x *sent) record(obj client.Object) {
	x.called, x.rv, x.finalizers = true, obj.GetResourceVersion(), len(obj.GetFinalizers())
}

// moved returns the *PhaseMovedError of a write computed against obj, whose
// phase is no longer s's pin, or nil.
func (m *Machine[T, P]) moved(s *Step[T, P], obj T, to P, release bool) error {
	live := m.get(obj)
	if live == s.phase {
		return nil
	}
	return &PhaseMovedError{
		Machine: m.name, Object: klog.KObj(s.pin).String(),
		From: string(s.phase), To: string(to), Release: release, Live: string(live),
	}
}

// transition writes d's phase through the Writer, compare-and-swap on the
// pinned phase, and returns the step of the new phase on a copy of the
// object the server returned. s is not changed, so on an error the pin stays
// where it was.
func (m *Machine[T, P]) transition(ctx context.Context, logger logr.Logger, s *Step[T, P], d Decision) (*Step[T, P], error) {
	from, to := s.phase, P(d.to)
	if _, ok := m.transitions[from][to]; !ok || from == to {
		return nil, &TransitionError{Machine: m.name, From: string(from), To: string(to)}
	}
	if err := m.checkMutate(s, d); err != nil {
		return nil, err
	}
	var last sent
	written, err := m.writer.Patch(ctx, s.pin, func(obj T) error {
		last.record(obj)
		if err := m.moved(s, obj, to, false); err != nil {
			return err
		}
		m.set(obj, to)
		if d.mutate == nil {
			return nil
		}
		if err := d.mutate.run(obj); err != nil {
			return err
		}
		if got := m.get(obj); got != to {
			return &PhaseChangeError{Machine: m.name, From: string(to), To: string(got)}
		}
		return nil
	})
	if moved := (*PhaseMovedError)(nil); errors.As(err, &moved) {
		logger.Info("phase moved on the server; transition not written",
			"from", from, "to", to, "live", moved.Live, "resourceVersion", last.rv)
		return nil, moved
	}
	if err == nil {
		switch {
		case !last.called:
			err = fmt.Errorf("%w: the Writer did not run the change", ErrPhaseNotWritten)
		case isNil(written):
			err = fmt.Errorf("%w: the Writer returned no object", ErrPhaseNotWritten)
		case m.get(written) != to:
			err = fmt.Errorf("%w: it reads %q", ErrPhaseNotWritten, m.get(written))
		case written.GetResourceVersion() == last.rv:
			err = fmt.Errorf("%w: it carries resourceVersion %q, the one sent", ErrPhaseNotWritten, last.rv)
		}
	}
	if err != nil {
		return nil, &WriteError{
			Machine: m.name, From: string(from), To: string(to),
			Object: klog.KObj(s.pin).String(), Err: err,
		}
	}
	transitionsTotal.WithLabelValues(m.name, string(from), string(to)).Inc()
	logger.Info("phase transition", "from", from, "to", to, "resourceVersion", written.GetResourceVersion())
	return m.newStep(written)
}

// release writes d's change through the Writer's PatchObject,
// compare-and-swap on the pinned phase. The reconcile ends after it.
func (m *Machine[T, P]) release(ctx context.Context, logger logr.Logger, s *Step[T, P], d Decision) error {
	if err := m.checkMutate(s, d); err != nil {
		return err
	}
	from := s.phase
	var last sent
	written, err := m.writer.PatchObject(ctx, s.pin, func(obj T) error {
		last.record(obj)
		if err := m.moved(s, obj, "", true); err != nil {
			return err
		}
		if err := d.mutate.run(obj); err != nil {
			return err
		}
		if got := m.get(obj); got != from {
			return &PhaseChangeError{Machine: m.name, From: string(from), To: string(got)}
		}
		return nil
	})
	if moved := (*PhaseMovedError)(nil); errors.As(err, &moved) {
		logger.Info("phase moved on the server; release not written",
			"from", from, "live", moved.Live, "resourceVersion", last.rv)
		return moved
	}
	if err == nil {
		switch {
		case !last.called:
			err = fmt.Errorf("%w: the Writer did not run the change", ErrReleaseNotWritten)
		case isNil(written):
			err = fmt.Errorf("%w: the Writer returned no object", ErrReleaseNotWritten)
		case written.GetResourceVersion() == last.rv && !removed(written, last):
			err = fmt.Errorf("%w: it carries resourceVersion %q, the one sent", ErrReleaseNotWritten, last.rv)
		}
	}
	if err != nil {
		return &WriteError{
			Machine: m.name, From: string(from), Release: true,
			Object: klog.KObj(s.pin).String(), Err: err,
		}
	}
	releasesTotal.WithLabelValues(m.name, string(from)).Inc()
	logger.Info("released", "phase", from, "resourceVersion", written.GetResourceVersion(),
		"removed", removed(written, last))
	return nil
}

// removed reports whether written shows the server removed the object: its
// deletion was requested and the write took its last finalizer. The answer
// then may carry the resourceVersion that was sent.
func removed(written client.Object, last sent) bool {
	return written.GetDeletionTimestamp() != nil && len(written.GetFinalizers()) == 0 && last.finalizers > 0
}

// floor is the requeue no handler asked for: logged, counted, never zero.
func (m *Machine[T, P]) floor(logger logr.Logger, p P, reason, msg string, kv ...any) reconcile.Result {
	after := m.interval.Duration()
	floorTotal.WithLabelValues(m.name, string(p), reason).Inc()
	logger.Info(msg, append([]any{"phase", p, "requeueAfter", after}, kv...)...)
	return reconcile.Result{RequeueAfter: after}
}

// known reports whether the machine can run phase p: it has a handler or is
// terminal.
func (m *Machine[T, P]) known(p P) bool {
	if _, ok := m.handlers[p]; ok {
		return true
	}
	_, ok := m.terminal[p]
	return ok
}

// isNil reports whether v is nil or a typed nil, such as (*corev1.Pod)(nil)
// in a T or a nil *statusupdate.Patcher in a Writer.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Interface, reflect.Chan:
		return rv.IsNil()
	default:
		return false
	}
}
