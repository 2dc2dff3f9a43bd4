// Package phase runs a reconcile as a state machine over an object's phase,
// dispatching on a phase pinned at entry and advanced only by writes the API
// server acknowledged.
//
// # The race
//
// In the incident (see the racesafe package) the delete flow wrote
// status.phase = Deleting, then called a helper that re-read the object from
// the informer cache into the same pointer. The cache had not seen the write
// yet, so the pointer held the old phase, Failed, again, and
//
//	switch WorkPhase(item.Status.Phase) {
//	case WorkDeleting:
//		return executeUninstall(ctx, item)
//	default:
//		return reconcile.Result{}, nil
//	}
//
// dispatched on it, fell into default, and ended the reconcile for good. The
// hand fix kept the phase in a local variable that only a successful write
// advanced, and made default requeue. A [Machine] does both, for every phase:
//
//	m, err := phase.New(phase.Options[*corev1.Pod, WorkPhase]{
//		Name:   "workitem",
//		Get:    func(p *corev1.Pod) WorkPhase { return WorkPhase(p.Status.Phase) },
//		Set:    func(p *corev1.Pod, ph WorkPhase) { p.Status.Phase = corev1.PodPhase(ph) },
//		Writer: statusupdate.New[*corev1.Pod](c, c, statusupdate.Options{}),
//		Handlers: map[WorkPhase]phase.Handler[*corev1.Pod, WorkPhase]{
//			WorkFailed: func(_ context.Context, s *phase.Step[*corev1.Pod, WorkPhase]) (phase.Decision, error) {
//				fmt.Println("in", s.Phase(), "-> start deleting")
//				return phase.Transition(WorkDeleting), nil
//			},
//			WorkDeleting: func(_ context.Context, s *phase.Step[*corev1.Pod, WorkPhase]) (phase.Decision, error) {
//				stale.DeepCopyInto(s.Object()) // the incident's r.Get into the same pointer
//				fmt.Println("in", s.Phase(), "although the object reads", s.Object().Status.Phase)
//				return phase.WaitForEvent("uninstall job finishes"), nil
//			},
//		},
//		Transitions: map[WorkPhase][]WorkPhase{
//			WorkFailed:   {WorkDeleting},
//			WorkDeleting: {WorkDeleted},
//		},
//		Terminal: []WorkPhase{WorkDeleted},
//		Interval: requeue.Fixed(30 * time.Second),
//	})
//
// # Fewer writes
//
// A transition can carry the status changes that go with it, and a flow can
// end by releasing the object instead of writing a terminal phase nobody
// sees once the object is gone. The delete flow then takes two writes:
//
//	WorkFailed: func(context.Context, *phase.Step[*corev1.Pod, WorkPhase]) (phase.Decision, error) {
//		return phase.TransitionWith(WorkDeleting, func(p *corev1.Pod) error {
//			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
//				Type: "Uninstalling", Status: corev1.ConditionTrue,
//			})
//			return nil
//		}), nil
//	},
//	WorkDeleting: func(context.Context, *phase.Step[*corev1.Pod, WorkPhase]) (phase.Decision, error) {
//		// executeUninstall has finished.
//		return phase.Release(func(p *corev1.Pod) error {
//			controllerutil.RemoveFinalizer(p, "example.com/uninstall")
//			return nil
//		}), nil
//	},
//
// # Guarantees
//
//   - Pinned: the phase is read once, when Reconcile starts, from the
//     machine's private copy of the object. Handlers see it through
//     [Step.Phase]. What a handler or a helper does to the object, including
//     a stale cache read into the same pointer, cannot change which handler
//     runs or which transition is checked.
//   - Private copy: the machine keeps its own deep copy of the object it
//     pinned and, after each acknowledged write, of the object the server
//     returned. Transitions, [TransitionWith], [Release] and [Step.Patch]
//     compute their writes against that copy, never against a pointer
//     handlers hold. [Step.Object] returns a separate copy that handlers may
//     read and change without effect on what is written or on the pin. An
//     object that cannot be copied is [ErrObjectCopy], not a panic.
//   - Compare-and-swap: a transition, a [Release] and a [Step.Patch] are
//     written only if the object being written (the machine's copy on the
//     first try, the live object the Writer re-read after a conflict) is
//     still in the pinned phase. Otherwise nothing is written and the write
//     fails with a [*PhaseMovedError] naming From, To and Live (errors.Is
//     ErrPhaseMoved and expectations.ErrStale, so requeue.OnStale turns it
//     into a short requeue): Reconcile returns it for a transition or a
//     Release and runs no other handler, Step.Patch returns it to its
//     handler. The next reconcile dispatches on the live phase.
//   - One incarnation, through a *statusupdate.Patcher: when the object
//     re-read after a conflict is another incarnation (another UID: the
//     pinned object was deleted and a new one created under its name), the
//     write fails with the Patcher's *statusupdate.IncarnationError inside
//     the [*WriteError], nothing is written and no other handler runs, even
//     when the new object is in the pinned phase.
//   - Advanced only by an acknowledged write: a transition is acknowledged
//     only if the [Writer] returned without error an object that carries the
//     new phase at another resourceVersion than the one sent. Only then does
//     the pin move, and the next handler receives a copy of the object the
//     server returned. A Writer error, or an answer that does not
//     acknowledge the transition, is a [*WriteError] with from and to,
//     unwrapping to the cause (so apierrors.IsConflict still works) or to
//     [ErrPhaseNotWritten], and nothing moves.
//   - One write with: [TransitionWith] carries other changes, such as a
//     condition, in the transition's write. Its function runs inside the
//     same Writer.Patch call, after the compare-and-swap check and Set, on
//     the copy being written: one request, one resourceVersion.
//   - Released: [Release] ends a flow by writing its function's change,
//     typically removing the finalizer, through Writer.PatchObject,
//     compare-and-swap like a transition, instead of writing a terminal
//     phase. It is acknowledged only if the Writer returned without error an
//     object at another resourceVersion than the one sent, or one that shows
//     the object removed (deletion requested, its last finalizer taken by
//     this write); otherwise it is a [*WriteError] with
//     [ErrReleaseNotWritten]. After an acknowledged release the reconcile
//     ends with an empty result.
//   - Checked: a transition that [Options].Transitions does not list is a
//     [*TransitionError] (errors.Is ErrTransitionNotAllowed) and is not
//     written; so is a transition from a phase to itself (errors.Is
//     ErrSelfTransition too), which [New] refuses in the table. [Step.Patch],
//     [TransitionWith] and [Release] refuse a function that changes the
//     phase ([*PhaseChangeError]); [TransitionWith] and [Release] with a nil
//     function, or one that takes another type than the machine's objects,
//     are [ErrInvalidDecision]. [New] refuses options whose handlers,
//     transitions and terminal phases do not name each other consistently.
//   - Chained and bounded: a handler may transition and the next handler runs
//     in the same reconcile (Failed, then Deleting on the written object), at
//     most [Options].MaxSteps transitions; at the bound the machine requeues
//     after Interval, logged.
//   - Never silent: a non-terminal phase ends a reconcile with a requeue, an
//     error, a [WaitForEvent] that names its event, or an acknowledged
//     [Release]. [Done] or an unnamed wait in a non-terminal phase becomes a
//     requeue after [Options].Interval, logged and counted; so does a phase
//     with no handler (unless [Options].Unknown handles it). The interval is
//     never zero.
//   - Observable: transitions are logged with from and to, releases with
//     their phase, through log.FromContext(ctx), and counted on controller-runtime's metrics
//     registry: racesafe_phase_transitions_total{controller,from,to} (only
//     acknowledged transitions), racesafe_phase_releases_total{controller,from}
//     (only acknowledged releases), racesafe_phase_unknown_total{controller,phase}
//     and racesafe_phase_floor_total{controller,phase,reason}.
//   - Safe with nil: a nil object is [ErrNilObject], not a panic.
//
// # What it does not do
//
//   - It does not read the object. Reconcile receives it (from
//     reconcile.AsReconciler, or the caller's own Get); whether that read was
//     stale is package expectations' business. A phase pinned from a stale
//     read is replayed from the old phase, and the compare-and-swap refuses
//     its writes with a [*PhaseMovedError] once the Writer's optimistic lock
//     has shown the live object.
//   - It does not make writes safe by itself: the Writer does.
//     *statusupdate.Patcher never writes into the caller's object, sends the
//     resourceVersion as a precondition and re-reads the API server, not the
//     cache, after a conflict. A Writer without that precondition cannot see
//     that the server's phase moved.
//   - It does not retry a failed write inside the reconcile; the error goes
//     to controller-runtime's rate limiter.
//   - It does not persist anything beyond what handlers write, start
//     goroutines or hold per-object state between reconciles.
package phase
