package statusupdate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/racesafe/racesafe/internal/objcopy"
	"github.com/racesafe/racesafe/internal/schemes"
)

// Client is the narrowest client the Patcher writes with: the status
// subresource writer and Patch of the main resource. A client.Client, such as
// the manager's GetClient(), satisfies it. The Patcher never reads through it,
// so a cache-backed client is fine here.
type Client interface {
	client.StatusClient
	Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error
}

// Recorder receives every successful write, so that later reads of the cache
// can be checked against it. *expectations.Tracker satisfies it.
//
// The Patcher calls exactly one of the two methods per write, with the object
// the server returned, and ExpectWrite with the live object it re-read after a
// conflict; the implementation must not modify either.
type Recorder interface {
	// ExpectWrite records that obj was written at obj's resourceVersion.
	ExpectWrite(obj client.Object) error
	// ExpectDeletion records that the write removed obj: its last finalizer
	// went while obj was being deleted, and the server's answer shows the
	// object was removed.
	ExpectDeletion(obj client.Object) error
}

// Options configure a Patcher. The zero value is ready to use: optimistic
// locking, retry.DefaultRetry on conflicts, no recorder, the client's field
// manager.
type Options struct {
	// Backoff bounds the retries after 409 Conflict, as wait.ExponentialBackoff
	// does: at most Steps attempts in all, Duration (times Factor, plus Jitter)
	// between them, and reaching Cap ends the retries. The zero value means
	// retry.DefaultRetry (5 attempts, about 10ms apart). Steps below 1 means a
	// single attempt.
	Backoff wait.Backoff

	// DisableOptimisticLock sends patches without the resourceVersion
	// precondition. A merge patch replaces whole lists, so without the lock a
	// write can erase a list entry (a condition, a finalizer) that another writer
	// added after the caller's read. Leave it off unless this writer is the only
	// one.
	DisableOptimisticLock bool

	// Expectations, when set, is told about every successful write; nil (the
	// zero value) records nothing. An *expectations.Tracker made without
	// its own Scheme takes the scheme of the client (or, failing that, of
	// the API reader) given to New, so that it knows the kinds this Patcher
	// writes: a Tracker from expectations.Options{} records custom
	// resources too.
	Expectations Recorder

	// FieldOwner, when set, is sent as the field manager of every patch.
	FieldOwner string

	// Name is the controller label of the Patcher's metrics: the name of the
	// controller it writes for. "default" when empty.
	Name string
}

// Patcher writes objects of type T with a merge patch computed from the object
// the caller holds. It holds no per-object state: one Patcher can serve every
// reconcile of a controller, concurrently. Make one with [New]; the zero
// Patcher has no client and every call returns an error.
type Patcher[T client.Object] struct {
	client         Client
	apiReader      client.Reader
	backoff        wait.Backoff
	optimisticLock bool
	recorder       Recorder
	fieldOwner     string
	name           string
}

// New returns a Patcher that writes through c and, after a conflict, reads the
// live object through apiReader. apiReader must read the API server, not the
// cache: pass the manager's GetAPIReader(). Neither may be nil; Patch reports an
// error if one is. When opts.Expectations is an *expectations.Tracker made
// without a Scheme, New gives it c's scheme and apiReader's (see
// [Options].Expectations).
func New[T client.Object](c Client, apiReader client.Reader, opts Options) *Patcher[T] {
	schemes.Offer(opts.Expectations, c, apiReader)
	backoff := opts.Backoff
	if backoff == (wait.Backoff{}) {
		backoff = retry.DefaultRetry
	}
	return &Patcher[T]{
		client:         c,
		apiReader:      apiReader,
		backoff:        backoff,
		optimisticLock: !opts.DisableOptimisticLock,
		recorder:       opts.Expectations,
		fieldOwner:     opts.FieldOwner,
		name:           controllerName(opts.Name),
	}
}

