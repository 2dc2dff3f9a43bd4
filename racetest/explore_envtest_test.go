package racetest_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/racesafe/racesafe/internal/testenv"
	"github.com/racesafe/racesafe/racetest"
)

// mirror copies the "v" of a ConfigMap named owner into a Secret named
// owner-copy. What it observed is kept in a mirrorLog the test reads, across
// the managers of a run.
//
//   - welcome: an edge-triggered side effect, counted when it observes the
//     owner at v=1 (a welcome message sent on creation). It needs the
//     create's version delivered: unobserved state takes it away.
//   - monotonic: it believes its view never goes back, and panics when the
//     owner's resourceVersion is older than one it read before: time travel
//     breaks that belief.
//   - careful: it remembers the resourceVersion each write of the copy was
//     answered with and requeues while its cache is older; without it, a
//     stale read of the copy is written back with the stale version as its
//     precondition.
type mirror struct {
	client.Client
	mirrorKind
	log *mirrorLog

	mu       sync.Mutex
	seen     map[types.UID]string // owner -> newest resourceVersion read
	answered map[types.UID]string // copy -> resourceVersion answered
}

// ack: after each attempt to update the copy, answered or not, an external
// system is told (a side effect counted per namespace): a line a crashed
// process never runs.
//
// stepwise: the workload waits for the copy at v=1 before it sets v=2, so
// the copy is created at v=1 and updated three times in every unperturbed
// run. Without it the first reconcile may already read v=2 (the create and
// the patch in one window), and the reference's ack count depends on that
// timing.
type mirrorKind struct{ welcome, monotonic, careful, ack, stepwise bool }

type mirrorLog struct {
	mu        sync.Mutex
	welcomes  map[string]int
	acks      map[string]int
	delivered map[string][]string // namespace -> owner versions the predicate saw
	reads     map[string][]string // namespace -> owner versions reconciles read
}

func newMirrorLog() *mirrorLog {
	return &mirrorLog{welcomes: map[string]int{}, acks: map[string]int{}, delivered: map[string][]string{}, reads: map[string][]string{}}
}

func (l *mirrorLog) deliver(o client.Object) {
	cm, ok := o.(*corev1.ConfigMap)
	if !ok || cm.Name != "owner" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.delivered[cm.Namespace] = append(l.delivered[cm.Namespace], cm.ResourceVersion)
}

func (l *mirrorLog) sideEffects(ns string) map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return map[string]int{"welcomes sent": l.welcomes[ns], "updates reported": l.acks[ns]}
}

func olderRV(a, b string) bool {
	c, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && c < 0
}

func (m *mirror) setup(mgr manager.Manager) error {
	m.Client = mgr.GetClient()
	m.seen, m.answered = map[types.UID]string{}, map[types.UID]string{}
	welcome := func(o client.Object) {
		if cm, ok := o.(*corev1.ConfigMap); ok && m.welcome && cm.Name == "owner" && cm.Data["v"] == "1" {
			m.log.mu.Lock()
			m.log.welcomes[cm.Namespace]++
			m.log.mu.Unlock()
		}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("mirror").
		For(&corev1.ConfigMap{}, builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(e event.CreateEvent) bool {
				m.log.deliver(e.Object)
				welcome(e.Object)
				return true
			},
			UpdateFunc: func(e event.UpdateEvent) bool {
				m.log.deliver(e.ObjectNew)
				if old, ok := e.ObjectOld.(*corev1.ConfigMap); !ok || old.Data["v"] != "1" {
					welcome(e.ObjectNew)
				}
				return true
			},
		})).
		Owns(&corev1.Secret{}).
		Complete(m)
}

