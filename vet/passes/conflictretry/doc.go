// Package conflictretry defines an Analyzer that reports conflict retries
// that cannot help, or that repeat a side effect.
//
// # Analyzer conflictretry
//
// conflictretry: report RetryOnConflict bodies that retry nothing, re-read the cache, or act outside the cluster
//
// retry.RetryOnConflict runs its function again when the write in it fails
// with 409 Conflict: the object changed since it was read. A retry helps
// only if it reads the object again, from a source newer than the one that
// conflicted:
//
//   - a body that writes without reading sends the same stale object again,
//     and conflicts again: it retries nothing;
//   - a body that reads into a fresh variable from the informer cache
//     usually gets the same stale copy back (the conflict says the cache is
//     behind): read from the API reader, or requeue;
//   - a body that calls out of the cluster (an HTTP request, a command)
//     repeats that call on every conflict.
//
// Reads into a variable of the enclosing function are left to
// regetwritten, which judges them by what the reconcile wrote before.
package conflictretry
