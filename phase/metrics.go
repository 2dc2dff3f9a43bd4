package phase

import "github.com/racesafe/racesafe/internal/controllermetrics"

// Floor reasons, the reason label of racesafe_phase_floor_total.
const (
	floorDone     = "done"         // Done (or Decision{}) in a non-terminal phase
	floorUnnamed  = "unnamed wait" // WaitForEvent("")
	floorMaxSteps = "max steps"    // MaxSteps transitions in one reconcile
)

var (
	transitionsTotal = controllermetrics.Counter("racesafe_phase_transitions_total",
		"Phase transitions the API server acknowledged, by controller, from and to phase.", "from", "to")

	releasesTotal = controllermetrics.Counter("racesafe_phase_releases_total",
		"Releases the API server acknowledged, by controller and the phase released from.", "from")

	unknownTotal = controllermetrics.Counter("racesafe_phase_unknown_total",
		"Reconciles that met a non-terminal phase with no handler, by controller and phase.", "phase")

	// floorTotal counts the reconciles the machine ended with a requeue that
	// no handler asked for. Each one is a branch that should say what it
	// waits for.
	floorTotal = controllermetrics.Counter("racesafe_phase_floor_total",
		"Reconciles that would have ended without a requeue in a non-terminal phase and were requeued, by controller, phase and reason.", "phase", "reason")
)
