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
//     controller-runtime client's updates and patches, through
//     interceptor.NewClient, at given rates from a seeded random source.
//   - [CountRequests] counts the requests a client sends by verb and resource
//     ([Classify] names them), for "API calls per transition" in benchmarks.
//
// # Guarantees
//
//   - Lagged: each chunk of a watch response body is held until Delay (plus
//     Jitter) after it was read from the server, and never released before
//     the chunk read before it: events keep their order.
//   - Only watches: gets, lists, writes, discovery and a refused watch's
//     status pass unchanged, so the controller's own writes and its reads
//     from the API reader reach the server at once.
//   - No leaks: closing a lagged watch body, which an informer does when it
//     stops, ends its goroutine; so does the server ending the stream.
//   - Replayable: the same Seed and the same order of calls give the same
//     faults. Rates out of [0, 1] are a [*FaultOptionsError], not a panic.
//   - The errors are the API server's: apierrors.IsConflict,
//     IsInternalError, IsTooManyRequests and SuggestsClientDelay hold.
//   - Safe for concurrent use: Faults and Counter; a lagged body may be
//     closed while a Read waits, which then returns at once.
//
// # What it deliberately does not do
//
//   - It does not delay lists, gets or writes, and does not drop, duplicate or
//     reorder events: a real watch is late, not wrong.
//   - With client-go's WatchList feature (on by default since v0.35) an
//     informer's initial list is a watch stream, so it is delayed too and the
//     first sync takes at least the delay. With KUBE_FEATURE_WatchListClient
//     set to false the initial list is a plain list and is not delayed.
//   - Faults never lets a write through and then reports an error: the
//     ambiguous "it may have happened" 500 is out of scope. It does not fail
//     creates, deletes, reads, server-side apply or subresources other than
//     status.
//   - It is for tests. Nothing here belongs in a production binary.
//
// # A controller whose cache lags
//
// The manager's client writes straight to the server; its cache, and so
// every cached r.Get, sees each write 300 ms late:
//
//	mgr, err := manager.New(env.Config, manager.Options{
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
// # Faults and counts
//
//	faults, err := racetest.NewFaults(racetest.FaultOptions{Seed: seed, Conflict: 0.2})
//	c := interceptor.NewClient(mgr.GetClient(), faults.Funcs())
//	// ... run the reconciler with c; t.Logf("seed %d", seed) to replay
//
//	counted, counter := racetest.CountRequests(env.Config)
//	// ... build the client from counted; counter.Count("patch", "workitems/status")
package racetest
