package requeue

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// floorTotal counts the empty results UntilSettled replaced by a requeue. A rising
// count names a code path that ends a reconcile too early; the reason label
// says which state it was in.
var floorTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "racesafe_requeue_floor_total",
	Help: "Empty reconcile results replaced by a requeue because the object was not settled, by controller (the UntilSettled's Name) and reason.",
}, []string{"controller", "reason"})

// floorStaleTotal counts the stale-read errors UntilSettled turned into a short
// requeue: how often the cache was behind this controller's own writes.
var floorStaleTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "racesafe_requeue_floor_stale_total",
	Help: "Stale-read errors (expectations.ErrStale) UntilSettled turned into a short requeue, by controller (the UntilSettled's Name).",
}, []string{"controller"})

func init() {
	metrics.Registry.MustRegister(floorTotal, floorStaleTotal)
}
