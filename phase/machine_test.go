package phase_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/racesafe/racesafe/phase"
	"github.com/racesafe/racesafe/requeue"
)

// Machine hands reconcile.AsReconciler what it needs.
var _ reconcile.ObjectReconciler[*corev1.Pod] = (*phase.Machine[*corev1.Pod, Phase])(nil)

type handlerMap = map[Phase]phase.Handler[*corev1.Pod, Phase]

func decide(d phase.Decision, err error) phase.Handler[*corev1.Pod, Phase] {
	return func(context.Context, *phase.Step[*corev1.Pod, Phase]) (phase.Decision, error) { return d, err }
}

func TestDecisions(t *testing.T) {
	errHandler := errors.New("install failed")
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "jobs"}, "uninstall")
	tests := []struct {
		name      string
		phase     Phase
		decision  phase.Decision
		err       error
		want      reconcile.Result
		wantErr   error
		wantFloor string // reason counted in racesafe_phase_floor_total, "" for none
	}{
		{name: "requeue after", phase: Running, decision: phase.RequeueAfter(5 * time.Second),
			want: reconcile.Result{RequeueAfter: 5 * time.Second}},
		{name: "requeue after zero means Interval", phase: Running, decision: phase.RequeueAfter(0),
			want: reconcile.Result{RequeueAfter: 7 * time.Second}},
		{name: "requeue after negative means Interval", phase: Running, decision: phase.RequeueAfter(-time.Second),
			want: reconcile.Result{RequeueAfter: 7 * time.Second}},
		{name: "requeue interval", phase: Running, decision: phase.Requeue(requeue.Fixed(9 * time.Second)),
			want: reconcile.Result{RequeueAfter: 9 * time.Second}},
		{name: "requeue nil interval means Interval", phase: Running, decision: phase.Requeue(nil),
			want: reconcile.Result{RequeueAfter: 7 * time.Second}},
		{name: "requeue zero interval means the default", phase: Running,
			decision: phase.Requeue(func() time.Duration { return 0 }),
			want:     reconcile.Result{RequeueAfter: requeue.DefaultInterval}},
		{name: "named wait", phase: Running, decision: phase.WaitForEvent("uninstall job finishes"),
			want: reconcile.Result{}},
		{name: "unnamed wait in a non-terminal phase", phase: Running, decision: phase.WaitForEvent(""),
			want: reconcile.Result{RequeueAfter: 7 * time.Second}, wantFloor: "unnamed wait"},
		{name: "done in a non-terminal phase", phase: Running, decision: phase.Done(),
			want: reconcile.Result{RequeueAfter: 7 * time.Second}, wantFloor: "done"},
		{name: "zero decision in a non-terminal phase", phase: Running, decision: phase.Decision{},
			want: reconcile.Result{RequeueAfter: 7 * time.Second}, wantFloor: "done"},
		{name: "done in a terminal phase", phase: Deleted, decision: phase.Done(), want: reconcile.Result{}},
		{name: "unnamed wait in a terminal phase", phase: Deleted, decision: phase.WaitForEvent(""),
			want: reconcile.Result{}},
		{name: "error", phase: Running, decision: phase.RequeueAfter(time.Second), err: errHandler,
			want: reconcile.Result{}, wantErr: errHandler},
		{name: "terminal error survives", phase: Running, err: reconcile.TerminalError(notFound),
			want: reconcile.Result{}, wantErr: reconcile.TerminalError(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, newPod(tt.phase))
			opts := podOptions(e.writer, handlerMap{tt.phase: decide(tt.decision, tt.err)})
			opts.Name = "decisions-" + tt.name
			opts.Terminal = []Phase{Deleted}
			floors := map[string]func() float64{}
			for _, reason := range []string{"done", "unnamed wait", "max steps"} {
				labels := map[string]string{"controller": opts.Name, "phase": string(tt.phase), "reason": reason}
				floors[reason] = counterDelta(t, "racesafe_phase_floor_total", labels)
			}
			res, err := mustNew(t, opts).Reconcile(t.Context(), e.live(t))

			if res != tt.want {
				t.Errorf("result = %+v, want %+v", res, tt.want)
			}
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Errorf("error = %v, want %v", err, tt.wantErr)
			}
			if tt.name == "terminal error survives" && !apierrors.IsNotFound(err) {
				t.Errorf("apierrors.IsNotFound lost through the machine: %v", err)
			}
			for _, reason := range []string{"done", "unnamed wait", "max steps"} {
				want := 0.0
				if reason == tt.wantFloor {
					want = 1
				}
				if got := floors[reason](); got != want {
					t.Errorf("racesafe_phase_floor_total{reason=%q} grew by %v, want %v", reason, got, want)
				}
			}
			if n := e.statusPatches.Load(); n != 0 {
				t.Errorf("%d status patches, want none", n)
			}
		})
	}
}

