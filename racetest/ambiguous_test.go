package racetest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/racesafe/racesafe/expectations"
	"github.com/racesafe/racesafe/internal/metricstest"
	"github.com/racesafe/racesafe/internal/testenv"
	"github.com/racesafe/racesafe/phase"
	"github.com/racesafe/racesafe/racetest"
	"github.com/racesafe/racesafe/statusupdate"
)

// faultyClient writes through cfg with faults' faults in every write.
func faultyClient(t *testing.T, cfg *rest.Config, faults *racetest.Faults) client.Client {
	t.Helper()
	base, err := client.NewWithWatch(cfg, client.Options{HTTPClient: httpClient(t, cfg)})
	if err != nil {
		t.Fatal(err)
	}
	return interceptor.NewClient(base, faults.Funcs())
}

// testAppliedFaultsReachTheServer proves the fault on a real API server:
// the client gets the error, a live read shows the write.
func testAppliedFaultsReachTheServer(t *testing.T, cfg *rest.Config) {
	for _, tc := range []struct {
		name  string
		fault racetest.Fault
		opts  racetest.FaultOptions
		is    func(error) bool
	}{
		{"AppliedServerError", racetest.FaultAppliedServerError, racetest.FaultOptions{AppliedServerError: 1}, apierrors.IsInternalError},
		{"AppliedTimeout", racetest.FaultAppliedTimeout, racetest.FaultOptions{AppliedTimeout: 1}, func(err error) bool {
			return errors.Is(err, context.DeadlineExceeded)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			direct := directClient(t, cfg)
			cm := createConfigMap(t, direct)
			faults, err := racetest.NewFaults(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			c := faultyClient(t, cfg, faults)

			sent := cm.DeepCopy()
			sent.Data["step"] = "2"
			callers := sent.DeepCopy()
			if err := c.Update(t.Context(), callers); !tc.is(err) {
				t.Fatalf("Update = %v, want the %s error", err, tc.fault)
			}
			if callers.ResourceVersion != cm.ResourceVersion || callers.Data["step"] != "2" {
				t.Errorf("the caller's object holds step %q at resourceVersion %s, want it as sent: %q at %s",
					callers.Data["step"], callers.ResourceVersion, "2", cm.ResourceVersion)
			}
			var live corev1.ConfigMap
			if err := direct.Get(t.Context(), client.ObjectKeyFromObject(cm), &live); err != nil {
				t.Fatal(err)
			}
			if live.Data["step"] != "2" || live.ResourceVersion == cm.ResourceVersion {
				t.Errorf("server has step %q at resourceVersion %s, want the update applied past %s",
					live.Data["step"], live.ResourceVersion, cm.ResourceVersion)
			}
			if got := faults.Injected().Of(tc.fault); got != 1 {
				t.Errorf("Injected().Of(%s) = %d, want 1", tc.fault, got)
			}
		})
	}
}

type stage string

const (
	queued     stage = "Queued"
	scheduled  stage = "Scheduled"
	running    stage = "Running"
	finishing  stage = "Finishing"
	cleaningUp stage = "CleaningUp"
	finished   stage = "Finished"
)

// flow is the machine's path; each transition also counts itself into
// status.transitions, so a transition the server applied twice would show.
var flow = []stage{queued, scheduled, running, finishing, cleaningUp, finished}

type edge struct{ from, to stage }

// testPrimitivesConvergeUnderAppliedFaults drives an Item along flow with a
// statusupdate.Patcher (recording into an expectations.Tracker) and a
// phase.Machine while most status patches are applied and then fail. The
// driver is the worst case of a controller: after an ambiguous error it
// reconciles the same stale object again, as if its cache had not seen the
// write; after a *phase.PhaseMovedError it reads through an
// expectations.Reader over a lagging cache, as a requeued reconcile would.
func testPrimitivesConvergeUnderAppliedFaults(t *testing.T, cfg *rest.Config) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			convergeUnderAppliedFaults(t, cfg, seed)
		})
	}
}

