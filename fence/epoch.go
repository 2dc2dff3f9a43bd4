package fence

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Keys of the user extra a fenced request carries. The API server lowercases
// extra keys, so they are lowercase here.
const (
	// LeaseKey names the lease a write is fenced by: "namespace/name".
	LeaseKey = "fence.racesafe.io/lease"
	// EpochKey carries the writer's epoch, [Epoch.String].
	EpochKey = "fence.racesafe.io/epoch"
)

// ErrNoEpoch means a fenced client was asked to write while its [Fence] held
// no epoch: the process does not hold the lease, or has not read it yet.
var ErrNoEpoch = errors.New("fence: no epoch: this process does not hold the lease")

// Epoch is one tenure of one lease: who held it and the lease's
// leaseTransitions when it did. client-go's leader election increments
// leaseTransitions whenever the holder changes, so an epoch names one
// holder's tenure as long as each process has an identity of its own
// (controller-runtime's default, hostname plus a UUID, does).
type Epoch struct {
	// Lease is the lease's namespace and name.
	Lease types.NamespacedName
	// Holder is the lease's spec.holderIdentity.
	Holder string
	// Transitions is the lease's spec.leaseTransitions.
	Transitions int32
}

// String is the value a fenced request carries under [EpochKey] and the
// policy compares: holder, '#', transitions. The transitions are digits, so
// the last '#' splits the value back unambiguously.
func (e Epoch) String() string {
	return e.Holder + "#" + strconv.FormatInt(int64(e.Transitions), 10)
}

// IsZero reports whether e names no tenure.
func (e Epoch) IsZero() bool { return e.Holder == "" }

// EpochOf returns the epoch lease records now. Its Holder is empty when the
// lease has no holder.
func EpochOf(lease *coordinationv1.Lease) Epoch {
	e := Epoch{Lease: types.NamespacedName{Namespace: lease.Namespace, Name: lease.Name}}
	if lease.Spec.HolderIdentity != nil {
		e.Holder = *lease.Spec.HolderIdentity
	}
	if lease.Spec.LeaseTransitions != nil {
		e.Transitions = *lease.Spec.LeaseTransitions
	}
	return e
}

// Fence holds the epoch a process writes under, for one lease. Keep one per
// lease, not per process: a process that holds several leases (shards) keeps
// a Fence for each. Its zero value holds no epoch; it is safe for concurrent
// use.
type Fence struct {
	epoch atomic.Pointer[Epoch]
}

// Set records e as the epoch to write under, from the moment this process
// acquired the lease. An epoch with an empty Holder clears it.
func (f *Fence) Set(e Epoch) {
	if e.IsZero() {
		f.epoch.Store(nil)
		return
	}
	f.epoch.Store(&e)
}

// Clear forgets the epoch: later writes through the fence's client fail
// with [ErrNoEpoch] until the next Set.
func (f *Fence) Clear() { f.epoch.Store(nil) }

// Epoch returns the current epoch and whether there is one.
func (f *Fence) Epoch() (Epoch, bool) {
	e := f.epoch.Load()
	if e == nil {
		return Epoch{}, false
	}
	return *e, true
}

type epochKey struct{}

// WithEpoch returns a context whose requests, sent through a rest.Config
// from [Config], carry e. The fenced [Client] calls it on every write; call
// it yourself for a client built another way.
func WithEpoch(ctx context.Context, e Epoch) context.Context {
	return context.WithValue(ctx, epochKey{}, e)
}

// EpochFrom returns the epoch ctx carries.
func EpochFrom(ctx context.Context) (Epoch, bool) {
	e, ok := ctx.Value(epochKey{}).(Epoch)
	return e, ok
}

// IdempotencyKey returns the key a side effect outside the API server is
// sent with: the object's UID, the epoch's lease and tenure, and the step,
// so a downstream system that records keys can tell a zombie's call (an
// older epoch for the same UID and step) from a retry of the same call (the
// same key). The key is readable: "<uid>/<step>/<transitions>/<holder>", the
// holder last because it may contain '/'.
func IdempotencyKey(uid types.UID, e Epoch, step string) string {
	return fmt.Sprintf("%s/%s/%d/%s", uid, step, e.Transitions, e.Holder)
}
