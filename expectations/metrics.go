package expectations

import (
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

	clientPending = controllermetrics.Gauge("racesafe_client_pending",
		"Writes the drop-in Client keeps because its cache has not shown them in every form, and not expired.")

	clientUnrecordedTotal = controllermetrics.Counter("racesafe_client_writes_unrecorded_total",
		"Successful writes of the drop-in Client that it could not keep: its reads do not serve them.", "verb")
)

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
