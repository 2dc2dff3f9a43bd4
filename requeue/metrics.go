package requeue

import "github.com/racesafe/racesafe/internal/controllermetrics"

// floorTotal counts the empty results UntilSettled replaced by a requeue. A rising
// count names a code path that ends a reconcile too early; the reason label
// says which state it was in.
var floorTotal = controllermetrics.Counter("racesafe_requeue_floor_total",
	"Empty reconcile results replaced by a requeue because the object was not settled, by controller (the UntilSettled's Name) and reason.", "reason")

// floorStaleTotal counts the stale-read errors UntilSettled turned into a short
// requeue: how often the cache was behind this controller's own writes.
var floorStaleTotal = controllermetrics.Counter("racesafe_requeue_floor_stale_total",
	"Stale-read errors (expectations.ErrStale) UntilSettled turned into a short requeue, by controller (the UntilSettled's Name).")
