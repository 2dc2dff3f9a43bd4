// Package controllermetrics creates racesafe's metric vectors: each one
// registered on controller-runtime's metrics.Registry, so a manager's
// metrics endpoint serves it with no wiring by the user, and labelled first
// by "controller", the name of the controller (or tracker, or patcher) that
// counts, so that several controllers in one process keep apart.
//
// A vector is created once, at package initialisation: the Registry
// refuses a second registration of a name, and these functions panic on it
// as MustRegister does, since a name registered twice is a programming
// error found by any test that imports the package.
package controllermetrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Label is the first label of every vector: the controller's name.
const Label = "controller"

// Counter returns a counter vector named name, labelled by controller and
// then by labels, registered on metrics.Registry.
func Counter(name, help string, labels ...string) *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, withController(labels))
	metrics.Registry.MustRegister(v)
	return v
}

// Gauge returns a gauge vector named name, labelled by controller and then
// by labels, registered on metrics.Registry.
func Gauge(name, help string, labels ...string) *prometheus.GaugeVec {
	v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, withController(labels))
	metrics.Registry.MustRegister(v)
	return v
}

// Histogram returns a histogram vector named name with buckets, labelled
// by controller and then by labels, registered on metrics.Registry.
func Histogram(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, withController(labels))
	metrics.Registry.MustRegister(v)
	return v
}

// LagBuckets returns the buckets, in seconds, of a cache's lag behind a
// write: from a healthy sub-millisecond watch to the expectations' default
// TTL of five minutes, past which a record expires instead of catching up.
func LagBuckets() []float64 {
	return []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
}

func withController(labels []string) []string {
	return append([]string{Label}, labels...)
}
