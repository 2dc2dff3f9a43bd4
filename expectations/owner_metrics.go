package expectations

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/racesafe/racesafe/internal/controllermetrics"
)

// Registered once, at package initialisation, and shared by every
// OwnerTracker through the "controller" label (the tracker's Name), like the
// Tracker's vectors: a second registration of a name would panic.
var (
	ownerSkipsTotal = controllermetrics.Counter("racesafe_owner_expectations_skips_total",
		"Owner reconciles refused because an owned kind's cache had not seen this controller's writes.", "owner_kind", "owned_kind")

	ownerExpiredTotal = controllermetrics.Counter("racesafe_owner_expectations_expired_total",
		"Owned-kind records dropped after their TTL without the cache catching up.", "owner_kind", "owned_kind")

	ownerCacheVersion = controllermetrics.Gauge("racesafe_owner_expectations_cache_resource_version",
		"The owned kind's cache resourceVersion as last read, best effort: set only when it parses as an integer.", "owned_kind")

	ownerCatchUpSeconds = controllermetrics.Histogram("racesafe_owner_expectations_catch_up_seconds",
		"Time from the last recorded write of an owned kind to the check that found its cache caught up.", controllermetrics.LagBuckets(), "owned_kind")
)

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
