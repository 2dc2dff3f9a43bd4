package phase

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Floor reasons, the reason label of racesafe_phase_floor_total.
const (
	floorDone     = "done"         // Done (or Decision{}) in a non-terminal phase
	floorUnnamed  = "unnamed wait" // WaitForEvent("")
	floorMaxSteps = "max steps"    // MaxSteps transitions in one reconcile
)

var (
	transitionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "racesafe_phase_transitions_total",
		Help: "Phase transitions the API server acknowledged, by controller, from and to phase.",
	}, []string{"controller", "from", "to"})

	releasesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "racesafe_phase_releases_total",
		Help: "Releases the API server acknowledged, by controller and the phase released from.",
	}, []string{"controller", "from"})

	unknownTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "racesafe_phase_unknown_total",
		Help: "Reconciles that met a non-terminal phase with no handler, by controller and phase.",
	}, []string{"controller", "phase"})

	// floorTotal counts the reconciles the machine ended with a requeue that
	// no handler asked for. Each one is a branch that should say what it
	// waits for.
	floorTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "racesafe_phase_floor_total",
		Help: "Reconciles that would have ended without a requeue in a non-terminal phase and were requeued, by controller, phase and reason.",
	}, []string{"controller", "phase", "reason"})
)

func init() {
	metrics.Registry.MustRegister(transitionsTotal, releasesTotal, unknownTotal, floorTotal)
}
