package racetest_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/racesafe/racesafe/racetest"
)

// reconciled records which replica reconciled which ConfigMap.
type reconciled struct {
	mu   sync.Mutex
	seen map[string][]string // replica: names, in order
}

func (r *reconciled) add(replica, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen[replica] = append(r.seen[replica], name)
}

func (r *reconciled) by(replica string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen[replica])
}

// testFailover runs two replicas of a ConfigMap controller, crashes the
// leader, then hands over from the next one. Each time the old leader
// stops, the Lease shows how (still held after a crash, released after a
// handover), another replica is elected, the gap is as long as its mode
// makes it, and the new leader reconciles a ConfigMap created after.
func testFailover(t *testing.T, cfg *rest.Config) {
	direct := directClient(t, cfg)
	ns := createNamespace(t, direct)
	rec := &reconciled{seen: map[string][]string{}}
	opts := racetest.ReplicaOptions{
		Config:  cfg,
		Manager: manager.Options{Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}}},
		Setup: func(mgr manager.Manager, name string) error {
			return builder.ControllerManagedBy(mgr).Named(name).For(&corev1.ConfigMap{}).
				Complete(reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
					rec.add(name, req.Name)
					return reconcile.Result{}, nil
				}))
		},
		LeaderElectionID:        "failover",
		LeaderElectionNamespace: ns,
		Replace:                 true,
	}
	leaseDuration := 2 * time.Second // the default
	before := goleak.IgnoreCurrent()
	replicas, err := racetest.StartReplicas(t.Context(), 2, opts)
	if err != nil {
		t.Fatalf("StartReplicas: %v", err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = replicas.Stop()
		}
	})
	if got, want := replicas.Leader(), "failover-0"; got != want {
		t.Fatalf("Leader() = %q after StartReplicas, want %q: replica 0 leads first", got, want)
	}
	reconciledAfter := func(f racetest.Failover, cm string) {
		t.Helper()
		if err := direct.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cm, Namespace: ns}}); err != nil {
			t.Fatal(err)
		}
		poll(t, f.New+" reconciles "+cm, func() bool { return slices.Contains(rec.by(f.New), cm) })
		if got := replicas.Leader(); got != f.New {
			t.Errorf("Leader() = %q, want %q", got, f.New)
		}
		var lease coordinationv1.Lease
		if err := direct.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "failover"}, &lease); err != nil {
			t.Fatal(err)
		}
		if holder := ptr.Deref(lease.Spec.HolderIdentity, ""); holder != f.New {
			t.Errorf("the Lease is held by %q, want the new leader %q", holder, f.New)
		}
	}
	reconciledAfter(racetest.Failover{New: "failover-0"}, "first")
	if got := rec.by("failover-1"); len(got) != 0 {
		t.Errorf("the standby reconciled %v", got)
	}

	crash, err := replicas.Failover(t.Context(), racetest.Crash)
	if err != nil {
		t.Fatalf("Failover(Crash): %v", err)
	}
	t.Logf("crash: %+v", crash)
	if crash.Old != "failover-0" || crash.New == "" || crash.New == crash.Old {
		t.Fatalf("Failover(Crash) = %+v, want failover-0 replaced by another", crash)
	}
	if crash.LeaseHolder != crash.Old {
		t.Errorf("after the crash the Lease was held by %q, want the crashed %q: its lease must be left to expire", crash.LeaseHolder, crash.Old)
	}
	// The lease was renewed at most a retry period before the crash.
	if crash.Gap < leaseDuration/2 {
		t.Errorf("a crashed leader replaced after %v, less than half its lease of %v", crash.Gap, leaseDuration)
	}
	crashedSeen := len(rec.by(crash.Old))
	reconciledAfter(crash, "after-crash")

	handover, err := replicas.Failover(t.Context(), racetest.Handover)
	if err != nil {
		t.Fatalf("Failover(Handover): %v", err)
	}
	t.Logf("handover: %+v", handover)
	if handover.Old != crash.New || handover.New == "" || handover.New == handover.Old {
		t.Fatalf("Failover(Handover) = %+v, want %s replaced by another", handover, crash.New)
	}
	if handover.LeaseHolder == handover.Old {
		t.Errorf("after the handover the Lease was still held by %q: it was not released", handover.LeaseHolder)
	}
	if handover.Gap >= crash.Gap {
		t.Errorf("handover gap %v, crash gap %v: a released lease is taken at the next retry, not after it expires", handover.Gap, crash.Gap)
	}
	handedSeen := len(rec.by(handover.Old))
	reconciledAfter(handover, "after-handover")

	if got := replicas.Names(); len(got) != 2 || slices.Contains(got, crash.Old) || slices.Contains(got, handover.Old) {
		t.Errorf("Names() = %v, want 2 replicas, neither stopped one", got)
	}
	stopped = true
	if err := replicas.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	// A stopped replica reconciles nothing more.
	if n := len(rec.by(crash.Old)); n != crashedSeen {
		t.Errorf("%s reconciled %d times after it crashed", crash.Old, n-crashedSeen)
	}
	if n := len(rec.by(handover.Old)); n != handedSeen {
		t.Errorf("%s reconciled %d times after it handed over", handover.Old, n-handedSeen)
	}
	if err := goleak.Find(before); err != nil {
		t.Errorf("goroutines outlived the stopped replicas: %v", err)
	}
}

