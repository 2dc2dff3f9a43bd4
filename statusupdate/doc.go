// Package statusupdate writes an object's status, or the object itself, with
// a JSON merge patch computed from the object the caller holds, and returns the
// object as the API server wrote it. It never reads the informer cache.
//
// # The race
//
// In the incident (see the racesafe package), every status write began with a
// Get into the caller's pointer:
//
//	func (r *Controller) updateStatus(ctx context.Context, item *v1.WorkItem, phase Phase) error {
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
//	item, err := p.Patch(ctx, item, func(w *v1.WorkItem) error {
//		w.Status.Phase = phase
//		return nil
//	})
//
// # Guarantees
//
//   - Caller's object untouched: the object passed to [Patcher.Patch] or
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
//   - Live on conflict: a 409 Conflict is resolved by reading the object from the
//     API server (apiReader, the manager's GetAPIReader()), never from the cache,
//     re-running mutate on that fresh copy and patching again, with the bounded
//     backoff of [Options].Backoff. When the budget is spent the error is a
//     [*ConflictError] that says how many attempts were made;
//     errors.Is(err, [ErrConflictRetriesExhausted]) and apierrors.IsConflict(err)
//     both hold.
//   - Stingy: a mutation that changes nothing sends nothing. An empty merge patch
//     ({}) is detected before any request; the result is then a copy of the input.
//   - Transparent errors: NotFound, Forbidden, Invalid, context and mutate errors
//     are wrapped with %w and name the object, so apierrors.IsNotFound and
//     errors.Is keep working. A mutate error causes no write.
//   - Recorded: with [Options].Expectations set, every successful write is
//     reported with the written object: ExpectWrite, or ExpectDeletion when the
//     write removed the last finalizer of an object being deleted. The server
//     then deletes the object and answers with the object as sent, at the
//     resourceVersion it was sent with: no cache will ever show a newer one.
//   - Observable: writes are logged with their patch body at V(1) through
//     log.FromContext(ctx), no-ops as "unchanged, nothing sent"; every attempt is
//     counted in racesafe_statusupdate_patches_total on controller-runtime's
//     metrics.Registry.
//
// # What it deliberately does not do
//
//   - No server-side apply. A merge patch from the held object is what the
//     incident's code meant to send; apply configurations are a different tool.
//   - [Patcher.Patch] writes only the status subresource. Changes that mutate
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
