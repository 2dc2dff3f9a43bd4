package expectations

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Registered once by init, shared by every OwnerTracker through the
// "controller" label (the tracker's Name), like the Tracker's vectors: a second MustRegister of a
// name would panic.
var (
	ownerSkipsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "racesafe_owner_expectations_skips_total",
		Help: "Owner reconciles refused because an owned kind's cache had not seen this controller's writes.",
	}, []string{"controller", "owner_kind", "owned_kind"})

	ownerExpiredTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "racesafe_owner_expectations_expired_total",
		Help: "Owned-kind records dropped after their TTL without the cache catching up.",
	}, []string{"controller", "owner_kind", "owned_kind"})

	ownerCacheVersion = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "racesafe_owner_expectations_cache_resource_version",
		Help: "The owned kind's cache resourceVersion as last read, best effort: set only when it parses as an integer.",
	}, []string{"controller", "owned_kind"})

	ownerCatchUpSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "racesafe_owner_expectations_catch_up_seconds",
		Help:    "Time from the last recorded write of an owned kind to the check that found its cache caught up.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
	}, []string{"controller", "owned_kind"})
)

func init() {
	metrics.Registry.MustRegister(ownerSkipsTotal, ownerExpiredTotal, ownerCacheVersion, ownerCatchUpSeconds)
}

// ownerKindMetrics are one tracker's series for one owned kind, resolved once.
type ownerKindMetrics struct {
	skips   prometheus.Counter
	expired prometheus.Counter
	version prometheus.Gauge
	catchUp prometheus.Observer
}

func newOwnerKindMetrics(tracker, ownerKind, ownedKind string) ownerKindMetrics {
	return ownerKindMetrics{
		skips:   ownerSkipsTotal.WithLabelValues(tracker, ownerKind, ownedKind),
		expired: ownerExpiredTotal.WithLabelValues(tracker, ownerKind, ownedKind),
		version: ownerCacheVersion.WithLabelValues(tracker, ownedKind),
		catchUp: ownerCatchUpSeconds.WithLabelValues(tracker, ownedKind),
	}
}
