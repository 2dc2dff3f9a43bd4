package racetest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/racesafe/racesafe/expectations"
	"github.com/racesafe/racesafe/internal/testenv"
	"github.com/racesafe/racesafe/phase"
	"github.com/racesafe/racesafe/racetest"
	"github.com/racesafe/racesafe/requeue"
	"github.com/racesafe/racesafe/statusupdate"
)

// testControllerSurvivesAmbiguousWritesAndBrokenWatches runs a controller
// built the racesafe way (expectations.Reader over the manager's cache, a
// statusupdate.Patcher recording into the same tracker, a phase.Machine)
// over a burst of Items while its status patches are applied and reported
// failed or conflict, and its informer's watch lags, breaks and is answered
// 410. Every Item must reach the end of flow with each transition applied
// once, and the tracker must be left waiting for nothing.
func testControllerSurvivesAmbiguousWritesAndBrokenWatches(t *testing.T, cfg *rest.Config) {
	const items = 8
	name := itemName(t)
	onItems := func(_ racetest.Operation, obj client.Object) bool {
		return obj.GetObjectKind().GroupVersionKind().Kind == itemGVK.Kind
	}
	faults, err := racetest.NewFaults(racetest.FaultOptions{
		Seed: 11, AppliedServerError: 0.15, AppliedTimeout: 0.15, Conflict: 0.1,
		Operations: []racetest.Operation{racetest.OpStatusPatch}, Match: onItems,
	})
	if err != nil {
		t.Fatal(err)
	}
	watches, err := racetest.NewWatchFaults(racetest.WatchFaultOptions{
		Seed: 11, Break: 0.05, Gone: 0.5, Limit: 12,
		Match: func(r racetest.Request) bool { return r.Resource == "items" },
	})
	if err != nil {
		t.Fatal(err)
	}
	opts := testenv.ManagerOptions()
	opts.NewClient = faults.NewClient
	opts.NewCache = racetest.LaggedCache(racetest.LagOptions{Delay: 50 * time.Millisecond, WatchFaults: watches})
	mgr, err := manager.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { utilnet.CloseIdleConnectionsFor(mgr.GetHTTPClient().Transport) })

	tracker := expectations.New(expectations.Options{Name: name})
	reader := expectations.NewReader(mgr.GetCache(), tracker)
	handlers := map[stage]phase.Handler[item, stage]{}
	transitions := map[stage][]stage{}
	for i, from := range flow[:len(flow)-1] {
		to := flow[i+1]
		transitions[from] = []stage{to}
		handlers[from] = func(context.Context, *phase.Step[item, stage]) (phase.Decision, error) {
			return phase.TransitionWith(to, func(u item) error {
				return unstructured.SetNestedField(u.Object, int64At(u, "status", "transitions")+1, "status", "transitions")
			}), nil
		}
	}
	m, err := phase.New(phase.Options[item, stage]{
		Name:        "racetest-" + name,
		Get:         func(u item) stage { return stage(stringAt(u, "status", "phase")) },
		Set:         func(u item, s stage) { _ = unstructured.SetNestedField(u.Object, string(s), "status", "phase") },
		Writer:      statusupdate.New[item](mgr.GetClient(), mgr.GetAPIReader(), statusupdate.Options{Expectations: tracker}),
		Handlers:    handlers,
		Transitions: transitions,
		Terminal:    []stage{finished},
		Interval:    requeue.Fixed(time.Second),
	})
	if err != nil {
		t.Fatal(err)
	}
	reconciler := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		u := newItem(req.Name)
		u.SetNamespace(req.Namespace)
		if err := reader.Get(ctx, req.NamespacedName, u); err != nil {
			if apierrors.IsNotFound(err) {
				return reconcile.Result{}, nil
			}
			return requeue.OnStale(err, 20*time.Millisecond)
		}
		res, err := m.Reconcile(ctx, u)
		if errors.Is(err, expectations.ErrStale) {
			return requeue.OnStale(err, 20*time.Millisecond)
		}
		return res, err
	})
	if err := builder.ControllerManagedBy(mgr).Named(name).For(newItem("")).Complete(reconciler); err != nil {
		t.Fatal(err)
	}

	direct := directClient(t, cfg)
	for i := range items {
		u := newItem(fmt.Sprintf("%s-%d", name, i))
		if err := direct.Create(t.Context(), u); err != nil {
			t.Fatal(err)
		}
		_ = unstructured.SetNestedField(u.Object, string(queued), "status", "phase")
		if err := direct.Status().Update(t.Context(), u); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Run(t.Context(), t, mgr)

	poll(t, "every Item finished", func() bool {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(itemGVK.GroupVersion().WithKind("ItemList"))
		if err := direct.List(t.Context(), list); err != nil {
			t.Fatal(err)
		}
		return countFinished(list, name) == items
	})
	for i := range items {
		u := live(t, direct, newItem(fmt.Sprintf("%s-%d", name, i)))
		if n := int64At(u, "status", "transitions"); n != int64(len(flow)-1) {
			t.Errorf("%s: status.transitions = %d, want %d: each transition applied once", u.GetName(), n, len(flow)-1)
		}
	}
	poll(t, "the tracker waits for nothing", func() bool { return tracker.Pending() == 0 })

	injected, broken := faults.Injected(), watches.Counts()
	applied := injected.Of(racetest.FaultAppliedServerError) + injected.Of(racetest.FaultAppliedTimeout)
	if applied == 0 || broken.Broken["items"] == 0 {
		t.Errorf("faults not observed: %d applied, %d streams broken", applied, broken.Broken["items"])
	}
	t.Logf("%d applied faults, %d conflicts; %d streams broken, %d answered 410, %d lists, %d watches",
		applied, injected.Of(racetest.FaultConflict), broken.Broken["items"], broken.Gone["items"],
		broken.Lists["items"], broken.Watches["items"])
}

func countFinished(list *unstructured.UnstructuredList, prefix string) int {
	n := 0
	for _, u := range list.Items {
		if strings.HasPrefix(u.GetName(), prefix+"-") && stage(stringAt(&u, "status", "phase")) == finished {
			n++
		}
	}
	return n
}
