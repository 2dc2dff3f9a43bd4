// Package phase runs a reconcile as a state machine over an object's phase,
// dispatching on a phase pinned at entry and advanced only by successful
// writes.
//
// # The race
//
// In the incident (see the racesafe package) the delete flow wrote
// status.phase = Deleting, then called a helper that re-read the object from
// the informer cache into the same pointer. The cache had not seen the write
// yet, so the pointer held the old phase, Failed, again, and
//
//	switch item.Status.Phase {
//	case PhaseDeleting:
//		return r.executeUninstall(ctx, item)
//	...
//	default:
//		return ctrl.Result{}, nil
//	}
//
// dispatched on it, fell into default, and ended the reconcile for good. The
// hand fix kept the phase in a local variable that only a successful write
// advanced, and made default requeue. A [Machine] does both, for every phase:
//
//	m, err := phase.New(phase.Options[*v1.WorkItem, v1.Phase]{
//		Name:   "workitem",
//		Get:    func(w *v1.WorkItem) v1.Phase { return w.Status.Phase },
//		Set:    func(w *v1.WorkItem, p v1.Phase) { w.Status.Phase = p },
//		Writer: statusupdate.New[*v1.WorkItem](mgr.GetClient(), mgr.GetAPIReader(), statusupdate.Options{}),
//		Handlers: map[v1.Phase]phase.Handler[*v1.WorkItem, v1.Phase]{
//			v1.PhaseFailed:   r.failed,   // returns phase.Transition(v1.PhaseDeleting)
//			v1.PhaseDeleting: r.deleting, // syncs a condition, then waits for the uninstall job
//		},
//		Transitions: map[v1.Phase][]v1.Phase{
//			v1.PhaseFailed:   {v1.PhaseDeleting},
//			v1.PhaseDeleting: {v1.PhaseDeleted},
//		},
//		Terminal: []v1.Phase{v1.PhaseDeleted},
//		Interval: r.syncStatusCheckInterval, // a requeue.Interval reading the live config
//	})
//
// # Guarantees
//
//   - Pinned: the phase is read from the object once, when Reconcile starts.
//     Handlers see it through [Step.Phase]. What a handler or a helper does
//     to the object, including a stale cache read into the same pointer,
//     cannot change which handler runs or which transition is checked.
//   - Advanced only by a write: a [Transition] is written through the
//     [Writer]; only when the write succeeds and the returned object carries
//     the new phase does the pin move, and the next handler receives the
//     object the server returned. On a failed write the error is returned
//     with from and to ([*WriteError], unwrapping to the cause, so
//     apierrors.IsConflict still works) and nothing moves.
//   - Checked: a transition that [Options].Transitions does not list is a
//     [*TransitionError] (errors.Is ErrTransitionNotAllowed) and is not
//     written. [Step.Patch] refuses a mutate that changes the phase
//     ([*PhaseChangeError]). [New] refuses options whose handlers,
//     transitions and terminal phases do not name each other consistently.
//   - Chained and bounded: a handler may transition and the next handler runs
//     in the same reconcile (Failed, then Deleting on the written object), at
//     most [Options].MaxSteps transitions; at the bound the machine requeues
//     after Interval, logged.
//   - Never silent: a non-terminal phase ends a reconcile with a requeue, an
//     error, or a [WaitForEvent] that names its event. [Done] or an unnamed
//     wait in a non-terminal phase becomes a requeue after [Options].Interval,
//     logged and counted; so does a phase with no handler (unless
//     [Options].Unknown handles it). The interval is never zero.
//   - Observable: transitions are logged with from and to through
//     log.FromContext(ctx), and counted on controller-runtime's metrics
//     registry: racesafe_phase_transitions_total{machine,from,to},
//     racesafe_phase_unknown_total{machine,phase} and
//     racesafe_phase_floor_total{machine,phase,reason}.
//   - Safe with nil: a nil object is [ErrNilObject], not a panic.
//
// # What it does not do
//
//   - It does not read the object. Reconcile receives it (from
//     reconcile.AsReconciler, or the caller's own Get); whether that read was
//     stale is package expectations' business. A phase pinned from a stale
//     read is replayed from the old phase, and the Writer's optimistic lock
//     turns the repeated transition into a conflict or a no-op.
//   - It does not make writes safe by itself: the Writer does.
//     *statusupdate.Patcher never writes into the caller's object and
//     re-reads the API server, not the cache, after a conflict.
//   - It does not retry a failed write inside the reconcile; the error goes
//     to controller-runtime's rate limiter.
//   - It does not persist anything beyond the phase field, start goroutines
//     or hold per-object state between reconciles.
package phase
