// Package racesafe is a set of race-safe reconcile primitives for Kubernetes
// operators built on controller-runtime.
//
// # The incident
//
// A WorkItem controller handled deletion like this, in one reconcile:
//
//  1. It wrote status.phase = Deleting to the API server. The write succeeded.
//  2. A helper that synced a condition called r.Get(ctx, key, item) into the
//     same pointer before its own patch. The Get was served by the informer
//     cache, which had not yet seen the watch event of step 1, so item was
//     overwritten with the old snapshot: phase = Failed.
//  3. The reconcile then did switch item.Status.Phase, matched no case for
//     Failed during deletion, and fell into default: return ctrl.Result{}, nil.
//  4. Its predicates ignored status-only changes, so no later event woke the
//     object. It kept its finalizer and stayed in Terminating forever.
//
// The window between a write and the cache seeing it always exists; it only
// showed in production under a 30x burst of reconciles, when watch propagation
// slowed down.
//
// # Which package stops which step
//
//   - [github.com/racesafe/racesafe/statusupdate] stops step 2: a status write
//     returns the object the server wrote, never re-reads the cache into the
//     caller's pointer, and resolves conflicts by reading the API server.
//   - [github.com/racesafe/racesafe/expectations] makes step 2 visible: it
//     remembers the resourceVersion each write produced, so a cached read older
//     than that is known to be stale; its drop-in Client serves the write
//     itself instead.
//   - [github.com/racesafe/racesafe/phase] stops step 3: the phase a reconcile
//     dispatches on is pinned at entry and advanced only by a successful write.
//   - [github.com/racesafe/racesafe/requeue] stops step 4: no branch can end a
//     reconcile silently; unknown or stale states come back after a bounded,
//     configurable delay.
//   - [github.com/racesafe/racesafe/wire] stops steps 2 and 4 for a
//     controller whose reconcile logic stays as it is: one builder chain gives
//     it a client whose reads serve its own writes and an owner guard whose
//     refusals come back as short requeues.
//   - [github.com/racesafe/racesafe/racetest] makes the race reproducible in
//     tests: it delays watch events on a real API server and injects conflicts.
//
// The WorkItem controller of the incident, rebuilt from these packages next to
// the original code, is in examples/workitem.
package racesafe
