// Package expectations tells a reconcile which cached reads are older than
// its own writes.
//
// # The race
//
// A controller writes an object and the API server answers with the new
// resourceVersion. Its informer cache learns of the write only when the watch
// event arrives, milliseconds or, under load, minutes later. A Get from the
// cache in between returns the object as it was before the write. Acting on
// that snapshot, or copying it over the object the server returned, undoes
// the controller's own decision: in the incident of package racesafe, a
// deleting object read back as Failed, matched no case, and kept its
// finalizer forever.
//
// A Tracker closes the window. Feed it what the server returned from each
// write (ExpectWrite) or deletion (ExpectDeletion); check what the cache
// returns (Check, CheckAbsent, or a Reader that does it on every Get). A read
// older than the write comes back as a *StaleError, and the reconcile
// requeues instead of acting on it:
//
//	if err := c.Status().Update(ctx, item); err != nil {
//		return ctrl.Result{}, err
//	}
//	_ = tracker.ExpectWrite(item) // item now holds the server's answer
//	...
//	if err := reader.Get(ctx, key, item); errors.Is(err, expectations.ErrStale) {
//		return ctrl.Result{RequeueAfter: time.Second}, nil
//	}
//
// # Guarantees
//
//   - Exact: a cached object is stale if and only if its resourceVersion is
//     lower than the newest one recorded for its key, compared with
//     resourceversion.CompareResourceVersion; or it is the incarnation
//     recorded as deleted; or it is an earlier incarnation (another UID with
//     a lower resourceVersion). Nothing else is reported stale.
//   - Monotonic: an expectation only moves forward. A late response with a
//     lower resourceVersion never lowers it.
//   - Strict: a resourceVersion that cannot be ordered (empty, leading zero,
//     not digits) is a *ResourceVersionError, never taken as fresh; nil
//     objects and objects without a name are errors, never panics.
//   - Live: no expectation outlives its TTL (five minutes by default), and a
//     NotFound is never stale, so a broken watch or a deleted object delays a
//     reconcile by at most the TTL.
//   - Bounded: a satisfied expectation is dropped by the check that sees it;
//     an expired one by the next check of its key or by a sweep that a write
//     runs at most once per TTL. Memory follows the writes in flight.
//   - Cheap: checking an object with no expectation, or a fresh one, does not
//     allocate and takes a read lock on one of 64 shards.
//   - Observable: on controller-runtime's metrics registry, per tracker name,
//     racesafe_expectations_pending, _stale_reads_total, _satisfied_total,
//     _expired_total, and _catch_up_seconds, the informer lag seen in
//     production.
//
// # What it does not do
//
//   - It does not block. controller-runtime's
//     CacheOptions.EnableReadYourWritesConsistency parks the reading
//     goroutine until the cache catches up, bounded only by the context; a
//     stalled watch then holds a worker. Here the caller requeues, and the
//     worker serves other objects.
//   - It does not check List: a list is one snapshot of many objects; Check
//     the items you act on.
//   - It does not replace optimistic locking. It makes stale reads visible to
//     the reader; only the resourceVersion precondition of an update stops a
//     stale write at the server, and only AlreadyExists stops a second create
//     after the NotFound that CheckAbsent lets through.
//   - It does not start goroutines or talk to the API server.
//
// One Tracker serves one kind of object: keys are namespace/name. Predicate
// wakes a controller whose filters would drop the status-only event that
// satisfies a pending expectation.
package expectations
