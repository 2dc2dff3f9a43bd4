package phase_test

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/racesafe/racesafe/phase"
	"github.com/racesafe/racesafe/statusupdate"
)

func TestNewRejectsBadOptions(t *testing.T) {
	ok := decide(phase.Done(), nil)
	unused := writerFunc(func(context.Context, *corev1.Pod, func(*corev1.Pod) error) (*corev1.Pod, error) {
		return nil, errors.New("not called")
	})
	valid := func() phase.Options[*corev1.Pod, Phase] {
		o := podOptions(unused, handlerMap{Failed: ok, Deleting: ok})
		o.Transitions = map[Phase][]Phase{Failed: {Deleting}, Deleting: {Deleted}}
		o.Terminal = []Phase{Deleted}
		return o
	}
	if _, err := phase.New(valid()); err != nil {
		t.Fatalf("valid options rejected: %v", err)
	}

	tests := []struct {
		name   string
		modify func(*phase.Options[*corev1.Pod, Phase])
		fields []string
	}{
		{"no name", func(o *phase.Options[*corev1.Pod, Phase]) { o.Name = "" }, []string{"Name"}},
		{"nil Get", func(o *phase.Options[*corev1.Pod, Phase]) { o.Get = nil }, []string{"Get"}},
		{"nil Set", func(o *phase.Options[*corev1.Pod, Phase]) { o.Set = nil }, []string{"Set"}},
		{"nil Writer", func(o *phase.Options[*corev1.Pod, Phase]) { o.Writer = nil }, []string{"Writer"}},
		{"typed nil Writer", func(o *phase.Options[*corev1.Pod, Phase]) {
			o.Writer = (*statusupdate.Patcher[*corev1.Pod])(nil)
		}, []string{"Writer"}},
		{"no handlers", func(o *phase.Options[*corev1.Pod, Phase]) {
			o.Handlers = nil
			o.Transitions = nil
		}, []string{"Handlers"}},
		{"nil handler", func(o *phase.Options[*corev1.Pod, Phase]) { o.Handlers[Deleting] = nil },
			[]string{`Handlers["Deleting"]`}},
		{"transition from a phase without handler", func(o *phase.Options[*corev1.Pod, Phase]) {
			o.Transitions[Running] = []Phase{Deleting}
		}, []string{`Transitions["Running"]`}},
		{"transition to a phase without handler", func(o *phase.Options[*corev1.Pod, Phase]) {
			o.Transitions[Failed] = []Phase{Deleting, Pending}
		}, []string{`Transitions["Failed"]`}},
		{"transition to itself", func(o *phase.Options[*corev1.Pod, Phase]) {
			o.Transitions[Failed] = []Phase{Deleting, Failed}
		}, []string{`Transitions["Failed"]`}},
		{"negative MaxSteps", func(o *phase.Options[*corev1.Pod, Phase]) { o.MaxSteps = -1 }, []string{"MaxSteps"}},
		{"several at once", func(o *phase.Options[*corev1.Pod, Phase]) {
			o.Get, o.Set = nil, nil
		}, []string{"Get", "Set"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := valid()
			tt.modify(&o)
			m, err := phase.New(o)
			if m != nil || !errors.Is(err, phase.ErrInvalidOptions) {
				t.Fatalf("New = %v, %v; want nil and ErrInvalidOptions", m, err)
			}
			var got []string
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var oe *phase.OptionsError
				if !errors.As(e, &oe) {
					t.Fatalf("joined error %v is not an *OptionsError", e)
				}
				got = append(got, oe.Field)
			}
			if len(got) != len(tt.fields) {
				t.Fatalf("fields %q, want %q", got, tt.fields)
			}
			for i := range got {
				if got[i] != tt.fields[i] {
					t.Errorf("fields %q, want %q", got, tt.fields)
				}
			}
		})
	}
}

func TestNewCopiesOptions(t *testing.T) {
	e := newEnv(t, newPod(Failed))
	opts := podOptions(e.writer, handlerMap{
		Failed:   decide(phase.Transition(Deleting), nil),
		Deleting: decide(phase.WaitForEvent("job"), nil),
	})
	opts.Transitions = map[Phase][]Phase{Failed: {Deleting}}
	m := mustNew(t, opts)
	delete(opts.Handlers, Deleting)
	opts.Transitions[Failed] = nil
	if res, err := m.Reconcile(t.Context(), e.live(t)); err != nil || !res.IsZero() {
		t.Errorf("Reconcile after changing opts = %+v, %v; want the named wait of Deleting", res, err)
	}
}
