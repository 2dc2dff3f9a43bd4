package racetest

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// sentinelName is the object the checker creates after a history's
// operations: once the direct watch delivered it, it delivered every state
// before it.
const sentinelName = "zz-sentinel"

// checkEnv is what every history of a CheckHistories call shares: one
// control plane, its clients and the lagged transport of the caches.
type checkEnv struct {
	o        CheckOptions
	hc       *http.Client
	laggedHC *http.Client
	lagged   *rest.Config
	mapper   meta.RESTMapper
	direct   client.WithWatch
	runs     atomic.Int64 // names each history's namespaces apart
	id       uint32       // names each CheckHistories call's namespaces apart
}

func newCheckEnv(o CheckOptions) (*checkEnv, error) {
	hc, err := rest.HTTPClientFor(o.Config)
	if err != nil {
		return nil, fmt.Errorf("racetest: http client: %w", err)
	}
	lag := o.Lag
	lagged := WithWatchLag(o.Config, lag)
	laggedHC, err := rest.HTTPClientFor(lagged)
	if err != nil {
		return nil, fmt.Errorf("racetest: http client for lagged config: %w", err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(o.Config, hc)
	if err != nil {
		return nil, fmt.Errorf("racetest: rest mapper: %w", err)
	}
	direct, err := client.NewWithWatch(o.Config, client.Options{HTTPClient: hc, Mapper: mapper, Scheme: clientgoscheme.Scheme})
	if err != nil {
		return nil, fmt.Errorf("racetest: direct client: %w", err)
	}
	h := fnv.New32a()
	fmt.Fprintf(h, "%s %d", o.Subject.Name, time.Now().UnixNano())
	return &checkEnv{id: h.Sum32(), o: o, hc: hc, laggedHC: laggedHC, lagged: lagged, mapper: mapper, direct: direct}, nil
}

func (env *checkEnv) close() {
	utilnet.CloseIdleConnectionsFor(env.hc.Transport)
	utilnet.CloseIdleConnectionsFor(env.laggedHC.Transport)
}

// historyResult is one history, run and checked.
type historyResult struct {
	Seed       uint64
	Records    []Record
	Violations []Violation
}

// runHistory runs ops, the history of seed, in namespaces of its own with a
// manager of its own, and checks it.
func (env *checkEnv) runHistory(ctx context.Context, seed uint64, ops []Op) (*historyResult, error) {
	o := env.o
	run := env.runs.Add(1)
	namespaces := make([]string, o.Subject.Namespaces)
	tr := &truth{states: map[string][]serverState{}, names: map[string]bool{}}
	for i := range namespaces {
		name := fmt.Sprintf("chk-%s-%08x-%d-%d-%d", sanitize(o.Subject.Name), env.id, seed, run, i)
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := env.direct.Create(ctx, ns); err != nil {
			return nil, fmt.Errorf("racetest: namespace of history %d: %w", seed, err)
		}
		namespaces[i] = name
		stop, err := watchTruth(ctx, env.direct, name, ns.ResourceVersion, tr)
		if err != nil {
			return nil, err
		}
		defer stop()
	}

	ambiguous := &atomic.Bool{}
	mgr, err := env.manager(namespaces, ambiguous)
	if err != nil {
		return nil, err
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	stopMgr := sync.OnceValue(func() error { cancel(); return <-done })
	defer func() {
		_ = stopMgr()
		utilnet.CloseIdleConnectionsFor(mgr.GetHTTPClient().Transport)
	}()

	shown, err := watchDeletions(ctx, mgr.GetCache())
	if err != nil {
		return nil, err
	}
	subject := mgr.GetClient()
	if o.Subject.Client != nil {
		if subject, err = o.Subject.Client(mgr); err != nil {
			return nil, fmt.Errorf("racetest: subject %s: %w", o.Subject.Name, err)
		}
	}
	ex := &executor{o: o, namespaces: namespaces, subject: subject, direct: env.direct, ambiguous: ambiguous, last: map[string]*policyv1.PodDisruptionBudget{}}
	records := make([]Record, 0, len(ops))
	for _, op := range ops {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		records = append(records, ex.run(ctx, op))
	}
	if err := env.settle(ctx, namespaces, tr); err != nil {
		return nil, err
	}
	if err := stopMgr(); err != nil {
		return nil, fmt.Errorf("racetest: manager of history %d: %w", seed, err)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.err != nil {
		return nil, fmt.Errorf("racetest: history %d: %w", seed, tr.err)
	}
	h := &historyResult{Seed: seed, Records: records}
	h.Violations = check(o, namespaces, records, tr, shown.snapshot())
	return h, nil
}

// settle creates the sentinel in every namespace and waits until the direct
// watch delivered it, and so every state before it.
func (env *checkEnv) settle(ctx context.Context, namespaces []string, tr *truth) error {
	for _, ns := range namespaces {
		s := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sentinelName}}
		if err := env.direct.Create(ctx, s); err != nil {
			return fmt.Errorf("racetest: sentinel: %w", err)
		}
	}
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		n := 0
		for _, st := range tr.states {
			if st[0].Name == sentinelName {
				n++
			}
		}
		return n == len(namespaces) || tr.err != nil, nil
	})
	if err != nil {
		return fmt.Errorf("racetest: the direct watch did not deliver the sentinel: %w", err)
	}
	return nil
}

