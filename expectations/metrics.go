package expectations

import (
	"sync"
	"weak"

	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/racesafe/racesafe/internal/controllermetrics"
)

// The vectors are package-level and registered once: controller-runtime's
// Registry refuses a second registration of the same name, and several
// trackers (one per kind) share each vector through the "controller" label (the tracker's Name).
var (
	pendingGauge = controllermetrics.Gauge("racesafe_expectations_pending",
		"Expectations recorded that no form of cached read has caught up with, and not expired or forgotten.")

	staleReadsTotal = controllermetrics.Counter("racesafe_expectations_stale_reads_total",
		"Cached reads found older than this controller's own last write.")

	satisfiedTotal = controllermetrics.Counter("racesafe_expectations_satisfied_total",
		"Expectations satisfied by a cached read.")

	expiredTotal = controllermetrics.Counter("racesafe_expectations_expired_total",
		"Expectations dropped after their TTL without being satisfied.")

	sweepsTotal = controllermetrics.Counter("racesafe_expectations_sweeps_total",
		"Sweeps of expired expectations; at most one per TTL.")

	catchUpSeconds = controllermetrics.Histogram("racesafe_expectations_catch_up_seconds",
		"Time from recording an expectation to the cached read that satisfied it: the informer lag.", controllermetrics.LagBuckets())
)

// trackerMetrics holds one tracker's series, resolved once at New so the
// check path does no label lookup (which hashes labels and takes a lock).
type trackerMetrics struct {
	pending   prometheus.Gauge
	stale     prometheus.Counter
	satisfied prometheus.Counter
	expired   prometheus.Counter
	sweeps    prometheus.Counter
	catchUp   prometheus.Observer
}

func newTrackerMetrics(name string) trackerMetrics {
	return trackerMetrics{
		pending:   pendingGauge.WithLabelValues(name),
		stale:     staleReadsTotal.WithLabelValues(name),
		satisfied: satisfiedTotal.WithLabelValues(name),
		expired:   expiredTotal.WithLabelValues(name),
		sweeps:    sweepsTotal.WithLabelValues(name),
		catchUp:   catchUpSeconds.WithLabelValues(name),
	}
}

// The Client's vectors, by controller name: a few series per controller.
var (
	clientReadsTotal = controllermetrics.Counter("racesafe_client_reads_total",
		"Reads through the drop-in Client, by what served them: the cache, this client's own last write, the API server (after an owner's wait expired), or refused as stale.", "served")

	clientCaughtUpTotal = controllermetrics.Counter("racesafe_client_caught_up_total",
		"Writes of the drop-in Client whose cache has caught up, per form read.")

	clientUnrecordedTotal = controllermetrics.Counter("racesafe_client_writes_unrecorded_total",
		"Successful writes of the drop-in Client that it could not keep: its reads do not serve them.", "verb")
)

// clientMetrics holds one Client's series, resolved once.
type clientMetrics struct {
	name                string
	cache, own, refused prometheus.Counter
	live                prometheus.Counter
	caughtUp            prometheus.Counter
}

func newClientMetrics(name string) *clientMetrics {
	return &clientMetrics{
		name:     name,
		cache:    clientReadsTotal.WithLabelValues(name, "cache"),
		own:      clientReadsTotal.WithLabelValues(name, "own_write"),
		refused:  clientReadsTotal.WithLabelValues(name, "refused"),
		live:     clientReadsTotal.WithLabelValues(name, "live"),
		caughtUp: clientCaughtUpTotal.WithLabelValues(name),
	}
}

// unrecorded counts a write the Client could not keep. verb is one of a
// fixed set, so the series stay bounded.
func (m *clientMetrics) unrecorded(verb string) {
	clientUnrecordedTotal.WithLabelValues(m.name, verb).Inc()
}

// clientPendingDesc is racesafe_client_pending: computed at each scrape
// from every live Client, so that it falls to zero on an idle controller
// whose cache has caught up, with no read or write to update it.
var clientPendingDesc = prometheus.NewDesc("racesafe_client_pending",
	"Writes of the drop-in Client that a form of the cache it reads has not shown yet, and not expired; flat and high means a stalled watch.",
	[]string{controllermetrics.Label}, nil)

// pendingClients collects racesafe_client_pending. It holds its Clients
// weakly: a Client nobody uses any more is not kept alive by its metric.
type pendingClients struct {
	mu      sync.Mutex
	clients map[weak.Pointer[Client]]struct{}
}

var livePending = func() *pendingClients {
	p := &pendingClients{clients: make(map[weak.Pointer[Client]]struct{})}
	metrics.Registry.MustRegister(p)
	return p
}()

func (p *pendingClients) add(c *Client) {
	p.mu.Lock()
	p.clients[weak.Make(c)] = struct{}{}
	p.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (p *pendingClients) Describe(ch chan<- *prometheus.Desc) { ch <- clientPendingDesc }

// Collect implements prometheus.Collector: one series per controller name.
func (p *pendingClients) Collect(ch chan<- prometheus.Metric) {
	p.mu.Lock()
	var live []*Client
	for w := range p.clients {
		if c := w.Value(); c != nil {
			live = append(live, c)
		} else {
			delete(p.clients, w)
		}
	}
	p.mu.Unlock()
	byName := make(map[string]int)
	for _, c := range live {
		byName[c.metrics().name] += c.Pending()
	}
	for name, n := range byName {
		ch <- prometheus.MustNewConstMetric(clientPendingDesc, prometheus.GaugeValue, float64(n), name)
	}
}