// PatchStatus writes obj's status. It deep-copies obj, runs mutate on the copy, sends
// the JSON merge patch of the difference to the status subresource and returns
// the object the server wrote. obj itself is never modified.
//
// If mutate changes nothing, nothing is sent and PatchStatus returns a copy of obj.
// If mutate returns an error, the call ends: nothing more is sent, nothing is
// retried, and the error is returned wrapped. On 409 Conflict from the server,
// PatchStatus reads the object from the API server, records it with the Recorder,
// runs mutate on it again and retries; see [Options].Backoff. A NotFound for
// an object that exists is a [*SubresourceError]: the kind has no status
// subresource.
//
// Changes mutate makes outside status are dropped by the server; use
// [Patcher.PatchObject] for those. On an error from recording a write, or from
// the read that tells whether the write removed the object, the write did
// happen: PatchStatus returns the written object together with the error.
func (p *Patcher[T]) PatchStatus(ctx context.Context, obj T, mutate func(T) error) (T, error) {
	return p.run(ctx, target{
		label:       targetStatus,
		subresource: subresourceStatus,
		what:        "patch status of",
		send: func(ctx context.Context, c Client, obj client.Object, patch client.Patch, fieldOwner string) error {
			var opts []client.SubResourcePatchOption
			if fieldOwner != "" {
				opts = append(opts, client.FieldOwner(fieldOwner))
			}
			return c.Status().Patch(ctx, obj, patch, opts...)
		},
	}, obj, mutate)
}

// Patch is PatchStatus.
//
// Deprecated: Patch writes the status subresource, where client.Patch
// writes the object; use [Patcher.PatchStatus], whose name says so. Patch
// stays for one minor release.
func (p *Patcher[T]) Patch(ctx context.Context, obj T, mutate func(T) error) (T, error) {
	return p.PatchStatus(ctx, obj, mutate)
}

