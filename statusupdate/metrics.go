package statusupdate

import "github.com/racesafe/racesafe/internal/controllermetrics"

// Values of the target label.
const (
	targetStatus = "status"
	targetObject = "object"
)

// Values of the result label. Every attempt ends in exactly one of them: a
// call that conflicts twice and then writes counts conflict twice and written
// once.
const (
	resultWritten   = "written"   // the server accepted the patch
	resultUnchanged = "unchanged" // the merge patch was empty; nothing sent
	resultConflict  = "conflict"  // the server answered 409 Conflict
	resultError     = "error"     // mutate, the re-read or the patch failed otherwise
)

// patchesTotal is registered on controller-runtime's registry, so a manager's
// metrics endpoint serves it with no wiring by the caller.
var patchesTotal = controllermetrics.Counter("racesafe_statusupdate_patches_total",
	"Patch attempts by the statusupdate Patcher, by controller, target (status or object) and result (written, unchanged, conflict, error).", "target", "result")

// controllerName is the controller label of a Patcher named name.
func controllerName(name string) string {
	if name == "" {
		return "default"
	}
	return name
}

func observe(controller, target, result string) {
	patchesTotal.WithLabelValues(controller, target, result).Inc()
}