func (m *mirror) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if req.Name != "owner" {
		return ctrl.Result{}, nil
	}
	owner := &corev1.ConfigMap{}
	if err := m.Get(ctx, req.NamespacedName, owner); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	m.log.mu.Lock()
	m.log.reads[req.Namespace] = append(m.log.reads[req.Namespace], owner.ResourceVersion)
	m.log.mu.Unlock()
	m.mu.Lock()
	prev := m.seen[owner.UID]
	if prev == "" || olderRV(prev, owner.ResourceVersion) {
		m.seen[owner.UID] = owner.ResourceVersion
	}
	m.mu.Unlock()
	if m.monotonic && prev != "" && olderRV(owner.ResourceVersion, prev) {
		panic(fmt.Sprintf("owner went back from resourceVersion %s to %s", prev, owner.ResourceVersion))
	}
	cp := &corev1.Secret{}
	key := client.ObjectKey{Namespace: req.Namespace, Name: "owner-copy"}
	if err := m.Get(ctx, key, cp); apierrors.IsNotFound(err) {
		cp = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: "owner-copy"}, Data: map[string][]byte{"v": []byte(owner.Data["v"])}}
		if err := ctrl.SetControllerReference(owner, cp, m.Scheme()); err != nil {
			return ctrl.Result{}, err
		}
		if err := m.Create(ctx, cp); err != nil {
			return ctrl.Result{}, client.IgnoreAlreadyExists(err)
		}
		m.remember(cp)
		return ctrl.Result{}, nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	if m.careful {
		m.mu.Lock()
		known := m.answered[cp.UID]
		m.mu.Unlock()
		if known != "" && olderRV(cp.ResourceVersion, known) {
			return ctrl.Result{RequeueAfter: 20 * time.Millisecond}, nil
		}
	}
	if string(cp.Data["v"]) == owner.Data["v"] {
		return ctrl.Result{}, nil
	}
	cp.Data = map[string][]byte{"v": []byte(owner.Data["v"])}
	err := m.Update(ctx, cp)
	if m.ack {
		// Every attempt is reported, answered or not.
		m.log.mu.Lock()
		m.log.acks[req.Namespace]++
		m.log.mu.Unlock()
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	m.remember(cp)
	return ctrl.Result{}, nil
}

func (m *mirror) remember(cp *corev1.Secret) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.answered[cp.UID] = cp.ResourceVersion
}

// mirrorWorkload creates the owner at v=1 and sets v=2 right away (no
// reconcile in between is needed; stepwise waits for the copy at v=1
// first), waits for the copy to follow, then sets v=3 and v=4 the same way.
func mirrorWorkload(stepwise bool) func(ctx context.Context, c client.Client, ns string) error {
	return func(ctx context.Context, c client.Client, ns string) error {
		owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"}, Data: map[string]string{"v": "1"}}
		if err := c.Create(ctx, owner); err != nil {
			return err
		}
		if stepwise {
			if err := waitCopied(ctx, c, ns, "1"); err != nil {
				return err
			}
		}
		for _, v := range []string{"2", "3", "4"} {
			before := owner.DeepCopy()
			owner.Data = map[string]string{"v": v}
			if err := c.Patch(ctx, owner, client.MergeFrom(before)); err != nil {
				return err
			}
			if err := waitCopied(ctx, c, ns, v); err != nil {
				return err
			}
		}
		return nil
	}
}

func waitCopied(ctx context.Context, c client.Reader, ns, v string) error {
	if err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		return copied(ctx, c, ns, v)
	}); err != nil {
		return fmt.Errorf("copy never reached v=%s: %w", v, err)
	}
	return nil
}

func copied(ctx context.Context, c client.Reader, ns, v string) (bool, error) {
	var cp corev1.Secret
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "owner-copy"}, &cp)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil && string(cp.Data["v"]) == v, err
}

