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