func convergeUnderAppliedFaults(t *testing.T, cfg *rest.Config, seed uint64) {
	name := itemName(t)
	faults, err := racetest.NewFaults(racetest.FaultOptions{
		Seed: seed, AppliedServerError: 0.35, AppliedTimeout: 0.35,
		Operations: []racetest.Operation{racetest.OpStatusPatch},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("faults seed %d", seed)
	counted, counter := racetest.CountRequests(cfg)
	c := faultyClient(t, counted, faults)
	direct := directClient(t, cfg)

	lagging, err := racetest.LaggedCache(racetest.LagOptions{Delay: 100 * time.Millisecond})(cfg, cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunCache(t.Context(), t, lagging)
	tracker := expectations.New(expectations.Options{Name: name})
	reader := expectations.NewReader(lagging, tracker)

	in := newItem(name)
	if err := direct.Create(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	// Every status change the server makes, in order, from a watch that
	// starts at the create.
	events := watchPhases(t, cfg, in)
	setup := in.DeepCopy()
	_ = unstructured.SetNestedField(setup.Object, string(queued), "status", "phase")
	if err := direct.Status().Update(t.Context(), setup); err != nil {
		t.Fatal(err)
	}

	machine := fmt.Sprintf("racetest-%s", name)
	handlers := map[stage]phase.Handler[item, stage]{}
	transitions := map[stage][]stage{}
	acked := map[edge]func() float64{}
	ran := map[stage]int{}
	for i, from := range flow[:len(flow)-1] {
		to := flow[i+1]
		transitions[from] = []stage{to}
		handlers[from] = func(context.Context, *phase.Step[item, stage]) (phase.Decision, error) {
			ran[from]++
			return phase.TransitionWith(to, func(u item) error {
				return unstructured.SetNestedField(u.Object, int64At(u, "status", "transitions")+1, "status", "transitions")
			}), nil
		}
		acked[edge{from, to}] = counterDelta(t, "racesafe_phase_transitions_total",
			map[string]string{"controller": machine, "from": string(from), "to": string(to)})
	}
	m, err := phase.New(phase.Options[item, stage]{
		Name: machine,
		Get:  func(u item) stage { return stage(stringAt(u, "status", "phase")) },
		Set:  func(u item, s stage) { _ = unstructured.SetNestedField(u.Object, string(s), "status", "phase") },
		Writer: statusupdate.New[item](c, direct, statusupdate.Options{
			Expectations: tracker,
			Backoff:      wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 5},
		}),
		Handlers:    handlers,
		Transitions: transitions,
		Terminal:    []stage{finished},
		Interval:    func() time.Duration { return time.Second },
	})
	if err != nil {
		t.Fatal(err)
	}

	counter.Reset()
	obj := readFresh(t, reader, in)
	ambiguous := map[edge]int{}
	moved := 0
	for reconciles := 1; ; reconciles++ {
		if reconciles > 40 {
			t.Fatalf("no convergence after %d reconciles; server at %q", reconciles, stringAt(live(t, direct, in), "status", "phase"))
		}
		_, err := m.Reconcile(t.Context(), obj)
		var writeErr *phase.WriteError
		var movedErr *phase.PhaseMovedError
		switch {
		case err == nil:
		case errors.As(err, &writeErr) && (apierrors.IsInternalError(err) || errors.Is(err, context.DeadlineExceeded)):
			// Applied or not, the machine cannot tell; reconcile the
			// same object again, as a controller whose cache lags would.
			ambiguous[edge{stage(writeErr.From), stage(writeErr.To)}]++
			continue
		case errors.As(err, &movedErr):
			if !errors.Is(err, expectations.ErrStale) {
				t.Errorf("%v: not errors.Is expectations.ErrStale", err)
			}
			moved++
			obj = readFresh(t, reader, in)
			continue
		default:
			t.Fatalf("reconcile %d: %v", reconciles, err)
		}
		obj = readFresh(t, reader, in)
		if got := stage(stringAt(obj, "status", "phase")); got != finished {
			t.Fatalf("Reconcile returned nil in phase %q", got)
		}
		t.Logf("finished after %d reconciles: %d ambiguous writes, %d moved", reconciles, faults.Injected().Total(), moved)
		break
	}

	final := live(t, direct, in)
	if n := int64At(final, "status", "transitions"); n != int64(len(flow)-1) {
		t.Errorf("status.transitions = %d, want %d: each transition applied once", n, len(flow)-1)
	}
	var want []string
	for i, s := range flow {
		want = append(want, fmt.Sprintf("%s/%d", s, i))
	}
	if got := events(final.GetResourceVersion()); !slices.Equal(got, want) {
		t.Errorf("the server's status went %v, want %v", got, want)
	}
	injected := faults.Injected()
	total := injected.Of(racetest.FaultAppliedServerError) + injected.Of(racetest.FaultAppliedTimeout)
	if total == 0 || total != injected.Total() {
		t.Fatalf("Injected() = %v: want applied faults, and only those", injected.Injected)
	}
	sum := 0
	for e, delta := range acked {
		n := int(delta())
		sum += ambiguous[e]
		if n+ambiguous[e] != 1 {
			t.Errorf("%s -> %s: %d acknowledged, %d ambiguous; want exactly one of them", e.from, e.to, n, ambiguous[e])
		}
	}
	if sum != total {
		t.Errorf("the machine saw %d ambiguous write errors, %d faults were injected", sum, total)
	}
	// What the primitives do not promise: a handler runs again on every
	// retry of a stale object, since nothing tells the retry that the write
	// happened until the transition's CAS refuses it. A side effect in a
	// handler must be idempotent.
	runs := 0
	for _, n := range ran {
		runs += n
	}
	if runs != len(flow)-1+moved {
		t.Errorf("handlers ran %d times (%v), want once a transition and once more for each of the %d refused retries", runs, ran, moved)
	}
	// Every retry of a stale object after an ambiguous write met the write:
	// its precondition conflicted, the live re-read showed the phase moved.
	if moved != sum {
		t.Errorf("%d ambiguous writes were retried, %d of the retries ended in a *PhaseMovedError; want all", sum, moved)
	}
	// One patch per transition, and one per stale retry, which conflicts
	// and moves nothing.
	if got, want := counter.Count("patch", "items/status"), len(flow)-1+moved; got != want {
		t.Errorf("%d status patches reached the server, want %d transitions + %d conflicting retries", got, len(flow)-1, moved)
	}
	if n := tracker.Pending(); n != 0 {
		t.Errorf("tracker.Pending() = %d after the last read, want 0", n)
	}
}

func live(t *testing.T, c client.Client, in item) item {
	t.Helper()
	u := newItem(in.GetName())
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(in), u); err != nil {
		t.Fatal(err)
	}
	return u
}

// readFresh reads in through the expectations Reader, waiting out
// expectations.ErrStale as a requeue would.
func readFresh(t *testing.T, r client.Reader, in item) item {
	t.Helper()
	u := newItem(in.GetName())
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := r.Get(ctx, client.ObjectKeyFromObject(in), u)
		if errors.Is(err, expectations.ErrStale) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("read %s through the expectations Reader: %v", in.GetName(), err)
	}
	return u
}

// watchPhases watches in from its creation and returns a function that
// waits for the event at resourceVersion last, stops the watch and returns
// the status the server stored at each modification, as phase/transitions.
func watchPhases(t *testing.T, cfg *rest.Config, in item) func(last string) []string {
	t.Helper()
	wc, err := client.NewWithWatch(cfg, client.Options{HTTPClient: httpClient(t, cfg)})
	if err != nil {
		t.Fatal(err)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(itemGVK.GroupVersion().WithKind("ItemList"))
	w, err := wc.Watch(t.Context(), list, &client.ListOptions{
		Namespace:     in.GetNamespace(),
		FieldSelector: fields.OneTermEqualSelector("metadata.name", in.GetName()),
		Raw:           &metav1.ListOptions{ResourceVersion: in.GetResourceVersion()},
	})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		seen []string
		rvs  []string
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok || ev.Type != watch.Modified {
				continue
			}
			mu.Lock()
			seen = append(seen, fmt.Sprintf("%s/%d", stringAt(u, "status", "phase"), int64At(u, "status", "transitions")))
			rvs = append(rvs, u.GetResourceVersion())
			mu.Unlock()
		}
	}()
	stop := func() { w.Stop(); <-done }
	t.Cleanup(stop)
	return func(last string) []string {
		t.Helper()
		err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			return slices.Contains(rvs, last), nil
		})
		if err != nil {
			t.Fatalf("the watch never delivered resourceVersion %s: %v", last, err)
		}
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

// counterDelta returns how much the counter grew since the call.
func counterDelta(t *testing.T, name string, labels map[string]string) func() float64 {
	t.Helper()
	before := metricstest.CounterValue(t, name, labels)
	return func() float64 { return metricstest.CounterValue(t, name, labels) - before }
}