func exploreMirror(t *testing.T, env *testenv.Env, kind mirrorKind, plan string) racetest.PlanResult {
	t.Helper()
	log := newMirrorLog()
	report, err := racetest.Explore(t.Context(), env.Config, racetest.ExploreOptions{
		Scheme: clientgoscheme.Scheme,
		Setup: func(mgr manager.Manager) error {
			return (&mirror{mirrorKind: kind, log: log}).setup(mgr)
		},
		Workload: mirrorWorkload(kind.stepwise),
		Settled: func(ctx context.Context, c client.Reader, ns string) (bool, error) {
			return copied(ctx, c, ns, "4")
		},
		Kinds:       []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}},
		SideEffects: log.sideEffects,
		Plans:       []string{plan},
		TestName:    t.Name(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", report)
	if len(report.Plans) != 1 {
		t.Fatalf("plan %s was not derived from the reference; the plans: %s", plan, report)
	}
	p := report.Plans[0]
	if p.Perturbation == "" || p.Known == "" {
		t.Fatalf("plan %s did not perturb the view: %+v", plan, p)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	t.Logf("side effects %v, the controller saw the owner delivered at %v and read it at %v", log.welcomes, log.delivered, log.reads)
	checkPerturbation(t, p, log.delivered[p.Namespace], log.reads[p.Namespace])
	return p
}

// checkPerturbation proves from what the controller itself observed that
// the plan happened.
func checkPerturbation(t *testing.T, p racetest.PlanResult, delivered, reads []string) {
	t.Helper()
	switch p.Plan.Kind {
	case racetest.UnobservedState:
		// The create's version never reached the controller, and a later
		// one did.
		if slices.Contains(delivered, p.Known) {
			t.Errorf("the withheld version %s was delivered: %v", p.Known, delivered)
		}
		if p.Served == "" || !slices.Contains(delivered, p.Served) || !olderRV(p.Known, p.Served) {
			t.Errorf("after the relist the controller saw %v, want %q, newer than %s", delivered, p.Served, p.Known)
		}
	case racetest.TimeTravel:
		// A reconcile read the newer version, then the older snapshot.
		i := slices.IndexFunc(reads, func(rv string) bool { return !olderRV(rv, p.Known) })
		if i < 0 || !slices.Contains(reads[i:], p.Served) || !olderRV(p.Served, p.Known) {
			t.Errorf("the controller read %v, want %s after %s", reads, p.Served, p.Known)
		}
	}
}

func failedOn(p racetest.PlanResult, oracle string) bool {
	return slices.ContainsFunc(p.Failures, func(f string) bool { return strings.HasPrefix(f, oracle+":") })
}

func TestExploreEnvtest(t *testing.T) {
	if testing.Short() {
		t.Skip("explores on envtest")
	}
	env := testenv.Start(t, testenv.Options{})
	t.Run("UnobservedStateBreaksAnEdgeTriggeredController", func(t *testing.T) {
		t.Parallel()
		p := exploreMirror(t, env, mirrorKind{welcome: true}, "unobserved-state/ConfigMap/workload-create#1")
		if !failedOn(p, "side effect") {
			t.Errorf("the welcome, sent on observing v=1, was not missed: %v", p.Failures)
		}
	})
	t.Run("UnobservedStateLevelTriggeredPasses", func(t *testing.T) {
		t.Parallel()
		p := exploreMirror(t, env, mirrorKind{careful: true}, "unobserved-state/ConfigMap/workload-create#1")
		if p.Failed() {
			t.Errorf("a level-triggered controller failed: %v", p.Failures)
		}
	})
	t.Run("TimeTravelPanicsAControllerThatBelievesItsViewMonotonic", func(t *testing.T) {
		t.Parallel()
		p := exploreMirror(t, env, mirrorKind{monotonic: true, careful: true}, "time-travel/ConfigMap/workload-patch#1")
		i := slices.IndexFunc(p.Failures, func(f string) bool { return strings.HasPrefix(f, "panic: ") })
		if i < 0 {
			t.Fatalf("no panic reported: %v", p.Failures)
		}
		want := regexp.MustCompile(`^panic: reconcile #\d+ of ` + regexp.QuoteMeta(p.Namespace) + `/owner \(controller mirror\) panicked: owner went back from resourceVersion \d+ to \d+`)
		if f := p.Failures[i]; !want.MatchString(f) {
			t.Errorf("the panic does not name its reconcile: %s", f)
		}
	})
	t.Run("TimeTravelCarefulControllerPasses", func(t *testing.T) {
		t.Parallel()
		p := exploreMirror(t, env, mirrorKind{careful: true}, "time-travel/ConfigMap/workload-patch#1")
		if p.Failed() {
			t.Errorf("a controller that copies the present failed: %v", p.Failures)
		}
	})
	t.Run("CrashRunsNothingAfterTheWrite", func(t *testing.T) {
		t.Parallel()
		// The crashed manager's reconcile never reports the update it
		// made, and the next manager finds the copy up to date: one
		// report fewer than the reference.
		p := exploreMirror(t, env, mirrorKind{careful: true, ack: true, stepwise: true}, "crash-after-write/Secret/update#1")
		want := regexp.MustCompile(`^side effect: updates reported counted (\d+), the reference (\d+)$`)
		i := slices.IndexFunc(p.Failures, want.MatchString)
		if i < 0 {
			t.Fatalf("the line after the crashed write ran: %v", p.Failures)
		}
		m := want.FindStringSubmatch(p.Failures[i])
		if got, ref := m[1], m[2]; ref != "3" || got != "2" {
			// Stepwise, the reference creates the copy at v=1 and
			// updates it to 2, 3 and 4.
			t.Errorf("reported %s, the reference %s; want 2, one fewer than the reference's 3", got, ref)
		}
	})
	t.Run("StaleReadIsWrittenBackWithAStalePrecondition", func(t *testing.T) {
		t.Parallel()
		p := exploreMirror(t, env, mirrorKind{}, "stale-read-after-write/Secret/update#1")
		if !failedOn(p, "stale write") {
			t.Errorf("the copy written back from a stale read is not a stale write: %v", p.Failures)
		}
	})
	t.Run("StaleReadCarefulControllerPasses", func(t *testing.T) {
		t.Parallel()
		p := exploreMirror(t, env, mirrorKind{careful: true}, "stale-read-after-write/Secret/update#1")
		if p.Failed() {
			t.Errorf("a controller that waits for its own writes failed: %v", p.Failures)
		}
	})
}

// relabel is the incident in a few lines: it moves a ConfigMap's phase
// from "" to "a" and, in the same reconcile, reads the object back from its
// cache into the same pointer before moving it on to "b"; a cache behind
// its own write shows phase "" and the reconcile ends silently, and its
// predicate drops the updates that would bring it back.
type relabel struct {
	client.Client
	mu    sync.Mutex
	stale map[string]int // namespace -> reads back that missed the write
}

func (r *relabel) setup(mgr manager.Manager) error {
	r.Client = mgr.GetClient()
	return ctrl.NewControllerManagedBy(mgr).
		Named("relabel").
		For(&corev1.ConfigMap{}, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(event.UpdateEvent) bool { return false },
		})).
		Complete(r)
}

