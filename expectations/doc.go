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
//	// item now holds the server's answer.
//	if err := tracker.ExpectWrite(item); err != nil {
//		return ctrl.Result{}, err
//	}
//	// Later, in this reconcile or the next one:
//	if err := reader.Get(ctx, key, item); errors.Is(err, expectations.ErrStale) {
//		return ctrl.Result{RequeueAfter: time.Second}, nil
//	} else if err != nil {
//		return ctrl.Result{}, err
//	}
//
// One Tracker serves every kind. Expectations are kept per kind, namespace
// and name: a Pod and the ConfigMap of its name are two objects. A typed
// object's kind comes from Options.Scheme, by its Go type. Without one, the
// tracker takes the scheme of the clients it is given (NewReader, Prime,
// statusupdate.New with it in Options.Expectations), then client-go's, then
// the object's TypeMeta: expectations.Options{} with NewReader(mgr.GetClient(),
// tracker) knows the manager's kinds, your own included.
//
// # Owned objects and Lists
//
// A controller that creates children with generateName and decides from a
// cached List of them creates a second child when the List comes from a
// cache that has not seen the first Create: the ReplicaSet problem. An
// OwnerTracker records each write of an owned object against its owner (key
// and UID) and the owned kind (ExpectWrite, ExpectDeletion; ExpectOwnedWrite and ExpectOwnedDeletion
// find the owner from the controller reference), and the owner's reconcile
// asks, before any List, whether the cache of every kind recorded is at
// least that new:
//
//	if err := owners.Check(ctx, &rs); err != nil {
//		return requeue.OnStale(err, time.Second)
//	}
//
// The cache's version of a kind is client-go's store version,
// LastStoreSyncResourceVersion, where the informer exposes its store (a
// cluster-wide cache, AtomicFIFO on). Where it does not (a multi-namespace
// cache) or answers "" (AtomicFIFO off), it is the highest resourceVersion an
// event handler saw on the owned object's stream: a watch delivers one
// stream in resourceVersion order; one informer is one stream for every
// namespace, and a multi-namespace cache runs one stream per namespace, so
// the maximum is kept per informer, or per namespace of a multi-namespace
// cache. (A relist is not such a stream: with AtomicFIFO off,
// client-go may hand a large list's items out in key order, so the handler's
// maximum may run ahead of items of that list not yet delivered. The store's
// version, the default path, has no such gap.) A deletion is awaited by UID,
// until the cache shows the object gone, replaced, or terminating.
//
// A controller may write a kind in one form and List it in another (a typed
// Create, and Owns(&corev1.Secret{}, builder.OnlyMetadata)). OwnerOptions.Owns
// declares the forms the controller reads: a record then waits until every
// declared form of its kind has caught up, and the tracker reads no other
// informer. Without Owns, it reads the form of the kind's first record.
//
// # A drop-in client
//
// Client wraps a controller's client.Client and gives it session
// consistency (read-your-writes and monotonic reads for one client): it keeps
// the server's answer to each of its writes until its cache has shown it,
// and serves every Get and List from whichever is newer, the cache or its own
// last write. It never waits and never refuses a write it can show, so the
// incident's re-Get reads the phase it just wrote, and a List right after a
// Create shows the child. A controller that reads and writes through it
// changes one line:
//
//	c, err := expectations.ForManager(mgr, expectations.ClientOptions{Name: "replicaset"})
//
// # The rule
//
// Every case a Client reads follows one rule (rule.go). For each object
// the Client keeps at most one entry: the newest state it knows the
// server had, from its writes' answers, from a live read where an answer
// does not say (after a Delete, a NotFound, an answer terminating without
// finalizers), or from a copy a read of another form returned. A read in
// one form serves the cache's copy when it is at least as new as the
// entry; it serves the cache's NotFound when the entry is a deletion or
// when that form's cache has delivered every event up to the entry's
// version in its namespace (another writer's deletion); otherwise it
// serves the entry, or refuses with ErrStale where the entry cannot be
// shown. A copy newer than the entry becomes the entry, so no form reads
// older afterwards, and so does the deletion of the incarnation written
// that one form's informer delivers; where the Client reads a kind in more
// than one form, the version a read of one form served is kept as an entry too (without the
// object, and not pending), for the same reason. A deletion is kept as the
// newest version the name is known free at, from a live read or from a
// later incarnation's delete event an informer delivered: every copy at or
// below it is gone, whichever incarnation. A form's cache has caught up with a
// deletion once it shows NotFound and has delivered a version the object
// existed at, or that incarnation's delete event: a cache that has not
// delivered even the object's create shows NotFound too. A form whose
// informer the Client's handler joined after a write cannot tell a
// deletion it delivered before from a create not delivered yet: its
// NotFound for that write is taken to the server once. A write that
// ended ambiguously keeps the newest version known until its read back
// tells: the cache's copy is served only once newer. Lists judge each
// item, and each entry they do not list, by the same rule.
//
// With an OwnerTracker (ClientOptions.Owners), Guard checks the owner at the
// reconcile's entry; without one, Guard returns the reconciler unchanged.
//
// # A new leader
//
// A tracker starts empty: a replica that has just become leader, or a
// restarted process, knows nothing of the writes made before it, and its
// cache may still lag them (a standby whose informers ran before it led).
// Prime, once, before the first item is acted on, lists the kind live and
// records what the cache lags: every cached copy older than the server's,
// and every cached object the server had deleted, is then stale until the
// cache has caught up:
//
//	res, err := tracker.Prime(ctx, mgr.GetAPIReader(), mgr.GetCache(), &appsv1.ReplicaSetList{})
//
// OwnerTracker.Prime does the same for the owned kinds declared in
// OwnerOptions.Owns: each child the cache lags (missing, older, or deleted
// on the server) becomes a record of its owner, so a new leader's owner
// check waits for the children its predecessor created. With
// OwnerOptions.AwaitPrime, no owner passes until Prime has returned; wire
// sets both and primes at election. Client.Prime is the drop-in Client's
// own: the server's copy of each object its cache lags is kept as if the
// Client had written it, and served by Get and List until the cache shows
// it; wire primes its Client with the For kind at election.
//
// # Guarantees
//
//   - Exact: a cached object is stale if and only if an expectation is
//     recorded for its kind, namespace and name that its form has not caught
//     up with and that has not outlived the TTL, and the object is older than
//     it: its resourceVersion is lower than the one recorded, compared with
//     resourceversion.CompareResourceVersion; or it is the incarnation
//     recorded as deleted; or it is another incarnation (another UID; an
//     empty UID is unknown and matches any) whose resourceVersion is not
//     higher. A lower one is an earlier incarnation;
//     an equal one cannot be another object's, since one resourceVersion is
//     one write, and it was ours. Nothing else is reported stale.
//   - Kind-aware: nothing read of one kind can satisfy, drop or be refused
//     by the expectation of another kind. A typed object's kind is the one
//     Options.Scheme has for its Go type; when nil, the one the schemes of
//     the clients the tracker was given, or client-go's, have, or else the
//     one its TypeMeta names (see Options.Scheme); unstructured and
//     metadata-only objects carry theirs. An object
//     whose kind cannot be told is an ErrUnknownKind error from every call
//     that takes it and returns an error, never taken as fresh; Satisfied and
//     Predicate say false.
//   - Per form: controller-runtime keeps one informer per kind and form
//     (typed, *metav1.PartialObjectMetadata, *unstructured.Unstructured),
//     each with its own lag, and one Reader may serve them all. Each form
//     catches up on its own: a read in one form never satisfies or drops the
//     expectation for another, and a form that has caught up answers fresh
//     until the expectation is raised again.
//   - Monotonic: an expectation only moves forward. A late response with a
//     lower resourceVersion never lowers it.
//   - Strict: a resourceVersion that cannot be ordered (empty, zero, leading
//     zero, not digits) is a *ResourceVersionError from ExpectWrite,
//     ExpectDeletion and Check, whatever is recorded, expired or not: never
//     taken as fresh. Nil objects and objects without a name are errors,
//     never panics.
//   - Live: no expectation outlives its TTL (five minutes by default), and a
//     NotFound is never stale, so a broken watch or a deleted object delays a
//     reconcile by at most the TTL.
//   - Bounded: an expectation stops being pending when the first form catches
//     up with it. It is dropped when every form has caught up with it, by a
//     check or CheckAbsent in a form that has not once its TTL is over, or by
//     a sweep that writes run at most once per TTL, for any TTL up to the
//     largest time.Duration. Memory follows the writes of the last two TTLs.
//   - Cheap: checking an object with no expectation, or a fresh one, does not
//     allocate and takes a read lock on one of 64 shards; a form's first
//     fresh read takes that shard's write lock. The scheme is asked once per
//     Go type.
//   - Primed: after Prime, a cached copy older than the live List's copy,
//     or a cached object absent from it at a resourceVersion below the
//     List's, is stale as if this tracker had made the write; only that gap
//     is recorded, and a version Prime cannot order is a
//     *ResourceVersionError, never a guess. With a selector, a cached
//     object absent from the live List is read live by name: a deletion is
//     recorded only for an object gone or replaced by another UID, never
//     for one that stopped matching.
//   - Observable: on controller-runtime's metrics registry, per controller (the tracker's Name, in the controller label),
//     racesafe_expectations_pending, _stale_reads_total, _satisfied_total,
//     _expired_total, _sweeps_total, and _catch_up_seconds, the informer lag
//     seen in production.
//
// An OwnerTracker guarantees:
//
//   - Non-blocking: a cache behind is an *OwnerStaleError, errors.Is(err,
//     ErrStale), which requeue.OnStale turns into a short requeue without
//     rate-limiter backoff.
//   - Woken: Source, passed to builder.WatchesRawSource, enqueues the owner
//     when the owned kind's informer delivers what it waits for, once per
//     write recorded, or at the record itself when the informer had
//     delivered it first; it does not poll.
//   - Bounded: after the TTL a record is dropped and counted expired, and
//     Check returns nil; with LiveReadOnExpiry it returns an
//     *OwnerExpiredError once, which is not ErrStale: take that reconcile's
//     decision from the API reader. A Client's Guard (and wire) runs that
//     reconcile with LiveReadRequired set, and the Client Lists the kind
//     that waited, in its namespace, from its APIReader.
//   - Strict: a resourceVersion that cannot be ordered, written or cached,
//     is an *OwnerResourceVersionError, never ready.
//   - Exact per owner: records are kept per owner incarnation (UID). A
//     Check judges the records of its owner's UID and those recorded without
//     one, never another incarnation's, and no write for one incarnation
//     drops another's (a controller may clean up an old incarnation's
//     children after writing the new one's). Satisfied records are dropped
//     by the Check that sees them; Forget drops a deleted owner's records; a
//     sweep on the write path, at most once per TTL, drops the rest.
//   - Every form: with OwnerOptions.Owns, a record of a kind is satisfied
//     only when every declared form's informer has caught up, whatever form
//     was written; no other informer is read or started, and writes of a
//     kind not declared are not tracked (ErrNotOwned).
//   - Scoped: the children of a cluster-scoped owner are recorded under the
//     owner's name alone, when OwnerOptions.RESTMapper or a Client with these
//     Owners has told the tracker the owner kind's scope.
//   - Cheap: Check of an owner with nothing recorded does not allocate.
//   - Observable: racesafe_owner_expectations_skips_total{owner_kind,
//     owned_kind}, _expired_total, _cache_resource_version (best effort:
//     integer resourceVersions only) and _catch_up_seconds, per controller (label controller).
//
// A Client guarantees:
//
//   - Read-your-writes: after a successful Create, Update, Patch (any patch
//     type), server-side Apply, or Status() or SubResource() Update, Patch or
//     Apply, a Get of the object, typed, unstructured or
//     PartialObjectMetadata, returns the newer of the cached copy and the
//     server's answer to that write (resourceversion.CompareResourceVersion;
//     another UID wins only with a higher resourceVersion), as a copy the
//     caller owns. It never blocks, and a Get with nothing pending is the
//     cache's Get. The answer is handed out in the cache's form as far as
//     managedFields go: where the cache's copy has none (a cache built with
//     cache.TransformStripManagedFields), neither has the copy of the
//     write, and once the Client has seen that, it keeps its later writes
//     without them.
//   - Deletes: after a successful Delete, a Get is NotFound until the cache
//     shows the object gone, replaced by a later incarnation, or terminating
//     at a later resourceVersion. Where the object may still exist (the
//     caller's copy had finalizers or no resourceVersion, foreground
//     propagation, a Pod's grace period), a cached copy no newer than the one
//     deleted is refused with a *StaleError (errors.Is ErrStale). An Update or
//     Patch that removes the last finalizer of an object being deleted, and
//     that the server answers at the resourceVersion sent, is a deletion.
//   - Lists: a List is the cached list with this client's writes merged in,
//     within its namespace and label selector: created objects the cache
//     lacks are appended sorted by namespace and name, written ones replaced
//     by the newer answer, deleted ones removed. Where the merge cannot be
//     computed exactly (a field selector, Limit or Continue, a write known by
//     resourceVersion only, a deletion that may be terminating) and this
//     client has writes of that kind pending there, the List is a
//     *ListStaleError (errors.Is ErrStale), never a stale list. With nothing
//     pending, it is the cache's List.
//   - A subresource write with a body (client.WithSubResourceBody) keeps the
//     parent at the body's resourceVersion: a cached parent older than it is
//     refused until the cache shows it.
//   - Ambiguous writes: a Create, Update, Patch or Delete, or an Update or
//     Patch of a subresource (Status()), that failed with a
//     timeout, a 5xx or a broken connection is read back through
//     ClientOptions.APIReader and kept as the server has it; a connection
//     that was never made (refused, a failed dial) sent nothing and is not
//     ambiguous. An Update, Patch or Delete whose object the read back finds
//     gone (the write released its last finalizer, or another deleted it)
//     is kept as a deletion, as a Delete's: Get answers NotFound until the
//     cache drops the object, never the cache's copy from before the write. Where the read back fails too (the API server
//     unreachable), the object's Get and its kind's Lists in its namespace
//     are refused, and a refused read tries the read back again, at most
//     once a second, until it tells. Without an APIReader, or for an object
//     without a name, Lists of its kind in its namespace are refused until
//     the TTL (AmbiguousWrites reports it). A
//     Create without a name (generateName) of a child of the Owners' kind
//     is answered instead by one live List of its kind in the namespace
//     (metadata only). When no object of that owner incarnation by that
//     generateName is there, the Create was not applied and nothing is
//     kept. Otherwise the owner's Check refuses, and the kind's Lists stay
//     refused, only until every declared form of the cache has reached the
//     highest resourceVersion among those objects, where it shows the child
//     if the server applied it: a version the kind's own events deliver, so
//     a quiet namespace does not wait for the TTL.
//   - Recorded or said: a successful write whose answer cannot be kept is a
//     *NotRecordedError (errors.Is ErrNotRecorded), or, where the answer
//     names no object (DeleteAllOf, a subresource Create, an Apply answer
//     without name or resourceVersion), counted in
//     racesafe_client_writes_unrecorded_total{controller,verb}. Dry-run and
//     failed writes keep nothing. No write method passes through unseen:
//     Client implements client.Client without embedding it.
//   - Bounded: a write is dropped once every form of the cache has shown it,
//     or after the TTL, by the read that meets it or by a sweep on the write
//     path at most once per TTL.
//   - Observable: racesafe_client_reads_total{controller,served="cache",
//     "own_write", "live" or "refused"}, racesafe_client_caught_up_total and
//     racesafe_client_pending, per controller.
//   - Primed client: after Client.Prime, Get and List serve the live
//     List's copy of an object the cache holds older, and NotFound for one
//     the cache holds that the server had deleted, until the cache shows
//     it; objects the cache already shows are not kept.
//   - Guarded entry: CheckOwner matches ErrStale while the cache of anything
//     the client wrote for the owner is older than those writes; an owner
//     that is gone passes.
//
// # What it does not do
//
//   - It does not block. controller-runtime's
//     CacheOptions.EnableReadYourWritesConsistency parks the reading
//     goroutine until the cache catches up, bounded only by the context; a
//     stalled watch then holds a worker. Here the caller requeues, and the
//     worker serves other objects.
//   - A Tracker or a Reader does not check List: a list is one snapshot of
//     many objects; Check the items you act on, or List through a Client,
//     which merges its own writes in. A Client does not know what other
//     clients wrote: another controller's writes are seen when the cache
//     sees them.
//   - A Client keeps monotonic reads across forms once it has read a kind
//     in two forms through its session: the objects it holds an entry for
//     (its writes, a newer copy one form served after them, Prime's), and
//     the version one form served of any other object, which the other
//     forms must reach before they serve it (ErrStale until then; a
//     version kept from a read is not pending). Reads made while nothing
//     is pending and the Client has read one form only go to the cache
//     alone, and are not remembered: a form read for the first time whose
//     informer already ran, and lags, may serve older than they did.
//   - A Client never writes into the informer's store: other readers of the
//     cache do not see its writes early.
//   - It does not replace optimistic locking. It makes stale reads visible to
//     the reader; only the resourceVersion precondition of an update stops a
//     stale write at the server, and only AlreadyExists stops a second create
//     after the NotFound that CheckAbsent lets through.
//   - It does not start goroutines or talk to the API server of its own: an
//     OwnerTracker adds event handlers to the cache's informers, a Client's
//     writes are the wrapped client's, and Prime Lists through the reader
//     it is given. One exception without OwnerOptions.Owns: the first record
//     of a kind asks the cache for the informer of the form written, which
//     the cache starts if it has none. Declare Owns (wire does, from the
//     builder's Owns) so that only the informers the controller runs are
//     read.
//
// Predicate wakes a controller whose filters would drop the status-only event
// that satisfies a pending expectation.
package expectations
