package scenario

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/racesafe/racesafe/examples/workitem/api/v1alpha1"
	"github.com/racesafe/racesafe/examples/workitem/settings"
	"github.com/racesafe/racesafe/examples/workitem/sim"
	"github.com/racesafe/racesafe/racetest"
)

var runs atomic.Int64

// cluster is one run's place on the API server: a namespace of its own and a
// client that is neither lagged nor faulted, through which the run creates
// and deletes its items and counts what the controller did. Neither it nor
// the run's managers have a client-side rate limit: client-go's default for
// QPS 0 (5 QPS, burst 10) would set the pace of every controller alike.
type cluster struct {
	cfg    *rest.Config // the API server's, without a rate limit
	scheme *runtime.Scheme
	direct client.WithWatch
	ns     string
	run    int64 // unique in the process: names of namespaces, controllers and Leases
	// children count every child created in the namespace, the last one
	// open (see restartAPIServer).
	children []*childWatch
}

// newCluster makes the run's namespace, named prefix-<time>-<run>; close
// releases what the run leaves in it.
func newCluster(ctx context.Context, cfg *rest.Config, prefix string) (*cluster, error) {
	c := &cluster{cfg: racetest.WithoutRateLimit(cfg), scheme: Scheme(), run: runs.Add(1)}
	var err error
	if c.direct, err = client.NewWithWatch(c.cfg, client.Options{Scheme: c.scheme}); err != nil {
		return nil, err
	}
	c.ns = fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e6, c.run)
	if err := c.direct.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.ns}}); err != nil {
		return nil, fmt.Errorf("create namespace: %w", err)
	}
	w, err := watchChildren(ctx, c.direct, c.ns)
	if err != nil {
		return nil, err
	}
	c.children = []*childWatch{w}
	return c, nil
}

// restartAPIServer restarts the API server with r. A watch cannot be
// resumed across the restart, as the new server's watch cache starts at its
// own first List: the children are counted by the open watch until just
// before it, and by a new one (after a List) once the server serves again.
// A child created and deleted again between the two is not seen.
func (c *cluster) restartAPIServer(ctx context.Context, r *racetest.APIServerRestarter) (racetest.APIServerRestart, error) {
	c.children[len(c.children)-1].stop()
	out, err := r.Restart(ctx)
	if err != nil {
		return out, err
	}
	w, err := watchChildren(ctx, c.direct, c.ns)
	if err != nil {
		return out, err
	}
	c.children = append(c.children, w)
	return out, nil
}

// close stops the children's watches and removes the finalizers a stuck
// run leaves behind, so a namespace never outlives the scenario holding
// objects. It runs whatever ctx says.
func (c *cluster) close(ctx context.Context) {
	for _, w := range c.children {
		w.stop()
	}
	ctx = context.WithoutCancel(ctx)
	var list v1.WorkItemList
	if err := c.direct.List(ctx, &list, client.InNamespace(c.ns)); err != nil {
		return
	}
	for i := range list.Items {
		it := &list.Items[i]
		if controllerutil.RemoveFinalizer(it, v1.Finalizer) {
			if err := c.direct.Update(ctx, it); err != nil && !apierrors.IsNotFound(err) {
				continue
			}
		}
		_ = c.direct.Delete(ctx, it)
	}
}

// orDefault sets *v to def where it is not above zero: the zero value,
// and a negative one, of an option take its default.
func orDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// newInstaller is the run's simulated installer: every install fails, so
// that the create flow ends in Failed, where the incident's deletes start.
func newInstaller(install, uninstall time.Duration) *sim.Installer {
	return sim.New(sim.Options{
		InstallDuration:   install,
		UninstallDuration: uninstall,
		FailInstall:       func(string) bool { return true },
	})
}

// newSettings is the controllers' configuration, with the requeue interval.
func newSettings(interval time.Duration) *settings.Manager {
	s := &settings.Manager{}
	s.Set(settings.Settings{SyncStatusCheckInterval: interval})
	return s
}

// item is the i-th WorkItem of the run; every other one is a dry run.
func (c *cluster) item(i int) *v1.WorkItem {
	return &v1.WorkItem{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("item-%04d", i), Namespace: c.ns},
		Spec:       v1.WorkItemSpec{Payload: fmt.Sprintf("payload-%d", i), DryRun: i%2 == 0},
	}
}

