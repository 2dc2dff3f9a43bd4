package scenario

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/racesafe/racesafe/examples/workitem/api/v1alpha1"
	"github.com/racesafe/racesafe/examples/workitem/naive"
	"github.com/racesafe/racesafe/examples/workitem/ported"
	"github.com/racesafe/racesafe/examples/workitem/reconciler"
	"github.com/racesafe/racesafe/examples/workitem/settings"
	"github.com/racesafe/racesafe/examples/workitem/sim"
	"github.com/racesafe/racesafe/racetest"
)

// Kind names a controller the scenario can run.
type Kind string

// The controllers a scenario can run.
const (
	Naive     Kind = "naive"      // the incident's code
	NaiveFix1 Kind = "naive+fix1" // default requeues after the configured interval
	NaiveFix2 Kind = "naive+fix2" // phase pinned in a local variable
	NaiveRYW  Kind = "naive+ryw"  // naive on controller-runtime's read-your-writes cache client
	Racesafe  Kind = "racesafe"   // built from this library
	// NaiveClient is the incident's code behind the drop-in port
	// (examples/workitem/ported).
	NaiveClient Kind = "naive+client"
)

// Kinds lists every Kind in the order the benchmarks print them.
var Kinds = []Kind{Naive, NaiveFix1, NaiveFix2, NaiveRYW, Racesafe, NaiveClient}

// ErrUnknownKind is returned for a Kind not in Kinds.
var ErrUnknownKind = errors.New("unknown controller kind")

// Scheme knows core types and WorkItem.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err) // static registration; cannot fail at run time
	}
	if err := v1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// managers builds every manager of one run, the one manager of a burst or
// an API server restart and each replica of a failover or a soak alike: the
// same controller on the run's namespace, its cache seeing watch events late
// (racetest.LaggedCache) while its writes and live reads go straight to the
// server, through a client that injects the run's faults and times its
// WorkItem Gets. Replicas get their leader election from racetest.Replicas.
type managers struct {
	cluster   *cluster
	kind      Kind
	lag       racetest.LagOptions
	faults    *racetest.Faults // nil: none
	reads     *readTimes       // nil: Gets not timed
	workers   int              // MaxConcurrentReconciles
	installer *sim.Installer   // each manager has its own view (sim.Installer.As)
	cfgs      *settings.Manager
	// warm starts the WorkItem informer before the manager leads, as a
	// field index registered at setup does; otherwise controller-runtime
	// starts it on election, with a List as fresh as the API server.
	warm bool

	mu   sync.Mutex
	recs map[string]*reconciler.Reconciler // the Racesafe reconciler of each manager, by name
}

// options are the manager.Options every manager of the run starts from.
func (m *managers) options() (manager.Options, error) {
	mopts := manager.Options{
		Scheme:                 m.cluster.scheme,
		HealthProbeBindAddress: "0",
		NewCache:               racetest.LaggedCache(m.lag),
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{m.cluster.ns: {}}},
	}
	// Off, so that managers do not race for a port; and controllers are
	// named after their manager, whose name a restart reuses.
	mopts.Metrics.BindAddress = "0"
	mopts.Controller.SkipNameValidation = ptr.To(true)
	if m.kind == NaiveRYW {
		mopts.Client.Cache = &client.CacheOptions{}
		if err := readYourWrites(mopts.Client.Cache); err != nil {
			return mopts, err
		}
	}
	// Every controller's client times its WorkItem Gets, so the waits of
	// the read-your-writes client are measured rather than assumed.
	mopts.NewClient = func(cfg *rest.Config, o client.Options) (client.Client, error) {
		c, err := client.NewWithWatch(cfg, o)
		if err != nil {
			return nil, err
		}
		if m.faults != nil {
			c = interceptor.NewClient(c, m.faults.Funcs())
		}
		return interceptor.NewClient(c, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, o ...client.GetOption) error {
				t := time.Now()
				err := c.Get(ctx, key, obj, o...)
				if _, ok := obj.(*v1.WorkItem); ok {
					m.reads.add(t, time.Now())
				}
				return err
			},
		}), nil
	}
	return mopts, nil
}