// StartReplicas and Failover refuse what client-go or their state would.
func TestReplicaOptionsAreChecked(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:6443"}
	valid := racetest.ReplicaOptions{Config: cfg, LeaderElectionID: "id", LeaderElectionNamespace: "ns"}
	for name, tc := range map[string]struct {
		n     int
		opts  racetest.ReplicaOptions
		field string
	}{
		"no replica":   {0, valid, "n"},
		"no config":    {1, racetest.ReplicaOptions{LeaderElectionID: "id", LeaderElectionNamespace: "ns"}, "ReplicaOptions.Config"},
		"no lease":     {1, racetest.ReplicaOptions{Config: cfg, LeaderElectionNamespace: "ns"}, "ReplicaOptions.LeaderElectionID"},
		"no namespace": {1, racetest.ReplicaOptions{Config: cfg, LeaderElectionID: "id"}, "ReplicaOptions.LeaderElectionNamespace"},
		"renew after the lease ends": {1, func() racetest.ReplicaOptions {
			o := valid
			o.RenewDeadline = 3 * time.Second
			return o
		}(), "ReplicaOptions.RenewDeadline"},
		"negative retry": {1, func() racetest.ReplicaOptions {
			o := valid
			o.RetryPeriod = -time.Second
			return o
		}(), "ReplicaOptions.RetryPeriod"},
	} {
		_, err := racetest.StartReplicas(t.Context(), tc.n, tc.opts)
		var optsErr *racetest.ReplicaOptionsError
		if !errors.Is(err, racetest.ErrInvalidFaultOptions) || !errors.As(err, &optsErr) || optsErr.Field != tc.field {
			t.Errorf("%s: StartReplicas = %v, want a *ReplicaOptionsError for %s", name, err, tc.field)
		}
	}
}

// testFailoverNeedsAStandby fails over a lone replica: nothing can take
// over, so it is refused and the leader keeps leading.
func testFailoverNeedsAStandby(t *testing.T, cfg *rest.Config) {
	ns := createNamespace(t, directClient(t, cfg))
	replicas, err := racetest.StartReplicas(t.Context(), 1, racetest.ReplicaOptions{
		Config: cfg, LeaderElectionID: "alone", LeaderElectionNamespace: ns,
	})
	if err != nil {
		t.Fatalf("StartReplicas: %v", err)
	}
	defer func() {
		if err := replicas.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}()
	if _, err := replicas.Failover(t.Context(), racetest.Crash); !errors.Is(err, racetest.ErrNoStandby) {
		t.Errorf("Failover of a lone replica: %v, want ErrNoStandby", err)
	}
	var optsErr *racetest.ReplicaOptionsError
	if _, err := replicas.Failover(t.Context(), racetest.FailoverMode(0)); !errors.As(err, &optsErr) || optsErr.Field != "mode" {
		t.Errorf("Failover(FailoverMode(0)): %v, want a *ReplicaOptionsError for the mode", err)
	}
	if got := replicas.Leader(); got != "alone-0" {
		t.Errorf("Leader() = %q after the refused failovers, want alone-0", got)
	}
}