// setup creates opts.Items items, one every opts.CreateEvery (0: all at
// once), and waits until the controller's create flow has failed them all,
// within deadline of the first create. It returns how long that took.
func (c *cluster) setup(ctx context.Context, kind Kind, opts Options, deadline time.Duration) (time.Duration, error) {
	start := time.Now()
	pace := time.NewTicker(max(opts.CreateEvery, time.Nanosecond))
	defer pace.Stop()
	for i := range opts.Items {
		if i > 0 && opts.CreateEvery > 0 {
			select {
			case <-pace.C:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		item := c.item(i)
		if err := c.direct.Create(ctx, item); err != nil {
			return 0, fmt.Errorf("create %s: %w", item.Name, err)
		}
	}
	return c.awaitFailed(ctx, kind, opts, start, deadline)
}

// awaitFailed polls until every item is Failed with the finalizer, and says
// how far the create flow got when the deadline passes first.
func (c *cluster) awaitFailed(ctx context.Context, kind Kind, opts Options, start time.Time, deadline time.Duration) (time.Duration, error) {
	reached, lastAt := -1, time.Duration(0)
	lastPrint := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, deadline-time.Since(start), true,
		func(ctx context.Context) (bool, error) {
			var list v1.WorkItemList
			if err := c.direct.List(ctx, &list, client.InNamespace(c.ns)); err != nil {
				return false, nil // the deadline, not one failed List, ends the wait
			}
			failed := 0
			for _, it := range list.Items {
				if it.Status.Phase == v1.PhaseFailed && controllerutil.ContainsFinalizer(&it, v1.Finalizer) {
					failed++
				}
			}
			if failed > reached {
				reached, lastAt = failed, time.Since(start)
			}
			if opts.Progress != nil && time.Since(lastPrint) >= 5*time.Second {
				lastPrint = time.Now()
				fmt.Fprintf(opts.Progress, "  %-11s setup %4d/%d Failed after %s\n", kind, failed, opts.Items, time.Since(start).Round(100*time.Millisecond))
			}
			return failed == opts.Items, nil
		})
	if err != nil {
		return 0, &SetupError{Controller: kind, Items: opts.Items, Reached: max(reached, 0), LastReachedAt: lastAt, Deadline: deadline, Err: err}
	}
	return time.Since(start), nil
}

// deleteAll deletes the n items of setup at once, each from a goroutine of
// its own, and returns when each delete was sent.
func (c *cluster) deleteAll(ctx context.Context, n int) (map[string]time.Time, error) {
	sent := make(map[string]time.Time, n)
	var mu sync.Mutex
	var g sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		g.Go(func() {
			item := c.item(i)
			at := time.Now()
			if err := c.direct.Delete(ctx, item); err != nil {
				errs <- err
				return
			}
			mu.Lock()
			sent[item.Name] = at
			mu.Unlock()
		})
	}
	g.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return sent, fmt.Errorf("delete: %w", err)
	}
	return sent, nil
}

// removal is an item the server removed, and when the watch told of it.
type removal struct {
	name string
	at   time.Time
}

// removals tells of every item of the run removed after a List: a watch
// from the List's resourceVersion, resumed from its last event whenever the
// server ends it, so that no removal is missed.
type removals struct {
	gone   chan removal // closed when the watch ends; err then says why
	err    error
	cancel context.CancelFunc
	done   chan struct{}
}

