// Package fence keeps a leader that lost its lease from writing: every write
// carries the writer's epoch, and the API server refuses an epoch that is
// not the lease's current one.
//
// # The race
//
// client-go's leader election does not fence. A leader whose process pauses
// (a long GC, SIGSTOP, a partition that heals, a VM migration) resumes after
// another replica took the lease, and finishes the writes it had decided:
// a status it computed from state the new leader has since changed, a
// finalizer removed twice, an external uninstall run by two replicas.
// controller-runtime exits when it notices the loss, but cannot recall a
// request already on its way, nor stop a process that has not noticed yet.
//
// # How
//
// An [Epoch] is one tenure of one lease: its holderIdentity and its
// leaseTransitions. A [Fence] holds the epoch this process writes under;
// [NewClient] wraps a client so that every write carries it, on a
// rest.Config from [Config]: the request impersonates the process's own
// user ([WhoAmI]) with the epoch and the lease as user extra. That carrier
// is request-scoped, so the API server sees it on every verb and every
// subresource; an annotation would not do, since a status write ignores
// metadata and the stored object keeps the previous epoch. [Policy] builds
// the ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, the Lease
// as its param) that compares the carried epoch with the Lease, and
// [Binding] binds it to one lease; [Manifest] writes both as YAML, and
// config/workitem.yaml is the example controller's, generated.
//
// # Guarantees
//
//   - Once the API server's policy has read the new Lease (its informer
//     has seen the update), every write carrying an older epoch of that
//     lease is refused with 403 Forbidden ([IsFenced]): create, update,
//     patch, apply, delete, status and other subresources. TestZombieLeader
//     holds writes past a handover and releases them after the first
//     refusal: 1,000 trials, 4,000 writes, none accepted.
//   - A fenced client holding no epoch sends nothing: the write fails with
//     [ErrNoEpoch].
//   - The epoch is per lease: a process holding several leases (shards)
//     keeps one Fence and one binding per lease; a request carries the
//     lease it is fenced by, and a binding checks only its own.
//   - Writes that carry no epoch (other users, kubectl) are not matched,
//     unless [PolicyOptions].Users names their user: then a write of that
//     user that bypassed the fenced client is refused too.
//   - [IdempotencyKey] gives an external side effect a key from the
//     object's UID, the epoch and the step, so a downstream system can tell
//     a zombie's call from a retry.
//
// # What it does not do
//
//   - It does not close the window between the lease update and the API
//     server's informer seeing it: a zombie's write that lands in it is
//     accepted (TestZombieLeader measures it: p50 3 ms, p99 22 ms on
//     envtest, docs/fencing.md); with several API servers, each has its
//     own informer and its own window. Nor the time between the lease expiring
//     and another replica taking it: no one else acts then.
//   - It does not renew or read the lease: call [Fence.Set] with
//     [EpochOf] the Lease when this process acquires it, and [Fence.Clear]
//     when it loses it.
//   - It needs identities unique per process: a holder that re-acquires
//     under the same identity keeps the same leaseTransitions.
//   - It carries neither the user's own extra (a token's credential id)
//     nor its UID, and needs RBAC to impersonate itself: the verb
//     impersonate on its user or serviceaccount, its groups, and
//     userextras/fence.racesafe.io/lease and userextras/fence.racesafe.io/epoch.
//   - A lease that does not exist refuses every fenced write of its
//     binding (parameterNotFoundAction: Deny).
package fence

//go:generate go run ./internal/manifestgen -o config/workitem.yaml