// testFailoverExpire stops a leader with Expire while one of its reconciles
// runs: unlike a crash, the reconcile finishes and its write reaches the
// server, counted among the old leader's requests; unlike a handover, the
// lease is not released, and the standby waits it out.
func testFailoverExpire(t *testing.T, cfg *rest.Config) {
	direct := directClient(t, cfg)
	ns := createNamespace(t, direct)
	entered := make(chan string, 1)
	opts := racetest.ReplicaOptions{
		Config:  cfg,
		Manager: manager.Options{Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}}},
		Setup: func(mgr manager.Manager, name string) error {
			c := mgr.GetClient()
			return builder.ControllerManagedBy(mgr).Named(name).For(&corev1.ConfigMap{}).
				Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
					if req.Name != "slow" {
						return reconcile.Result{}, nil
					}
					entered <- name
					// Until its manager stops: then it writes down whose
					// reconcile finished, as a controller finishing its work.
					<-ctx.Done()
					var cm corev1.ConfigMap
					ctx = context.WithoutCancel(ctx)
					if err := c.Get(ctx, req.NamespacedName, &cm); err != nil {
						return reconcile.Result{}, err
					}
					cm.Data = map[string]string{"finished-by": name}
					return reconcile.Result{}, c.Update(ctx, &cm)
				}))
		},
		LeaderElectionID:        "expire",
		LeaderElectionNamespace: ns,
	}
	leaseDuration := 2 * time.Second // the default
	replicas, err := racetest.StartReplicas(t.Context(), 2, opts)
	if err != nil {
		t.Fatalf("StartReplicas: %v", err)
	}
	defer func() {
		if err := replicas.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}()
	slow := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "slow", Namespace: ns}}
	if err := direct.Create(t.Context(), slow); err != nil {
		t.Fatal(err)
	}
	select {
	case name := <-entered:
		if name != "expire-0" {
			t.Fatalf("%s reconciled, want the leader expire-0", name)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the leader never reconciled")
	}
	old, _ := replicas.State("expire-0")
	updates := old.Requests.Count("update", "configmaps")

	f, err := replicas.Failover(t.Context(), racetest.Expire)
	if err != nil {
		t.Fatalf("Failover(Expire): %v", err)
	}
	t.Logf("expire: %+v", f)
	if f.Old != "expire-0" || f.New != "expire-1" {
		t.Fatalf("Failover(Expire) = %+v, want expire-0 replaced by expire-1", f)
	}
	if f.LeaseHolder != f.Old {
		t.Errorf("after the stop the Lease was held by %q, want %q: its release must not be sent", f.LeaseHolder, f.Old)
	}
	if f.Gap < leaseDuration/2 {
		t.Errorf("a leader that kept its lease replaced after %v, less than half its lease of %v", f.Gap, leaseDuration)
	}
	var got corev1.ConfigMap
	if err := direct.Get(t.Context(), client.ObjectKeyFromObject(slow), &got); err != nil {
		t.Fatal(err)
	}
	if by := got.Data["finished-by"]; by != f.Old {
		t.Errorf("the reconcile in flight at the stop wrote %q, want its write as %s: an Expire lets it finish", by, f.Old)
	}
	if n := old.Requests.Count("update", "configmaps") - updates; n != 1 {
		t.Errorf("State(%s).Requests counted %d ConfigMap updates during the stop, want its 1", f.Old, n)
	}

	// What the replicas know of each.
	oldState, ok := replicas.State(f.Old)
	if !ok || oldState.Running || oldState.Exited || oldState.Elected.IsZero() || !oldState.Elected.Before(f.Stopped) {
		t.Errorf("State(%s) = %+v, %v; want stopped, not exited, elected before the stop at %v", f.Old, oldState, ok, f.Stopped)
	}
	newState, ok := replicas.State(f.New)
	if !ok || !newState.Running || newState.Elected.Sub(f.Stopped) != f.Gap {
		t.Errorf("State(%s) = %+v, %v; want running, elected %v after the stop", f.New, newState, ok, f.Gap)
	}
	if _, ok := replicas.State("expire-9"); ok {
		t.Error("State of a replica never started: ok")
	}
}

// testReap runs two replicas of which the leader's manager fails by
// itself: Reap removes it and, with Replace, starts another; one of the
// two running takes over.
func testReap(t *testing.T, cfg *rest.Config) {
	ns := createNamespace(t, directClient(t, cfg))
	fail := make(chan struct{})
	var exiting client.Reader // reap-0's direct reader, through its own transport
	replicas, err := racetest.StartReplicas(t.Context(), 2, racetest.ReplicaOptions{
		Config:  cfg,
		Manager: manager.Options{Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}}},
		Setup: func(mgr manager.Manager, name string) error {
			if name != "reap-0" {
				return nil
			}
			exiting = mgr.GetAPIReader()
			// A leader's runnable that fails ends its manager.
			return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
				select {
				case <-fail:
					return errors.New("failed by the test")
				case <-ctx.Done():
					return nil
				}
			}))
		},
		LeaderElectionID: "reap", LeaderElectionNamespace: ns, Replace: true,
	})
	if err != nil {
		t.Fatalf("StartReplicas: %v", err)
	}
	defer func() {
		if err := replicas.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}()
	if reaped, err := replicas.Reap(t.Context()); err != nil || len(reaped) != 0 {
		t.Fatalf("Reap with every replica running = %v, %v; want none", reaped, err)
	}
	nsKey := client.ObjectKey{Name: ns}
	if err := exiting.Get(t.Context(), nsKey, &corev1.Namespace{}); err != nil {
		t.Fatalf("a read of reap-0 while it runs: %v", err)
	}
	close(fail)
	poll(t, "reap-0 exits", func() bool {
		st, _ := replicas.State("reap-0")
		return st.Exited
	})
	// Its process would have ended with its manager: what its goroutines
	// still send does not reach the server.
	if err := exiting.Get(t.Context(), nsKey, &corev1.Namespace{}); !errors.Is(err, racetest.ErrReplicaCrashed) {
		t.Errorf("a read of reap-0 after its manager exited = %v, want ErrReplicaCrashed", err)
	}
	reaped, err := replicas.Reap(t.Context())
	if err != nil || !slices.Equal(reaped, []string{"reap-0"}) {
		t.Fatalf("Reap = %v, %v; want [reap-0]", reaped, err)
	}
	if got := replicas.Names(); !slices.Equal(got, []string{"reap-1", "reap-2"}) {
		t.Errorf("Names() = %v after the reap, want the standby and a replacement", got)
	}
	// The standby and the replacement race for the released lease.
	poll(t, "a running replica leads", func() bool { return replicas.Leader() != "" })
	if st, _ := replicas.State("reap-0"); st.Running || !st.Exited {
		t.Errorf("State(reap-0) = %+v, want exited and no longer running", st)
	}
}
