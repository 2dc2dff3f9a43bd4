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
//   - a body that reads into a fresh variable from the informer cache,
//     after the enclosing function wrote that object (its key names a
//     written variable) or an object of its kind on the same path, gets
//     the pre-write copy back until the informer delivers the function's
//     own write, and conflicts again: read from the API reader, or keep
//     the object the write returned. A cached re-read with nothing written
//     before it is the canonical retry and is not reported: a conflict
//     then comes from another writer, whose change the informer usually
//     delivers within the retry's backoff;
//   - a body that calls out of the cluster (an HTTP request, a command)
//     repeats that call on every conflict.
//
// Reads into a variable of the enclosing function are left to
// regetwritten, which judges them by what the reconcile wrote before.
package conflictretry
