// Package statusupdate writes an object's status, or the object itself, with
// a JSON merge patch computed from the object the caller holds, and returns the
// object as the API server wrote it. It never reads the informer cache.
//
// # The race
//
// In the incident (see the racesafe package), every status write began with a
// Get into the caller's pointer:
//
//	func (r *Controller) updateStatus(ctx context.Context, item *v1.WorkItem, phase v1.Phase) error {
//		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
//			if err := r.Get(ctx, client.ObjectKeyFromObject(item), item); err != nil {
//				return err
//			}
//			before := item.DeepCopy()
//			item.Status.Phase = phase
//			return r.Status().Patch(ctx, item, client.MergeFrom(before))
//		})
//	}
//
// r.Get was served by the informer cache. Right after the previous write the
// cache had not seen it yet, so the Get overwrote item with an older snapshot,
// and the rest of the reconcile dispatched on a phase that was no longer true.
// Nothing failed; the object was silently rolled back in memory.
//
// A status write needs no Get. The caller already holds the object, and the
// server's answer to a patch is the object as written, with its new
// resourceVersion:
//
//	p := statusupdate.New[*v1.WorkItem](mgr.GetClient(), mgr.GetAPIReader(), statusupdate.Options{})
//	item, err := p.PatchStatus(ctx, item, func(w *v1.WorkItem) error {
//		w.Status.Phase = phase
//		return nil
//	})
//
// # Guarantees
//
//   - Caller's object untouched: the object passed to [Patcher.PatchStatus] or
//     [Patcher.PatchObject] is never written to, on success, conflict, error or
//     no-op. mutate runs on a deep copy; the result is a different object.
//   - What you get is what the server wrote: the returned object is decoded from
//     the server's answer to the patch into an empty object, so it carries the new
//     resourceVersion and nothing the server dropped.
//   - Optimistic: every patch carries metadata.resourceVersion as a
//     precondition (unless [Options].DisableOptimisticLock), so a write made by
//     someone else since the caller's read is never overwritten. A merge patch
//     replaces whole lists such as status.conditions; without the precondition,
//     two writers of different conditions would erase each other's.
//   - Live on conflict: a 409 Conflict answered by the server is resolved by
//     reading the object from the API server (apiReader, the manager's
//     GetAPIReader()), never from the cache, re-running mutate on that fresh
//     copy and patching again, with the bounded backoff of [Options].Backoff.
//     When the budget is spent the error is a [*ConflictError] whose Attempts
//     is the number of patches sent, every one answered 409;
//     errors.Is(err, [ErrConflictRetriesExhausted]) and apierrors.IsConflict(err)
//     both hold.
//   - One incarnation: when the object re-read after a conflict has another
//     UID than the caller's (the caller's was deleted and a new object of its
//     name created), the call stops with an [*IncarnationError],
//     errors.Is(err, [ErrIncarnation]), and nothing is written to the new
//     object, however alike the two are. The first patch cannot reach the new
//     object either while the optimistic lock is on: it carries the old
//     object's resourceVersion. An object without a UID matches any.
//   - Mutate errors end the call: an error returned by mutate ends the call at
//     once. Nothing more is sent and nothing is retried, even if the error is
//     itself a 409 Conflict; it is returned wrapped with %w, so errors.As finds
//     mutate's own error, and it is never a [*ConflictError].
//   - Stingy: a mutation that changes nothing sends nothing. An empty merge patch
//     ({}) is detected before any request; the result is then a copy of the input.
//   - Transparent errors: NotFound, Forbidden, Invalid, context and mutate errors
//     are wrapped with %w and name the object, so apierrors.IsNotFound and
//     errors.Is keep working.
//   - Missing subresource named: a kind without a status subresource answers a
//     status patch with NotFound although the object exists. On NotFound,
//     [Patcher.PatchStatus] reads the object once through the API reader; if the
//     object patched is there (the same UID, when the caller's copy has one),
//     the error is a [*SubresourceError] that names the kind and matches
//     [ErrNoStatusSubresource]. It is not NotFound, so client.IgnoreNotFound
//     does not drop the write. If the object is gone, the NotFound stays; if
//     the read fails, the error wraps the read's error, not the NotFound.
//   - Bad input is an error: a nil or typed nil object ([ErrNilObject]), a nil
//     mutate ([ErrNilMutate]), an object without a name ([ErrNoName]), an
//     object that cannot be copied, such as an unstructured object holding a Go
//     int ([ErrInvalidObject]), or, with the lock, an object without a
//     resourceVersion ([ErrNoResourceVersion]) returns an error, sends nothing
//     and never panics.
//   - Recorded: with [Options].Expectations set, every successful write is
//     reported with the written object: ExpectDeletion when the server's answer
//     shows the object was removed, ExpectWrite otherwise. After a conflict,
//     the live object the API reader returned is reported with ExpectWrite
//     before mutate runs on it, so a cache copy older than what the API server
//     showed is known stale. A Recorder error after a write comes back with
//     the written object; one on the re-read ends the call, with nothing more
//     sent.
//   - Deletion only when removed: removing the last finalizer of an object
//     being deleted removes it only if no grace period is left. The server
//     answers a removal with the object as it was removed: deletionTimestamp,
//     no finalizers, and the resourceVersion the patch was computed from (with
//     the lock, the one it was sent with), since nothing newer was ever stored;
//     such an answer is a deletion. A write that leaves the object stored gets
//     a new resourceVersion, as a Pod in graceful deletion does: it lives on
//     until the kubelet deletes it. When the answer has a deletionTimestamp and
//     no finalizers but a new resourceVersion (that Pod, a write without the
//     lock to an object that had moved on, the fake client), one live read
//     through the API reader decides: gone, or replaced by an object with
//     another UID, is a deletion; found is a write.
//   - Observable: writes are logged with their patch body at V(1) through
//     log.FromContext(ctx), no-ops as "unchanged, nothing sent"; every attempt is
//     counted in racesafe_statusupdate_patches_total{controller,target,result}
//     (controller: Options.Name) on controller-runtime's
//     metrics.Registry.
//
// # What it deliberately does not do
//
//   - No server-side apply. A merge patch from the held object is what the
//     incident's code meant to send; apply configurations are a different tool.
//   - [Patcher.PatchStatus] writes only the status subresource. Changes that mutate
//     makes outside status are sent but dropped by the server (a custom
//     resource's status keeps nothing else; pods/status drops spec but keeps
//     labels and annotations), and the returned object shows what was kept.
//     Use [Patcher.PatchObject] for finalizers, labels, annotations and spec;
//     it writes the main resource, where the server in turn ignores status.
//   - It does not read the cache, ever, and it does not refresh the caller's
//     object: the caller replaces its pointer with the returned one.
//   - It does not merge concurrent changes itself: on a conflict it re-runs mutate
//     on the live object, so mutate must compute its change from the object it is
//     given, not from values captured from the stale one.
package statusupdate