func TestIntervalReadAtCallTime(t *testing.T) {
	e := newEnv(t, newPod(Running))
	d := time.Second
	opts := podOptions(e.writer, handlerMap{Running: decide(phase.Done(), nil)})
	opts.Interval = func() time.Duration { return d }
	m := mustNew(t, opts)
	for _, want := range []time.Duration{time.Second, time.Minute} {
		d = want
		if res, err := m.Reconcile(t.Context(), e.live(t)); err != nil || res.RequeueAfter != want {
			t.Errorf("Reconcile = %+v, %v; want RequeueAfter %v", res, err, want)
		}
	}
}

func TestDisallowedTransition(t *testing.T) {
	e := newEnv(t, newPod(Failed))
	opts := podOptions(e.writer, handlerMap{
		Failed:   decide(phase.Transition(Running), nil),
		Running:  decide(phase.RequeueAfter(time.Second), nil),
		Deleting: decide(phase.RequeueAfter(time.Second), nil),
	})
	opts.Name = "disallowed"
	opts.Transitions = map[Phase][]Phase{Failed: {Deleting}}
	_, err := mustNew(t, opts).Reconcile(t.Context(), e.live(t))

	var te *phase.TransitionError
	if !errors.As(err, &te) || te.From != "Failed" || te.To != "Running" || te.Machine != "disallowed" {
		t.Fatalf("error = %v, want a *TransitionError Failed -> Running", err)
	}
	if !errors.Is(err, phase.ErrTransitionNotAllowed) {
		t.Errorf("errors.Is(%v, ErrTransitionNotAllowed) = false", err)
	}
	if n := e.statusPatches.Load(); n != 0 {
		t.Errorf("%d status patches, want none", n)
	}
	if got := getPhase(e.live(t)); got != Failed {
		t.Errorf("server phase = %q, want Failed", got)
	}
}

func TestChainBound(t *testing.T) {
	e := newEnv(t, newPod(Pending))
	var runs int
	flip := func(to Phase) phase.Handler[*corev1.Pod, Phase] {
		return func(context.Context, *phase.Step[*corev1.Pod, Phase]) (phase.Decision, error) {
			runs++
			return phase.Transition(to), nil
		}
	}
	opts := podOptions(e.writer, handlerMap{Pending: flip(Running), Running: flip(Pending)})
	opts.Name = "cycle"
	opts.Transitions = map[Phase][]Phase{Pending: {Running}, Running: {Pending}}
	opts.MaxSteps = 3
	labels := map[string]string{"controller": "cycle", "phase": "Running", "reason": "max steps"}
	floored := counterDelta(t, "racesafe_phase_floor_total", labels)
	res, err := mustNew(t, opts).Reconcile(t.Context(), e.live(t))
	if err != nil || res.RequeueAfter != 7*time.Second {
		t.Fatalf("Reconcile = %+v, %v; want RequeueAfter 7s at the bound", res, err)
	}
	if runs != 3 || e.statusPatches.Load() != 3 {
		t.Errorf("%d handler runs, %d writes; want 3 and 3", runs, e.statusPatches.Load())
	}
	if got := getPhase(e.live(t)); got != Running {
		t.Errorf("server phase = %q, want Running after three flips from Pending", got)
	}
	if got := floored(); got != 1 {
		t.Errorf("racesafe_phase_floor_total%v grew by %v, want 1", labels, got)
	}
}

