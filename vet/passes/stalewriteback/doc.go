// Package stalewriteback defines an Analyzer that reports writes that put a
// stale cached copy back over the server's newer object.
//
// # Analyzer stalewriteback
//
// stalewriteback: report finalizer removals merged from a cached copy, and statuses copied across a conflict retry
//
// Two ways a controller overwrites what others wrote since its cache read:
//
//   - It removes its finalizer from a copy read from the informer cache and
//     writes it with a merge patch (client.MergeFrom) without optimistic
//     locking. A JSON merge patch replaces the whole finalizers list, so a
//     finalizer another controller added since the cached read is removed
//     with it; with Update and a resourceVersion that was cleared, every
//     stale field is written back.
//   - Inside a conflict retry, it re-reads the object and then copies the
//     status from the copy read before the retry (x.Status = cached.Status):
//     the retry succeeds, with the old status.
package stalewriteback