// watchRemovals lists the run's items and watches for their removal.
func (c *cluster) watchRemovals(ctx context.Context) (*removals, []v1.WorkItem, error) {
	var list v1.WorkItemList
	if err := c.direct.List(ctx, &list, client.InNamespace(c.ns)); err != nil {
		return nil, nil, err
	}
	rv := list.ResourceVersion
	open := func(ctx context.Context) (watch.Interface, error) {
		return c.direct.Watch(ctx, &v1.WorkItemList{}, client.InNamespace(c.ns),
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
	}
	w, err := open(ctx)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &removals{gone: make(chan removal, len(list.Items)), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		defer close(r.gone)
		defer func() { w.Stop() }()
		for {
			select {
			case <-ctx.Done():
				r.err = ctx.Err()
				return
			case ev, ok := <-w.ResultChan():
				if !ok || ev.Type == watch.Error {
					w.Stop()
					next, err := open(ctx)
					if err != nil {
						r.err = fmt.Errorf("resume watch of WorkItems: %w", err)
						return
					}
					w = next
					continue
				}
				item, ok := ev.Object.(*v1.WorkItem)
				if !ok {
					continue
				}
				rv = item.ResourceVersion
				if ev.Type != watch.Deleted {
					continue
				}
				select {
				case r.gone <- removal{name: item.Name, at: time.Now()}:
				case <-ctx.Done():
					r.err = ctx.Err()
					return
				}
			}
		}
	}()
	return r, list.Items, nil
}

// await takes removals until n items are gone or timeout passes, telling
// seen of each with the count so far, and tick, if set, of the count every
// second. It returns how many were gone and when the last of them was seen
// (from, if none was), or when the deadline passed.
func (r *removals) await(ctx context.Context, n int, from time.Time, timeout time.Duration,
	seen func(removal, int) error, tick func(int)) (int, time.Time, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	gone, last := 0, from
	for gone < n {
		select {
		case rm, ok := <-r.gone:
			if !ok {
				return gone, last, r.err
			}
			gone++
			last = rm.at
			if err := seen(rm, gone); err != nil {
				return gone, last, err
			}
		case <-ticker.C:
			if tick != nil {
				tick(gone)
			}
		case <-deadline.C:
			return gone, time.Now(), nil
		case <-ctx.Done():
			return gone, last, ctx.Err()
		}
	}
	return gone, last, nil
}

// stop ends the watch and waits for it.
func (r *removals) stop() {
	r.cancel()
	<-r.done
}

// leftChildren counts the children on the server whose item is gone.
func (c *cluster) leftChildren(ctx context.Context) (int, error) {
	var items v1.WorkItemList
	if err := c.direct.List(ctx, &items, client.InNamespace(c.ns)); err != nil {
		return 0, err
	}
	alive := map[string]bool{markerOwner: true}
	for _, it := range items.Items {
		alive[string(it.UID)] = true
	}
	var children corev1.ConfigMapList
	if err := c.direct.List(ctx, &children, client.InNamespace(c.ns), client.HasLabels{v1.ChildLabel}); err != nil {
		return 0, err
	}
	n := 0
	for _, ch := range children.Items {
		if !alive[ch.Labels[v1.ChildLabel]] {
			n++
		}
	}
	return n, nil
}

// withFinalizer counts the run's items still holding the finalizer.
func (c *cluster) withFinalizer(ctx context.Context) (int, error) {
	var left v1.WorkItemList
	if err := c.direct.List(ctx, &left, client.InNamespace(c.ns)); err != nil {
		return 0, err
	}
	n := 0
	for i := range left.Items {
		if controllerutil.ContainsFinalizer(&left.Items[i], v1.Finalizer) {
			n++
		}
	}
	return n, nil
}

// Leftovers is what a run leaves behind, counted on the server once its
// controller has stopped.
type Leftovers struct {
	// StuckWithFinalizer counts stuck items still holding the finalizer.
	StuckWithFinalizer int
	// DuplicateChildren counts children created beyond one per item over the
	// whole run, counted on the server by a watch (children later deleted
	// included).
	DuplicateChildren int
	// LeftChildren counts children on the server after the run whose item
	// is gone: the envtest control plane has no garbage collector, so nobody
	// else removes them.
	LeftChildren int
	// DuplicateUninstalls counts uninstalls reported done beyond one per
	// item of items.
	DuplicateUninstalls int
}

// String says what was left, for a log line.
func (l Leftovers) String() string {
	return fmt.Sprintf("%d with the finalizer; children %d duplicate, %d left; %d duplicate uninstalls",
		l.StuckWithFinalizer, l.DuplicateChildren, l.LeftChildren, l.DuplicateUninstalls)
}

func (c *cluster) leftovers(ctx context.Context, installer *sim.Installer, items []v1.WorkItem) (Leftovers, error) {
	var out Leftovers
	var err error
	if out.StuckWithFinalizer, err = c.withFinalizer(ctx); err != nil {
		return out, err
	}
	for _, it := range items {
		if u := installer.Uninstalled(it.UID); u > 1 {
			out.DuplicateUninstalls += u - 1
		}
	}
	if err := c.children[len(c.children)-1].sync(ctx); err != nil {
		return out, fmt.Errorf("count children: %w", err)
	}
	out.DuplicateChildren = mergedDuplicates(c.children...)
	if out.LeftChildren, err = c.leftChildren(ctx); err != nil {
		return out, fmt.Errorf("count children left: %w", err)
	}
	return out, nil
}
