// Package racetest makes the race of the incident reproducible in tests: a
// controller writes to the API server, and its informer cache sees the write
// late, so a cached read in between returns the object as it was before.
//
// On a laptop the window between a write and its watch event is a few
// milliseconds, and a test passes whether or not the controller is safe. A
// fake client has no informer, so it has no window at all. racetest widens the
// window on a real API server (envtest) and adds the API errors that make a
// controller retry, so a test can prove a controller safe rather than lucky.
//
// # What it offers
//
//   - [WithWatchLag] returns a copy of a *rest.Config whose watch responses
//     reach the client a configurable delay late; [LaggedCache] plugs it into
//     a manager's cache. Reads served by that cache are stale for at least
//     the delay after every write.
//   - [Faults] injects 409 Conflict, 500 and 429 (with Retry-After) into a
//     controller-runtime client's updates and patches (and, when named in
//     FaultOptions.Operations, its creates and deletes), through
//     interceptor.NewClient, at given rates from a seeded random source;
//     [Faults.NewClient] puts them into every write of a manager's client.
//     Its applied faults are the ambiguous writes: the server applies the
//     write and the client sees a 500 or a timeout anyway.
//   - [WatchFaults] breaks watches on a *rest.Config's transport, at given
//     rates from a seeded random source: a stream ends after an event, as
//     when a connection is reset mid-burst, and the watch that resumes it
//     is answered 410 Gone, so that the informer must relist.
//     [WatchFaults.NewCache] puts them into a manager's cache, and
//     [LagOptions].WatchFaults behind a lag.
//   - [APIServerRestarter] stops the kube-apiserver of an envtest
//     environment and starts it again on the same etcd, address and
//     certificates: every watch breaks, requests fail while it is down, and
//     the same rest.Config works after.
//   - [StartReplicas] runs manager replicas with leader election on one
//     Lease; [Replicas.Failover] stops the leader as a [Crash] (cut off the
//     server, its lease left to expire), a clean [Handover] (lease released)
//     or an [Expire] (clean stop, lease left to expire), and waits for the
//     next one; a replica whose manager returns by itself (its lease lost)
//     is cut off the server at once, as its process would end, and
//     [Replicas.Reap] replaces it; [Replicas.State] tells when each was elected and counts its
//     requests.
//   - [CountRequests] counts the requests a client sends by verb and resource
//     ([Classify] names them), for "API calls per transition" in benchmarks.
//   - [Explore] finds where a controller breaks when its cache is behind,
//     without being told where to look: given the controller's setup, a
//     workload and a settled predicate, it records a reference run (what
//     each reconcile read and wrote, at which resourceVersions), derives
//     plans from that trace, runs each plan in a namespace and a manager of
//     its own, and reports the plans whose runs fail an oracle, each with
//     the perturbation in one sentence (which reconcile, which read or
//     write, which version was served and which was known) and the command
//     that replays it alone (RACESAFE_EXPLORE_PLAN). Its plan kinds are the
//     stale views a real cluster gives a controller: a stale read of its
//     own write, a stale List after its create or delete, a version of
//     someone else's write never delivered (unobserved state), a view that
//     goes back to an older snapshot (time travel), a crash between two
//     writes, and a write applied but answered with an error.
//   - [CheckHistories] checks a client.Client over generated histories, as
//     etcd's robustness tests and Jepsen's Elle check a database: a seeded
//     random workload of the client under test (a [Subject]) and another
//     writer on a few object names, every operation recorded, the server's
//     every state taken from a watch of its own, and five named [Rules]
//     checked over each history. A failing history is shrunk to a short
//     [Reproducer]. See "Checking a client over histories".
//   - [WithoutRateLimit] returns a copy of a *rest.Config with client-go's
//     client-side rate limit turned off, so that a burst of reconciles is
//     paced by the API server and the controller, not by a token bucket.
//
// # Guarantees
//
//   - Lagged: each chunk of a watch response body is held until Delay (plus
//     Jitter) after it was read from the server, and never released before
//     the chunk read before it: events keep their order.
//   - Only watches: the lag and WatchFaults pass gets, lists, writes,
//     discovery and a refused watch's status unchanged, so the controller's
//     own writes and its reads from the API reader reach the server at once.
//   - No leaks: closing a lagged watch body, which an informer does when it
//     stops, ends its goroutine; so does the server ending the stream.
//   - Replayable: the same Seed and the same order of calls give the same
//     faults; for WatchFaults the calls are the events of the watch streams
//     and the resuming watches. Rates out of [0, 1] are a
//     [*FaultOptionsError] or a [*WatchFaultOptionsError], not a panic.
//   - The errors are the ones a real client gets: apierrors.IsConflict,
//     IsInternalError, IsTooManyRequests and SuggestsClientDelay hold for
//     the API server's, and an applied timeout is a *url.Error wrapping
//     context.DeadlineExceeded, as client-go returns when a request's
//     context ends.
//   - Nothing sent on a fault: an injected conflict, server error or 429
//     replaces the call, so the write never reaches the server; with
//     [Faults.NewClient] this holds for every write of the manager's client.
//   - Applied, then failed: an applied fault ([FaultAppliedServerError],
//     [FaultAppliedTimeout]) sends the write to the server and, once the
//     server applied it, returns a 500 (apierrors.IsInternalError) or a
//     timeout (errors.Is context.DeadlineExceeded) instead of the answer.
//     The caller's object is left as the caller passed it, its old
//     resourceVersion included. A write the server refuses returns the
//     server's error and is not counted as injected.
//   - Broken between events: a stream Break ends has delivered whole events
//     only, JSON or protobuf framed, never part of one; its next Read
//     returns io.ErrUnexpectedEOF, and the server's stream is closed.
//   - Gone after a break: only the first watch that resumes the path of a
//     broken stream from a resourceVersion may be answered 410 Gone
//     (apierrors.IsResourceExpired), and it does not reach the server.
//     Lists and watches with sendInitialEvents=true are never answered 410.
//   - Counted: [WatchFaults.Counts] gives, by resource, the watches, the
//     lists (relists included), the broken streams and the 410s; an
//     applied fault is counted in [Faults.Injected] once the server applied
//     the write.
//   - Unlimited: a client built from WithoutRateLimit's copy has no
//     client-side rate limiter, whatever QPS, Burst or RateLimiter the
//     original had; the original is not modified.
//   - Observed, not configured: a restart returns the error of a request
//     the stopped server did not answer, and waits for the started one to
//     be ready through the caller's rest.Config, so a certificate the
//     config does not trust is an error ([ErrNotRestartable]), not a hang.
//     A failover returns who led before and after, the time no replica led,
//     and the Lease's holder once the old leader had stopped: still the
//     old one after a crash, released after a handover.
//   - Decided, not raced: StartReplicas starts replica 0 and waits until
//     it leads before it starts the others.
//   - Cut off on a crash: from the moment a replica crashes none of its
//     requests but its events reach the server ([ErrReplicaCrashed]), so
//     its lease release fails and its last writes too.
//   - Explored views are real ones: a stale read or a stale List is made by
//     holding the watch stream of the written kind, from before the write
//     is sent until the controller has read what the plan makes stale (and
//     Hold after), so the events keep their order and everything behind the
//     held one waits too, as behind a lagging watch. Unobserved state holds
//     the stream from before the workload's write until its next write of
//     the object, then breaks it; the resuming watch is answered 410 Gone and
//     the informer relists: the first write's version is never delivered.
//     Time travel breaks the stream once the informer has delivered the
//     version a write made, serves the relist at the object's
//     resourceVersion before that write (an exact list, from the API
//     server's own history) and holds the watch from there for Hold. A
//     crash stops the manager right after the write succeeded, cuts it off
//     the server (its later writes fail and are not sent) and starts a new
//     one; the reconcile that made the write waits until its manager is
//     stopping and is then ended by a panic controller-runtime recovers
//     (not a finding), so that no line after the write runs, as none would
//     after a real crash. An ambiguous write is applied, then answered with
//     a 500.
//   - Explored plans prove themselves: a plan's Perturbation is set only
//     from what happened, with Known and Served the versions it set apart
//     (the version the controller had been answered and the older one its
//     cache served; the version never delivered and the one the relist
//     delivered; the version the informer had delivered and the snapshot it
//     went back to). A run that took another path says so and is not a test
//     of the plan.
//   - Explored plans are judged against the reference: liveness (settled
//     within PlanTimeout), panics (a recovered reconcile panic fails the
//     plan, naming the reconcile and the value), safety (no more creates of
//     a kind than the reference), the end state (as many objects of each of
//     Kinds), stale writes (no more writes than the reference whose
//     resourceVersion precondition, an update's or an optimistic-lock
//     patch's, is older than one a write of the same object had been
//     answered with by the same manager), and SideEffects (each count equal
//     to the reference's). The reference is the cleaner of two unperturbed
//     runs that settle without a panic (the fewer creates, then the fewer
//     writes), out of at most five; when none does, Explore returns an
//     error, not a report. Reference runs read fresh: a cached Get or List
//     of a kind the controller wrote first waits, up to two seconds, until
//     the cache shows the version each of its writes was answered with (or
//     the object gone or terminating after its delete), so a controller
//     that reads right after its own write, and loses that race in every
//     run under load, still gets a reference; the race is then the finding
//     of the plan that makes that read stale. Invalid options are an
//     ErrExploreOptions error before the API server is reached.
//   - Explored runs start their workload once every controller Setup added
//     has synced its sources, so that no write of the workload reaches a
//     controller only as part of an initial list.
//   - Safe for concurrent use: Faults, WatchFaults, Counter,
//     APIServerRestarter and Replicas; a lagged
//     body may be closed while a Read waits, which then returns at once.
//
// # What it deliberately does not do
//
//   - The lag does not delay lists, gets or writes, and does not drop,
//     duplicate or reorder events: a real watch is late, not wrong.
//     WatchFaults ends streams, but inside a stream it neither drops,
//     duplicates nor reorders events: what a broken stream did not deliver
//     the client gets by watching again or by relisting. It breaks JSON and
//     protobuf streams only; a stream of another format passes. Its 410 is
//     the answer to the watch request, as the watch cache gives it, not an
//     ERROR event inside a stream. client-go's reflector relists after it
//     with a backoff of about a second and more: poll for the relist.
//   - With client-go's WatchList feature (on by default since v0.35) an
//     informer's initial list is a watch stream, so it is delayed too and the
//     first sync takes at least the delay. With KUBE_FEATURE_WatchListClient
//     set to false the initial list is a plain list and is not delayed.
//   - Faults does not fail reads, server-side apply or subresources other
//     than status, and fails creates and deletes only when
//     FaultOptions.Operations names them.
//   - A restart does not touch etcd: what was written stays, and a
//     resourceVersion from before it is still valid after, so an informer
//     usually resumes its watch rather than relisting.
//   - A crashed replica's goroutines are not killed: its manager is
//     stopped, with its requests failing, and Failover waits for it to
//     return. Its events still pass, or its event broadcaster would retry
//     for minutes and outlive it.
//   - Explore's time travel departs from resourceVersion order, which an
//     informer otherwise keeps: within one run of client-go's reflector a
//     relist is no older than what it had seen (kubernetes/kubernetes#59848,
//     fixed by pull request #83520), and Explore serves it older anyway. A
//     real cluster gives a controller that view across a restart or a
//     failover: the new process's first list, sent at resourceVersion "0",
//     is served from the watch cache of an API server that lags
//     (kubernetes/kubernetes#97294), so its reconciles read objects older
//     than the ones the process before it read and wrote. client-go sends
//     that list before v0.35, and since then with its WatchListClient
//     feature turned off; with it on, the first list is a consistent stream
//     and the window closes. Explore keeps the process, and its memory,
//     through the travel: a controller that passes the plan passes the
//     restart too, but a failure that rests on memory alone (a check
//     against a version held in a map) would not happen after a real
//     restart, which loses it.
//   - Unobserved state is planned on the workload's writes only, where the
//     workload wrote the object again within Hold (in the reference); a
//     workload that waits on the controller between two writes gives no
//     such plan.
//   - A plan is named by the n-th write of a verb on a kind, so a replay
//     acts at the same write when the run takes the same path; a run that
//     takes another path says so ("its perturbation did not happen") and is
//     not a test of the plan. A plan whose run stalls past PlanTimeout
//     counts as a liveness failure even where a slower machine would have
//     settled: give PlanTimeout room. Reconciles are numbered per request in
//     the order they first read or wrote, which is what the report names.
//   - Panics are seen only when recovered: Explore sets RecoverPanic on its
//     managers, and a controller whose options set it to false crashes the
//     test binary instead.
//   - It is for tests. Nothing here belongs in a production binary.
//
// # Checking a client over histories
//
// [CheckHistories] runs CheckOptions.Histories histories one after the
// other on one control plane. Each has namespaces and a manager of its own
// (its cache limited to those namespaces, lagged by CheckOptions.Lag, its
// watches broken by Lag.WatchFaults, its client failing the writes a
// history marks ambiguous: applied, answered with a timeout), and
// CheckOptions.Ops operations, generated from its seed (CheckOptions.Seed
// plus its number): the subject's creates (named and generateName),
// updates, merge patches, server-side applies, status updates and patches,
// deletes with and without finalizers, with uid or resourceVersion
// preconditions, orphan, foreground and background propagation,
// DeleteAllOf by selector, and reads: Get and List, with and without label
// selectors, typed, unstructured and metadata-only; the other writer's
// writes, straight to the server. Objects move in and out of the
// selectors on the label [CheckerTierLabel]. The kind is
// PodDisruptionBudget (policy/v1): built in, with a status subresource,
// reconciled by nothing in envtest, so an orphan or foreground deletion
// keeps its finalizer until the history removes it.
//
// Every operation is a [Record]: start, end, deadline, the version sent and
// returned, the error, whether the subject refused it (Subject.Refused).
// The truth is a watch straight to the server from each namespace's
// creation: every (UID, resourceVersion) state, with its labels, deletion
// timestamp and deletion; after the operations the checker creates a
// sentinel object and waits for the watch to deliver it. The deletions the
// subject's cache showed are read from its informers, one per form. The
// [Rules] are RuleNeverHad, RuleReadYourWrites, RuleMonotonic,
// RuleDeletionEnds and RuleBounded; a List's items obey the per-object
// rules, and an object the subject's own newest write shows matching the
// selector is not missing unless the server later moved it out or deleted
// it.
//
// A history runs again from its seed, and CheckOptions.Only keeps a shrunk
// reproducer's operations. CheckOptions.Shrink reruns spend delta
// debugging on the first failing history of each rule. racetest's own
// tests run a short budget in `make test`; `make check-histories` runs
// HISTORIES (10,000 by default) per subject, and docs/consistency.md has
// the figures.
//
// What it does not do: operations run one at a time (the race is the
// cache's lag, not concurrent requests); resourceVersions are compared as
// the integers etcd makes them, which the API does not promise; a NotFound
// counts as newer when the server deleted the incarnation at any later
// version; the watch faults are seeded but follow the timing of events, so
// a rerun of a history under them can differ.
//
// # A controller whose cache lags
//
// The manager's client writes straight to the server; its cache, and so
// every cached r.Get, sees each write 300 ms late:
//
//	mgr, err := manager.New(cfg, manager.Options{
//		NewCache: racetest.LaggedCache(racetest.LagOptions{Delay: 300 * time.Millisecond}),
//	})
//
// Outside a manager, build the cache on the lagged config directly:
//
//	c, err := cache.New(racetest.WithWatchLag(cfg, racetest.LagOptions{
//		Delay:  300 * time.Millisecond,
//		Jitter: func() time.Duration { return rand.N(100 * time.Millisecond) },
//	}), cache.Options{})
//
// Pass a manager's HTTPClient to neither: it is built from the unlagged
// config, so watches through it would not lag. LaggedCache replaces it.
//
// # Faults
//
// Every write of the manager's client, and so of every reconciler it runs,
// may fail; log the seed so that a failure can be replayed:
//
//	faults, err := racetest.NewFaults(racetest.FaultOptions{Seed: seed, Conflict: 0.2})
//	if err != nil {
//		t.Fatal(err)
//	}
//	t.Logf("faults seed %d", seed)
//	mgr, err := manager.New(cfg, manager.Options{NewClient: faults.NewClient})
//
// interceptor.NewClient wraps a client.WithWatch, which mgr.GetClient() is
// not. Outside a manager, wrap a client from client.NewWithWatch:
//
//	base, err := client.NewWithWatch(cfg, client.Options{})
//	if err != nil {
//		t.Fatal(err)
//	}
//	c := interceptor.NewClient(base, faults.Funcs())
//
// # Ambiguous writes
//
// A write the server applied, reported as failed: the controller must not
// assume the write is lost, nor that it happened. The caller's object keeps
// its old resourceVersion, so the next attempt that uses it conflicts:
//
//	faults, err := racetest.NewFaults(racetest.FaultOptions{
//		Seed:               seed,
//		AppliedServerError: 0.2,
//		AppliedTimeout:     0.2,
//		Operations:         []racetest.Operation{racetest.OpStatusPatch},
//	})
//	if err != nil {
//		t.Fatal(err)
//	}
//	mgr, err := manager.New(cfg, manager.Options{NewClient: faults.NewClient})
//
// # Broken watches
//
// The manager's informers lose their streams mid-burst and must resume, or
// relist after a 410; the counts show that it happened:
//
//	watches, err := racetest.NewWatchFaults(racetest.WatchFaultOptions{Seed: seed, Break: 0.05, Gone: 0.5})
//	if err != nil {
//		t.Fatal(err)
//	}
//	mgr, err := manager.New(cfg, manager.Options{NewCache: watches.NewCache})
//	// ... drive a burst, then:
//	counts := watches.Counts()
//	t.Logf("%d streams broken, %d answered 410, %d lists", counts.Broken["workitems"], counts.Gone["workitems"], counts.Lists["workitems"])
//
// Behind a lag, give them to LaggedCache instead:
//
//	mgr, err := manager.New(cfg, manager.Options{
//		NewCache: racetest.LaggedCache(racetest.LagOptions{Delay: 300 * time.Millisecond, WatchFaults: watches}),
//	})
//
// # API server restarts
//
// kube-apiserver stops and starts again under the controller, on the same
// etcd. The restarter must make the environment restartable before it starts:
// envtest fixes the server's certificates, and how long it waits for it to
// stop, when it starts it:
//
//	restarter, err := racetest.NewAPIServerRestarter(env, racetest.APIServerRestartOptions{CertDir: t.TempDir()})
//	if err != nil {
//		t.Fatal(err)
//	}
//	cfg, err := env.Start()
//	// ... start the controller on cfg, then:
//	restart, err := restarter.Restart(ctx)
//	if err != nil {
//		t.Fatal(err)
//	}
//	t.Logf("down %v (%v), killed %v", restart.Downtime, restart.DownErr, restart.Killed)
//
// kube-apiserver's graceful shutdown outlasts the 1s StopTimeout, so a stop
// is usually a kill, and env.Stop, which waits as long for both processes,
// may report "timeout waiting for process": they are stopped all the same.
//
// # Failover
//
// Replicas of a controller, one leading; the leader crashes and another
// takes over once its lease expires, and a replacement stands by:
//
//	replicas, err := racetest.StartReplicas(ctx, 2, racetest.ReplicaOptions{
//		Config:                  cfg,
//		Setup:                   setup, // func(mgr manager.Manager, name string) error
//		LeaderElectionID:        "workitems",
//		LeaderElectionNamespace: ns,
//		Replace:                 true,
//	})
//	if err != nil {
//		t.Fatal(err)
//	}
//	defer replicas.Stop()
//	f, err := replicas.Failover(ctx, racetest.Crash)
//	if err != nil {
//		t.Fatal(err)
//	}
//	t.Logf("%s crashed, %s leads %v later", f.Old, f.New, f.Gap)
//
// # Counts
//
//	counted, counter := racetest.CountRequests(cfg)
//	c, err := client.New(counted, client.Options{})
//	if err != nil {
//		t.Fatal(err)
//	}
//	// ... set up, then:
//	counter.Reset()
//	// ... drive one transition, then:
//	t.Logf("%d status patches in %d requests", counter.Count("patch", "workitems/status"), counter.Total())
//
// # Client-side rate limits
//
// A burst of reconciles can spend its time waiting on the client's own rate
// limiter rather than on the API server. A rest.Config whose QPS is 0 gets
// client-go's default of rest.DefaultQPS (5) requests per second with a burst
// of rest.DefaultBurst (10), per client; envtest's config allows 1000 QPS
// (burst 2000) and ctrl.GetConfig turns the limit off, but a config built
// another way, or given an explicit QPS, keeps its limit. Lift it before
// building the manager, so that what a benchmark or a race test measures is
// the controller:
//
//	cfg = racetest.WithoutRateLimit(cfg)
//	mgr, err := manager.New(cfg, manager.Options{})
package racetest