func (r *relabel) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cm := &corev1.ConfigMap{}
	if err := r.Get(ctx, req.NamespacedName, cm); err != nil || cm.Data["phase"] != "" {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if err := r.setPhase(ctx, cm, "a"); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.Get(ctx, req.NamespacedName, cm); err != nil {
		return ctrl.Result{}, err
	}
	if cm.Data["phase"] != "a" {
		r.mu.Lock()
		r.stale[req.Namespace]++
		r.mu.Unlock()
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.setPhase(ctx, cm, "b")
}

func (r *relabel) setPhase(ctx context.Context, cm *corev1.ConfigMap, phase string) error {
	before := cm.DeepCopy()
	cm.Data = map[string]string{"phase": phase}
	return r.Patch(ctx, cm, client.MergeFrom(before))
}

// TestExploreReferenceIsFresh: the reference runs read a cache that has
// caught up with the controller's own writes, so a controller that reads
// right after its own write (and, under load, loses that race in most
// runs) never reads stale in them and gets a reference; the race is the
// finding of the plan that makes the read stale, not an error.
func TestExploreReferenceIsFresh(t *testing.T) {
	if testing.Short() {
		t.Skip("explores on envtest")
	}
	env := testenv.Start(t, testenv.Options{})
	plan := "stale-read-after-write/ConfigMap/patch#1"
	rl := &relabel{stale: map[string]int{}}
	report, err := racetest.Explore(t.Context(), env.Config, racetest.ExploreOptions{
		Scheme: clientgoscheme.Scheme,
		Setup:  rl.setup,
		Workload: func(ctx context.Context, c client.Client, ns string) error {
			return c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "item"}})
		},
		Settled: func(ctx context.Context, c client.Reader, ns string) (bool, error) {
			var cm corev1.ConfigMap
			err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "item"}, &cm)
			return err == nil && cm.Data["phase"] == "b", client.IgnoreNotFound(err)
		},
		Kinds:       []client.Object{&corev1.ConfigMap{}},
		Plans:       []string{plan},
		PlanTimeout: 5 * time.Second,
		TestName:    t.Name(),
	})
	if err != nil {
		t.Fatalf("no reference for a controller that reads right after its own write: %v", err)
	}
	t.Logf("%s", report)
	if len(report.Plans) != 1 {
		t.Fatalf("plan %s was not derived from the reference; the plans: %s", plan, report)
	}
	p := report.Plans[0]
	if p.Perturbation == "" || !failedOn(p, "liveness") {
		t.Errorf("the stale read after the write is not found stuck: perturbation %q, failures %v", p.Perturbation, p.Failures)
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	for ns, n := range rl.stale {
		if ns != p.Namespace {
			t.Errorf("a reference run (namespace %s) read its own write back stale %d times", ns, n)
		}
	}
	if rl.stale[p.Namespace] == 0 {
		t.Errorf("the plan's run (namespace %s) never read its write back stale: %v", p.Namespace, rl.stale)
	}
}