// PatchObject is [Patcher.PatchStatus] for the object itself rather than its status:
// finalizers, labels, annotations, spec. For types with a status subresource,
// the server ignores status changes sent this way.
func (p *Patcher[T]) PatchObject(ctx context.Context, obj T, mutate func(T) error) (T, error) {
	return p.run(ctx, target{
		label: targetObject,
		what:  "patch",
		send: func(ctx context.Context, c Client, obj client.Object, patch client.Patch, fieldOwner string) error {
			var opts []client.PatchOption
			if fieldOwner != "" {
				opts = append(opts, client.FieldOwner(fieldOwner))
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	}, obj, mutate)
}

// target is what Patch and PatchObject differ in.
type target struct {
	label       string // metrics label
	subresource string // the subresource written, "" for the object itself
	what        string // error message prefix, followed by the object
	send        func(ctx context.Context, c Client, obj client.Object, patch client.Patch, fieldOwner string) error
}

// subresourceStatus is the subresource [Patcher.PatchStatus] writes.
const subresourceStatus = "status"

var errNoClient = errors.New("statusupdate: Patcher has a nil client or apiReader")

func (p *Patcher[T]) run(ctx context.Context, tgt target, obj T, mutate func(T) error) (T, error) {
	var zero T
	if objcopy.IsNil(obj) {
		return zero, ErrNilObject
	}
	if mutate == nil {
		return zero, ErrNilMutate
	}
	fail := func(err error) error {
		return fmt.Errorf("%s %s: %w", tgt.what, klog.KObj(obj), err)
	}
	if p == nil || p.client == nil || p.apiReader == nil {
		return zero, fail(errNoClient)
	}
	if obj.GetName() == "" {
		return zero, fail(ErrNoName)
	}
	logger := log.FromContext(ctx).WithValues("target", tgt.label, "patchedObject", klog.KObj(obj))

	// base is the object the patch is computed against: first a private copy of
	// obj, after a conflict the live object. obj is only ever read.
	base, err := objcopy.DeepCopy(obj)
	if err != nil {
		return zero, fail(fmt.Errorf("%w: %w", ErrInvalidObject, err))
	}
	backoff := p.backoff
	sent := 0 // patches sent, all answered 409 so far
	for {
		written, body, err := p.attempt(ctx, tgt, base, mutate)
		if body != nil {
			sent++
		}
		switch {
		case err == nil && body == nil:
			observe(p.name, tgt.label, resultUnchanged)
			logger.V(1).Info("unchanged, nothing sent", "resourceVersion", base.GetResourceVersion())
			return base, nil
		case err == nil:
			observe(p.name, tgt.label, resultWritten)
			logger.V(1).Info("patched", "patch", string(body), "attempt", sent,
				"resourceVersion", written.GetResourceVersion())
			if err := p.record(ctx, written, base.GetResourceVersion()); err != nil {
				return written, fail(fmt.Errorf("written at resourceVersion %s, but recording the write failed: %w",
					written.GetResourceVersion(), err))
			}
			return written, nil
		case body == nil || !apierrors.IsConflict(err):
			// Nothing was sent (mutate, or the patch could not be built), or
			// the server refused the patch for another reason than a
			// conflict: neither gets better by trying again. A 409 that
			// mutate returns is mutate's answer, not the server's.
			observe(p.name, tgt.label, resultError)
			if body != nil && tgt.subresource != "" && apierrors.IsNotFound(err) {
				err = p.checkSubresource(ctx, tgt.subresource, base, err)
			}
			return zero, fail(err)
		}

		observe(p.name, tgt.label, resultConflict)
		if backoff.Steps <= 1 {
			return zero, fail(&ConflictError{Key: client.ObjectKeyFromObject(obj), Attempts: sent, Err: err})
		}
		delay := backoff.Step()
		if backoff.Steps == 0 {
			// Cap was reached: wait.ExponentialBackoff would wait once more and
			// then stop without another attempt, so stop now.
			return zero, fail(&ConflictError{Key: client.ObjectKeyFromObject(obj), Attempts: sent, Err: err})
		}
		logger.V(1).Info("conflict, re-reading from the API server", "attempt", sent, "retryIn", delay)
		if err := sleep(ctx, delay); err != nil {
			return zero, fail(fmt.Errorf("waiting to retry after %d conflicting attempts: %w", sent, err))
		}
		// The conflict says the server holds a newer object than base. Read it
		// from the API server: the cache may be older still, and a patch
		// computed against it would conflict again or, without the lock,
		// undo the write that caused the conflict.
		fresh, err := objcopy.EmptyLike(obj)
		if err != nil {
			return zero, fail(fmt.Errorf("%w: %w", ErrInvalidObject, err))
		}
		if err := p.apiReader.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
			observe(p.name, tgt.label, resultError)
			return zero, fail(fmt.Errorf("re-read after conflict: %w", err))
		}
		// A new object under the old name (the caller's was deleted and
		// recreated) may hold the same phase and conditions; a write decided
		// for the old one must never land on it. An empty UID is unknown.
		if want, got := obj.GetUID(), fresh.GetUID(); want != "" && got != want {
			observe(p.name, tgt.label, resultError)
			return zero, fail(&IncarnationError{Key: client.ObjectKeyFromObject(obj), Want: want, Got: got})
		}
		// The server showed fresh: a cache copy older than it is stale, even
		// if the next patch fails or mutate gives up.
		if p.recorder != nil {
			if err := p.recorder.ExpectWrite(fresh); err != nil {
				return zero, fail(fmt.Errorf("re-read after conflict: record live resourceVersion %s: %w",
					fresh.GetResourceVersion(), err))
			}
		}
		base = fresh
	}
}

// attempt runs mutate on a copy of base and sends the difference. It returns
// the written object and the patch body; the body is nil when nothing was
// sent, because there was nothing to send or because building the patch
// (mutate included) failed. base is not modified.
func (p *Patcher[T]) attempt(ctx context.Context, tgt target, base T, mutate func(T) error) (T, []byte, error) {
	var zero T
	work, err := objcopy.DeepCopy(base)
	if err != nil {
		return zero, nil, fmt.Errorf("%w: %w", ErrInvalidObject, err)
	}
	if err := mutate(work); err != nil {
		return zero, nil, fmt.Errorf("mutate: %w", err)
	}
	// The plain merge patch first: with the precondition already in it, it
	// would never be empty and a no-op could not be told apart.
	body, err := client.MergeFrom(base).Data(work)
	if err != nil {
		return zero, nil, fmt.Errorf("compute merge patch: %w", err)
	}
	if bytes.Equal(bytes.TrimSpace(body), []byte("{}")) {
		return zero, nil, nil
	}
	if p.optimisticLock {
		rv := base.GetResourceVersion()
		if rv == "" {
			return zero, nil, ErrNoResourceVersion
		}
		if body, err = withResourceVersion(body, rv); err != nil {
			return zero, nil, err
		}
	}
	// Decode the answer into an empty object rather than into work.
	// controller-runtime's clients zero the target before decoding, but Client
	// does not promise it, and a plain JSON decode would merge the answer into
	// work, keeping fields the server dropped: the result would claim a write
	// that did not happen.
	written, err := objcopy.EmptyLike(base)
	if err != nil {
		return zero, nil, fmt.Errorf("%w: %w", ErrInvalidObject, err)
	}
	if err := tgt.send(ctx, p.client, written, client.RawPatch(types.MergePatchType, body), p.fieldOwner); err != nil {
		return zero, body, err
	}
	return written, body, nil
}

// checkSubresource tells a missing object from a missing subresource after a
// subresource patch answered notFound: a kind without the subresource answers
// NotFound for objects that exist. It reads the object once through the API
// reader; only if the very object patched is there is the subresource
// missing. Otherwise, or if the read fails, the NotFound is not hidden.
func (p *Patcher[T]) checkSubresource(ctx context.Context, subresource string, base T, notFound error) error {
	live, err := objcopy.EmptyLike(base)
	if err != nil {
		return notFound
	}
	key := client.ObjectKeyFromObject(base)
	switch err := p.apiReader.Get(ctx, key, live); {
	case apierrors.IsNotFound(err):
		return notFound
	case err != nil:
		// Not wrapping notFound: client.IgnoreNotFound must not drop a write
		// that may have failed for want of a subresource.
		return fmt.Errorf("%v; checking whether the object exists: %w", notFound, err)
	case base.GetUID() != "" && live.GetUID() != base.GetUID():
		return notFound // deleted and created again: the object patched is gone
	}
	return &SubresourceError{Key: key, GroupVersionKind: p.gvk(base), Subresource: subresource}
}

// gvk returns obj's kind from the client's scheme or, failing that, from obj.
func (p *Patcher[T]) gvk(obj T) schema.GroupVersionKind {
	type kinds interface {
		GroupVersionKindFor(runtime.Object) (schema.GroupVersionKind, error)
	}
	for _, c := range []any{p.client, p.apiReader} {
		if k, ok := c.(kinds); ok {
			if gvk, err := k.GroupVersionKindFor(obj); err == nil && !gvk.Empty() {
				return gvk
			}
		}
	}
	return obj.GetObjectKind().GroupVersionKind()
}

// record reports a successful write to the Recorder, if any. sentRV is the
// resourceVersion of the object the patch was computed from, which the
// optimistic lock sent as the precondition.
func (p *Patcher[T]) record(ctx context.Context, written T, sentRV string) error {
	if p.recorder == nil {
		return nil
	}
	removed, err := p.removed(ctx, written, sentRV)
	if err != nil {
		return err
	}
	if removed {
		return p.recorder.ExpectDeletion(written)
	}
	return p.recorder.ExpectWrite(written)
}

// removed reports whether the write that returned written deleted the object.
//
// Removing the last finalizer of an object being deleted deletes it only when
// its deletion has no grace period left. Observed on kube-apiserver 1.37
// (envtest): a custom resource is removed, and the answer is the object as
// sent, with deletionTimestamp, no finalizers and the resourceVersion the
// patch was sent with, since no newer version of it was ever stored. A
// scheduled Pod deleted with a 30s grace period is not removed: the answer
// has deletionTimestamp and no finalizers, but a new resourceVersion, and the
// Pod lives on at it until the kubelet deletes it. An ordinary write always
// gets a resourceVersion newer than the stored one, which is never older than
// the one the patch was computed from, so an unchanged resourceVersion means
// removed, with the optimistic lock or without.
//
// A new resourceVersion is not proof of life: without the lock the server may
// have held a newer object than sentRV, and controller-runtime's fake client
// answers a removal with a new resourceVersion. One live read through the API
// reader settles it.
func (p *Patcher[T]) removed(ctx context.Context, written T, sentRV string) (bool, error) {
	if written.GetDeletionTimestamp() == nil || len(written.GetFinalizers()) > 0 {
		return false, nil
	}
	if sentRV != "" && written.GetResourceVersion() == sentRV {
		return true, nil
	}
	live, err := objcopy.EmptyLike(written)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrInvalidObject, err)
	}
	switch err := p.apiReader.Get(ctx, client.ObjectKeyFromObject(written), live); {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("check whether the write deleted the object: %w", err)
	}
	return live.GetUID() != written.GetUID(), nil // another object of that name: ours is gone
}

// withResourceVersion sets metadata.resourceVersion in a merge patch, which
// the server then checks as a precondition, as
// client.MergeFromWithOptimisticLock does.
func withResourceVersion(patch []byte, rv string) ([]byte, error) {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(patch))
	dec.UseNumber() // keep int64 fields exact; float64 would round them
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("add resourceVersion to merge patch: %w", err)
	}
	metadata, _ := m["metadata"].(map[string]any)
	if metadata == nil {
		metadata = map[string]any{}
		m["metadata"] = metadata
	}
	metadata["resourceVersion"] = rv
	out, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("add resourceVersion to merge patch: %w", err)
	}
	return out, nil
}

// sleep waits for d or until ctx is done, whichever comes first.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