func TestDefaultMaxSteps(t *testing.T) {
	e := newEnv(t, newPod(Pending))
	opts := podOptions(e.writer, handlerMap{
		Pending: decide(phase.Transition(Running), nil),
		Running: decide(phase.Transition(Pending), nil),
	})
	opts.Name = "cycle-default"
	opts.Transitions = map[Phase][]Phase{Pending: {Running}, Running: {Pending}}
	if _, err := mustNew(t, opts).Reconcile(t.Context(), e.live(t)); err != nil {
		t.Fatal(err)
	}
	if n := e.statusPatches.Load(); n != phase.DefaultMaxSteps {
		t.Errorf("%d writes, want DefaultMaxSteps = %d", n, phase.DefaultMaxSteps)
	}
}

func TestUnknownPhase(t *testing.T) {
	t.Run("default requeues after Interval", func(t *testing.T) {
		e := newEnv(t, newPod("Mystery"))
		opts := podOptions(e.writer, handlerMap{Running: decide(phase.Done(), nil)})
		opts.Name = "unknown-default"
		unknown := counterDelta(t, "racesafe_phase_unknown_total", map[string]string{"controller": opts.Name, "phase": "Mystery"})
		res, err := mustNew(t, opts).Reconcile(t.Context(), e.live(t))
		if err != nil || res != (reconcile.Result{RequeueAfter: 7 * time.Second}) {
			t.Errorf("Reconcile = %+v, %v; want RequeueAfter 7s", res, err)
		}
		if got := unknown(); got != 1 {
			t.Errorf("racesafe_phase_unknown_total{controller=%q} grew by %v, want 1", opts.Name, got)
		}
	})
	t.Run("empty phase without handler is unknown too", func(t *testing.T) {
		e := newEnv(t, newPod(""))
		opts := podOptions(e.writer, handlerMap{Running: decide(phase.Done(), nil)})
		opts.Name = "unknown-empty"
		res, err := mustNew(t, opts).Reconcile(t.Context(), e.live(t))
		if err != nil || res.RequeueAfter != 7*time.Second {
			t.Errorf("Reconcile = %+v, %v; want RequeueAfter 7s", res, err)
		}
	})
	t.Run("custom handler", func(t *testing.T) {
		e := newEnv(t, newPod("Mystery"))
		var saw Phase
		opts := podOptions(e.writer, handlerMap{Running: decide(phase.Done(), nil)})
		opts.Name = "unknown-custom"
		unknown := counterDelta(t, "racesafe_phase_unknown_total", map[string]string{"controller": opts.Name, "phase": "Mystery"})
		opts.Unknown = func(_ context.Context, s *phase.Step[*corev1.Pod, Phase]) (phase.Decision, error) {
			saw = s.Phase()
			return phase.RequeueAfter(time.Minute), nil
		}
		res, err := mustNew(t, opts).Reconcile(t.Context(), e.live(t))
		if err != nil || res.RequeueAfter != time.Minute || saw != "Mystery" {
			t.Errorf("Reconcile = %+v, %v, handler saw %q; want RequeueAfter 1m from the Unknown handler in Mystery", res, err, saw)
		}
		if got := unknown(); got != 1 {
			t.Errorf("racesafe_phase_unknown_total{controller=%q} grew by %v, want 1", opts.Name, got)
		}
	})
	t.Run("custom handler that is done is floored", func(t *testing.T) {
		e := newEnv(t, newPod("Mystery"))
		opts := podOptions(e.writer, handlerMap{Running: decide(phase.Done(), nil)})
		opts.Name = "unknown-done"
		opts.Unknown = decide(phase.Done(), nil)
		res, err := mustNew(t, opts).Reconcile(t.Context(), e.live(t))
		if err != nil || res.RequeueAfter != 7*time.Second {
			t.Errorf("Reconcile = %+v, %v; want RequeueAfter 7s", res, err)
		}
	})
	t.Run("terminal phase without handler is done", func(t *testing.T) {
		e := newEnv(t, newPod(Deleted))
		opts := podOptions(e.writer, handlerMap{Running: decide(phase.Done(), nil)})
		opts.Name = "unknown-terminal"
		unknown := counterDelta(t, "racesafe_phase_unknown_total", map[string]string{"controller": opts.Name, "phase": "Deleted"})
		opts.Terminal = []Phase{Deleted}
		res, err := mustNew(t, opts).Reconcile(t.Context(), e.live(t))
		if err != nil || !res.IsZero() {
			t.Errorf("Reconcile = %+v, %v; want an empty result", res, err)
		}
		if got := unknown(); got != 0 {
			t.Errorf("racesafe_phase_unknown_total{controller=%q} grew by %v, want 0", opts.Name, got)
		}
	})
}

