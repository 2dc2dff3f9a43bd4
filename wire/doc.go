// Package wire wires a controller to racesafe in the shape of
// controller-runtime's builder: one chain from the manager, the same
// methods, and a client that serves the controller's own writes.
//
// # The race
//
// A controller reads from an informer cache that learns of its own writes
// only when the watch event arrives. A Get after a write can hand back the
// object as it was before the write, and a List after a Create can miss the
// child it just made. The drop-in expectations.Client closes both windows,
// and an OwnerTracker refuses an owner whose children's cache lags; but
// wiring them by hand takes a dozen order-sensitive lines (the tracker on
// the For kind, the client given the tracker, the source that wakes owners,
// the guard at the reconcile's entry, refusals turned into short requeues,
// the controller's name given to each). Builder does it in the chain a
// controller already has:
//
//	b := wire.ControllerManagedBy(mgr)
//	r.Client = b.Client()
//	return b.Named("workitem").
//		For(&v1.WorkItem{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
//		Owns(&corev1.ConfigMap{}).
//		Complete(r)
//
// # Guarantees
//
//   - One name: the controller's name (Named, or the For kind in lower case,
//     as controller-runtime derives it) is the controller label of the
//     Client's and the OwnerTracker's metrics.
//   - Guarded: before the reconciler runs, the For object is read through
//     the Client and checked with the OwnerTracker of the For kind; the
//     OwnerTracker's Source is watched, so an owner refused because its
//     children's cache lags is woken when it catches up.
//   - No backoff for a cache behind: a refusal from the guard, or an error
//     from the reconciler that matches expectations.ErrStale, ends the
//     reconcile with RequeueAfter Options.StaleRequeue and a nil error, so
//     the rate limiter's backoff does not grow. Every other error and result
//     is the reconciler's, unchanged.
//   - Every form: the guard waits on the informers of the forms Owns
//     declares (the metadata-only one with builder.OnlyMetadata), whatever
//     form the reconciler writes, and reads or starts no other.
//   - Primed at election: no object passes the guard until this replica,
//     once it leads, has listed the For kind live and kept, in its Client,
//     the server's copy of each object its cache lags and the deletion of
//     each it still shows (expectations.Client.Prime): a warm standby
//     whose cache missed its predecessor's last write reads that write, not
//     the phase the object left. With at least one Owns, it also lists the
//     owned kinds and records which of its predecessor's children its cache
//     lags (OwnerTracker.Prime), so it does not make a second child. If a
//     List keeps failing (RBAC that forbids a cluster-wide List, five
//     attempts), the error is logged and the controller goes on with its
//     cache and its own writes.
//   - Ambiguous creates: a child Create with generateName that the server
//     applied but answered with an error makes the owner wait until the
//     cache has reached a version read live after it (see
//     expectations.Client).
//   - Deletions finished on stop (opt-in): with Options.FinishDeletion, a
//     reconcile of a For object marked for deletion is not cancelled when
//     the manager stops; it runs on, up to FinishDeletion, so the write
//     that records work done outside the API server is sent.
//   - Strict: a nil manager, a missing For, a nil reconciler, a negative
//     StaleRequeue or FinishDeletion, or a second Complete is an error
//     matching ErrBuilder, never a panic.
//
// An owner that is gone from the cache is forgotten by the OwnerTracker
// before the reconciler runs, which then sees the NotFound itself.
//
// # What it does not do
//
//   - It does not poll settled objects: nothing is requeued that the
//     reconciler did not ask for, except refusals.
//   - It does not cover a write that lands after the election's live List
//     (a predecessor that crashed mid-request): the server refuses the new
//     leader's next write to that object when it carries the
//     resourceVersion it read (a conflict); a side effect done before that
//     write is not refused.
//   - It does not make a reconcile that runs on after the stop safe against
//     a new leader: that is what compare-and-swap writes are for.
//   - It does not change the reconciler's own reads: they are as safe as the
//     client it reads through, so assign Client() to it.
package wire
