package expectations

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The vectors are package-level and registered once: controller-runtime's
// Registry refuses a second registration of the same name, and several
// trackers (one per kind) share each vector through the "controller" label (the tracker's Name).
var (
	pendingGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "racesafe_expectations_pending",
		Help: "Expectations recorded that no form of cached read has caught up with, and not expired or forgotten.",
	}, []string{"controller"})

	staleReadsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "racesafe_expectations_stale_reads_total",
		Help: "Cached reads found older than this controller's own last write.",
	}, []string{"controller"})

	satisfiedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "racesafe_expectations_satisfied_total",
		Help: "Expectations satisfied by a cached read.",
	}, []string{"controller"})

	expiredTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "racesafe_expectations_expired_total",
		Help: "Expectations dropped after their TTL without being satisfied.",
	}, []string{"controller"})

	sweepsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "racesafe_expectations_sweeps_total",
		Help: "Sweeps of expired expectations; at most one per TTL.",
	}, []string{"controller"})

	catchUpSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "racesafe_expectations_catch_up_seconds",
		Help: "Time from recording an expectation to the cached read that satisfied it: the informer lag.",
		// From a healthy sub-millisecond watch to the default TTL of five
		// minutes, past which an expectation expires instead.
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
	}, []string{"controller"})
)

func init() {
	metrics.Registry.MustRegister(pendingGauge, staleReadsTotal, satisfiedTotal, expiredTotal, sweepsTotal, catchUpSeconds)
}

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
	clientReadsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "racesafe_client_reads_total",
		Help: "Reads through the drop-in Client, by what served them: the cache, this client's own last write, the API server (after an owner's wait expired), or refused as stale.",
	}, []string{"controller", "served"})

	clientCaughtUpTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "racesafe_client_caught_up_total",
		Help: "Writes of the drop-in Client whose cache has caught up, per form read.",
	}, []string{"controller"})

	clientPending = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "racesafe_client_pending",
		Help: "Writes the drop-in Client keeps because its cache has not shown them in every form, and not expired.",
	}, []string{"controller"})

	clientUnrecordedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "racesafe_client_writes_unrecorded_total",
		Help: "Successful writes of the drop-in Client that it could not keep: its reads do not serve them.",
	}, []string{"controller", "verb"})
)

func init() {
	metrics.Registry.MustRegister(clientReadsTotal, clientCaughtUpTotal, clientPending, clientUnrecordedTotal)
}

// clientMetrics holds one Client's series, resolved once.
type clientMetrics struct {
	name                string
	cache, own, refused prometheus.Counter
	live                prometheus.Counter
	caughtUp            prometheus.Counter
	pending             prometheus.Gauge
}

func newClientMetrics(name string) *clientMetrics {
	return &clientMetrics{
		name:     name,
		cache:    clientReadsTotal.WithLabelValues(name, "cache"),
		own:      clientReadsTotal.WithLabelValues(name, "own_write"),
		refused:  clientReadsTotal.WithLabelValues(name, "refused"),
		live:     clientReadsTotal.WithLabelValues(name, "live"),
		caughtUp: clientCaughtUpTotal.WithLabelValues(name),
		pending:  clientPending.WithLabelValues(name),
	}
}

// unrecorded counts a write the Client could not keep. verb is one of a
// fixed set, so the series stay bounded.
func (m *clientMetrics) unrecorded(verb string) {
	clientUnrecordedTotal.WithLabelValues(m.name, verb).Inc()
}