func TestStepPatch(t *testing.T) {
	t.Run("writes and moves Object to the server's answer", func(t *testing.T) {
		e := newEnv(t, newPod(Running))
		in := e.live(t)
		var before, after *corev1.Pod
		opts := podOptions(e.writer, handlerMap{
			Running: func(ctx context.Context, s *phase.Step[*corev1.Pod, Phase]) (phase.Decision, error) {
				before = s.Object()
				if err := s.Patch(ctx, func(p *corev1.Pod) error {
					p.Status.Message = "dry run passed"
					return nil
				}); err != nil {
					return phase.Decision{}, err
				}
				after = s.Object()
				return phase.WaitForEvent("job finishes"), nil
			},
		})
		if _, err := mustNew(t, opts).Reconcile(t.Context(), in); err != nil {
			t.Fatal(err)
		}
		if before == in || before.ResourceVersion != in.ResourceVersion {
			t.Errorf("the first handler got %p at %s, want a copy of the object passed to Reconcile (%p at %s)",
				before, before.ResourceVersion, in, in.ResourceVersion)
		}
		if after.Status.Message != "dry run passed" || after.ResourceVersion == in.ResourceVersion {
			t.Errorf("Object() after Patch = message %q at %s; want the written object, newer than %s",
				after.Status.Message, after.ResourceVersion, in.ResourceVersion)
		}
		if in.Status.Message != "" {
			t.Errorf("Patch wrote into the caller's object")
		}
	})
	t.Run("rejects a phase change", func(t *testing.T) {
		e := newEnv(t, newPod(Running))
		var patchErr error
		opts := podOptions(e.writer, handlerMap{
			Running: func(ctx context.Context, s *phase.Step[*corev1.Pod, Phase]) (phase.Decision, error) {
				patchErr = s.Patch(ctx, func(p *corev1.Pod) error {
					p.Status.Message = "sneaky"
					setPhase(p, Deleted)
					return nil
				})
				if getPhase(s.Object()) != Running || s.Object().Status.Message != "" {
					t.Errorf("a rejected Patch changed Object()")
				}
				return phase.RequeueAfter(time.Second), nil
			},
		})
		opts.Name = "step-reject"
		if _, err := mustNew(t, opts).Reconcile(t.Context(), e.live(t)); err != nil {
			t.Fatal(err)
		}
		var pce *phase.PhaseChangeError
		if !errors.As(patchErr, &pce) || pce.From != "Running" || pce.To != "Deleted" {
			t.Fatalf("Patch error = %v, want a *PhaseChangeError Running -> Deleted", patchErr)
		}
		if !errors.Is(patchErr, phase.ErrPhaseChanged) {
			t.Errorf("errors.Is(%v, ErrPhaseChanged) = false", patchErr)
		}
		if n := e.statusPatches.Load(); n != 0 {
			t.Errorf("%d status patches, want none", n)
		}
	})
	t.Run("nil mutate", func(t *testing.T) {
		e := newEnv(t, newPod(Running))
		var patchErr error
		opts := podOptions(e.writer, handlerMap{
			Running: func(ctx context.Context, s *phase.Step[*corev1.Pod, Phase]) (phase.Decision, error) {
				patchErr = s.Patch(ctx, nil)
				return phase.RequeueAfter(time.Second), nil
			},
		})
		if _, err := mustNew(t, opts).Reconcile(t.Context(), e.live(t)); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(patchErr, phase.ErrNilMutate) {
			t.Errorf("Patch(nil) = %v, want ErrNilMutate", patchErr)
		}
	})
}