// manager builds the manager of one history: its cache lagged and limited
// to the history's namespaces, its client failing the writes ambiguous
// marks.
func (env *checkEnv) manager(namespaces []string, ambiguous *atomic.Bool) (manager.Manager, error) {
	faults, err := NewFaults(FaultOptions{
		AppliedTimeout: 1,
		Operations:     allOperations,
		Match:          func(Operation, client.Object) bool { return ambiguous.Load() },
	})
	if err != nil {
		return nil, err
	}
	defaults := map[string]cache.Config{}
	for _, ns := range namespaces {
		defaults[ns] = cache.Config{}
	}
	mo := manager.Options{
		Scheme:                 clientgoscheme.Scheme,
		MapperProvider:         func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return env.mapper, nil },
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:                  cache.Options{DefaultNamespaces: defaults},
		Client:                 client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		NewCache: func(_ *rest.Config, o cache.Options) (cache.Cache, error) {
			o.HTTPClient = env.laggedHC
			return cache.New(env.lagged, o)
		},
		NewClient: func(cfg *rest.Config, o client.Options) (client.Client, error) {
			c, err := client.NewWithWatch(cfg, o)
			if err != nil {
				return nil, err
			}
			return interceptor.NewClient(c, faults.Funcs()), nil
		},
	}
	if env.o.Subject.Configure != nil {
		if err := env.o.Subject.Configure(&mo); err != nil {
			return nil, fmt.Errorf("racetest: configure subject %s: %w", env.o.Subject.Name, err)
		}
	}
	mgr, err := manager.New(env.o.Config, mo)
	if err != nil {
		return nil, fmt.Errorf("racetest: manager: %w", err)
	}
	return mgr, nil
}

// deletions are when each form's informer delivered each deletion, by form
// and UID: the subject's cache has shown it from then on.
type deletions struct {
	mu   sync.Mutex
	seen map[Form]map[string]time.Time
}

func (d *deletions) snapshot() map[Form]map[string]time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[Form]map[string]time.Time{}
	for f, m := range d.seen {
		out[f] = map[string]time.Time{}
		for uid, t := range m {
			out[f][uid] = t
		}
	}
	return out
}

// watchDeletions starts an informer of each form in c, records the
// deletions each delivers, and waits for them to sync.
func watchDeletions(ctx context.Context, c cache.Cache) (*deletions, error) {
	d := &deletions{seen: map[Form]map[string]time.Time{}}
	for _, f := range []Form{FormTyped, FormUnstructured, FormMetadata} {
		d.seen[f] = map[string]time.Time{}
		inf, err := c.GetInformer(ctx, newForm(f))
		if err != nil {
			return nil, fmt.Errorf("racetest: %s informer: %w", f, err)
		}
		_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			m, err := meta.Accessor(obj)
			if err != nil {
				return
			}
			now := time.Now()
			d.mu.Lock()
			d.seen[f][string(m.GetUID())] = now
			d.mu.Unlock()
		}})
		if err != nil {
			return nil, fmt.Errorf("racetest: %s informer handler: %w", f, err)
		}
	}
	if !c.WaitForCacheSync(ctx) {
		return nil, errors.New("racetest: the subject's cache did not sync")
	}
	return d, nil
}

func sanitize(s string) string {
	s = strings.ToLower(s)
	s = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, s)
	return s[:min(len(s), 20)]
}