// setup adds the run's controller, named name, to mgr.
func (m *managers) setup(ctx context.Context, mgr manager.Manager, name string) error {
	installer := m.installer.As(name)
	copts := controller.Options{MaxConcurrentReconciles: m.workers}
	var err error
	switch m.kind {
	case NaiveClient:
		err = ported.SetupWithManager(mgr, &naive.Controller{Client: mgr.GetClient(), ConfigManager: m.cfgs, Installer: installer, Variant: naive.Incident},
			name, copts)
	case Racesafe:
		var r *reconciler.Reconciler
		if r, err = reconciler.New(mgr, reconciler.Options{Installer: installer, Interval: m.cfgs.SyncStatusCheckInterval}); err == nil {
			err = r.SetupWithManager(mgr, name, copts)
			m.mu.Lock()
			if m.recs == nil {
				m.recs = map[string]*reconciler.Reconciler{}
			}
			m.recs[name] = r
			m.mu.Unlock()
		}
	default:
		variant := map[Kind]naive.Variant{Naive: naive.Incident, NaiveRYW: naive.Incident, NaiveFix1: naive.Fix1, NaiveFix2: naive.Fix2}[m.kind]
		err = (&naive.Controller{Client: mgr.GetClient(), ConfigManager: m.cfgs, Installer: installer, Variant: variant}).
			SetupWithManager(mgr, name, copts)
	}
	if err != nil {
		return err
	}
	if m.warm {
		if _, err := mgr.GetCache().GetInformer(ctx, &v1.WorkItem{}); err != nil {
			return fmt.Errorf("warm the WorkItem informer of %s: %w", name, err)
		}
	}
	return nil
}

// reconciler returns the Racesafe reconciler of the named manager, or nil.
func (m *managers) reconciler(name string) *reconciler.Reconciler {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.recs[name]
}

// start starts one manager, without leader election, on cfg and returns once
// its cache has synced; stop stops it and returns its error, the same one
// however often it is called.
func (m *managers) start(ctx context.Context, cfg *rest.Config, name string) (stop func() error, err error) {
	mopts, err := m.options()
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, mopts)
	if err != nil {
		return nil, err
	}
	if err := m.setup(ctx, mgr, name); err != nil {
		return nil, err
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	if !mgr.GetCache().WaitForCacheSync(mctx) {
		cancel()
		return nil, fmt.Errorf("cache of %s did not sync: %w", name, <-done)
	}
	var once sync.Once
	var stopErr error
	return func() error {
		once.Do(func() {
			cancel()
			stopErr = <-done
		})
		return stopErr
	}, nil
}

// leaderElection shapes the election of a run's replicas.
type leaderElection struct {
	// LeaseDuration, RenewDeadline and RetryPeriod; zero takes racetest's
	// defaults (2s, 1.5s and 300ms).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Replace starts a new standby for each replica stopped or exited.
	Replace bool
}

// startReplicas starts n replicas of the run's manager with leader election
// on one Lease, named after the run: replica 0 leads. Their names, the
// Lease's name followed by -0, -1 and on, are their controllers' too.
func (m *managers) startReplicas(ctx context.Context, n int, lease string, le leaderElection) (*racetest.Replicas, error) {
	mopts, err := m.options()
	if err != nil {
		return nil, err
	}
	return racetest.StartReplicas(ctx, n, racetest.ReplicaOptions{
		Config:                  m.cluster.cfg,
		Manager:                 mopts,
		Setup:                   func(mgr manager.Manager, name string) error { return m.setup(ctx, mgr, name) },
		LeaderElectionID:        lease,
		LeaderElectionNamespace: m.cluster.ns,
		LeaseDuration:           le.LeaseDuration,
		RenewDeadline:           le.RenewDeadline,
		RetryPeriod:             le.RetryPeriod,
		Replace:                 le.Replace,
	})
}

// readYourWrites turns on controller-runtime's read-your-writes cache
// option for the NaiveRYW peer. The option exists from controller-runtime
// v0.25; racesafe supports v0.23 and v0.24 too, so it is set by name, and
// the peer is refused where it does not exist.
func readYourWrites(o *client.CacheOptions) error {
	f := reflect.ValueOf(o).Elem().FieldByName("EnableReadYourWritesConsistency")
	if !f.IsValid() || f.Type() != reflect.TypeFor[*bool]() {
		return fmt.Errorf("the %s peer needs controller-runtime v0.25 or later (CacheOptions.EnableReadYourWritesConsistency)", NaiveRYW)
	}
	f.Set(reflect.ValueOf(ptr.To(true)))
	return nil
}

func reconcileTotal(name string) int {
	return int(controllerMetric("controller_runtime_reconcile_total", name))
}

func reconcileSeconds(name string) float64 {
	return controllerMetric("controller_runtime_reconcile_time_seconds", name)
}

// controllerMetric sums a counter's values, or a histogram's sums, over the
// series of the named controller.
func controllerMetric(family, name string) float64 {
	return metricSum(family, "controller", name)
}

// metricSum sums the values of a metric family's series whose label is
// value: counters and gauges, and histograms' sums.
func metricSum(family, label, value string) float64 {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return 0
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					total += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	return total
}