func TestWriteErrors(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "item", errors.New("the object has been modified"))
	tests := []struct {
		name   string
		writer writerFunc
		check  func(t *testing.T, err error)
	}{
		{
			name: "conflict",
			writer: func(context.Context, *corev1.Pod, func(*corev1.Pod) error) (*corev1.Pod, error) {
				return nil, fmt.Errorf("patch status: %w", conflict)
			},
			check: func(t *testing.T, err error) {
				if !apierrors.IsConflict(err) {
					t.Errorf("apierrors.IsConflict(%v) = false", err)
				}
			},
		},
		{
			name: "phase not in the answer",
			writer: func(_ context.Context, obj *corev1.Pod, _ func(*corev1.Pod) error) (*corev1.Pod, error) {
				return obj.DeepCopy(), nil // as if Set wrote a field the server drops
			},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, phase.ErrPhaseNotWritten) {
					t.Errorf("errors.Is(%v, ErrPhaseNotWritten) = false", err)
				}
			},
		},
		{
			name: "no object in the answer",
			writer: func(context.Context, *corev1.Pod, func(*corev1.Pod) error) (*corev1.Pod, error) {
				return nil, nil
			},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, phase.ErrPhaseNotWritten) {
					t.Errorf("errors.Is(%v, ErrPhaseNotWritten) = false", err)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var deletingRan bool
			opts := podOptions(tt.writer, handlerMap{
				Failed: decide(phase.Transition(Deleting), nil),
				Deleting: func(context.Context, *phase.Step[*corev1.Pod, Phase]) (phase.Decision, error) {
					deletingRan = true
					return phase.RequeueAfter(time.Second), nil
				},
			})
			opts.Name = "write-errors"
			opts.Transitions = map[Phase][]Phase{Failed: {Deleting}}
			res, err := mustNew(t, opts).Reconcile(t.Context(), newPod(Failed))
			var we *phase.WriteError
			if !errors.As(err, &we) || we.From != "Failed" || we.To != "Deleting" || we.Object != "default/item" {
				t.Fatalf("error = %v, want a *WriteError Failed -> Deleting of default/item", err)
			}
			if !res.IsZero() || deletingRan {
				t.Errorf("result %+v, Deleting ran %v; want an empty result and no Deleting handler", res, deletingRan)
			}
			tt.check(t, err)
		})
	}
}

func TestNilObject(t *testing.T) {
	e := newEnv(t, newPod(Running))
	m := mustNew(t, podOptions(e.writer, handlerMap{Running: decide(phase.Done(), nil)}))
	if _, err := m.Reconcile(t.Context(), nil); !errors.Is(err, phase.ErrNilObject) {
		t.Errorf("Reconcile(nil) = %v, want ErrNilObject", err)
	}

	var zero phase.Machine[*corev1.Pod, Phase]
	if _, err := zero.Reconcile(t.Context(), newPod(Running)); err == nil {
		t.Errorf("zero Machine: Reconcile returned no error")
	}
}

func TestTransitionLogged(t *testing.T) {
	e := newEnv(t, newPod(Failed))
	var (
		mu    sync.Mutex
		lines []string
	)
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{})
	ctx := log.IntoContext(t.Context(), logger)

	opts := podOptions(e.writer, handlerMap{
		Failed:   decide(phase.Transition(Deleting), nil),
		Deleting: decide(phase.WaitForEvent("uninstall job finishes"), nil),
	})
	opts.Name = "logged"
	opts.Transitions = map[Phase][]Phase{Failed: {Deleting}}
	if _, err := mustNew(t, opts).Reconcile(ctx, e.live(t)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, l := range lines {
		if strings.Contains(l, `"msg"="phase transition"`) &&
			strings.Contains(l, `"machine"="logged"`) &&
			strings.Contains(l, `"from"="Failed"`) && strings.Contains(l, `"to"="Deleting"`) {
			return
		}
	}
	t.Errorf("no transition log line with machine, from and to in %q", lines)
}
