package racetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/racesafe/racesafe/internal/objcopy"
)

// Operation is a client write that [Faults] can fail.
type Operation string

// The operations Faults intercepts. Subresources other than status, reads
// and server-side apply always pass; creates and deletes fail only when
// FaultOptions.Operations names them.
const (
	// OpUpdate is client.Update.
	OpUpdate Operation = "update"
	// OpPatch is client.Patch.
	OpPatch Operation = "patch"
	// OpStatusUpdate is client.Status().Update.
	OpStatusUpdate Operation = "status update"
	// OpStatusPatch is client.Status().Patch.
	OpStatusPatch Operation = "status patch"
	// OpCreate is client.Create. An applied fault on a Create with
	// generateName leaves the caller's object without the name the server
	// gave: the caller cannot read back what it created.
	OpCreate Operation = "create"
	// OpDelete is client.Delete.
	OpDelete Operation = "delete"
)

// defaultOperations are the operations a nil FaultOptions.Operations means.
var defaultOperations = []Operation{OpUpdate, OpPatch, OpStatusUpdate, OpStatusPatch}

// allOperations are the operations FaultOptions.Operations may name.
var allOperations = []Operation{OpUpdate, OpPatch, OpStatusUpdate, OpStatusPatch, OpCreate, OpDelete}

// Fault is a kind of error [Faults] injects.
type Fault string

// The faults, each the error a real API server returns for it.
const (
	// FaultConflict is a 409 Conflict, as for a stale resourceVersion
	// (apierrors.IsConflict).
	FaultConflict Fault = "conflict"
	// FaultServerError is a 500 Internal Server Error
	// (apierrors.IsInternalError).
	FaultServerError Fault = "server error"
	// FaultTooManyRequests is a 429 with a Retry-After delay
	// (apierrors.IsTooManyRequests, apierrors.SuggestsClientDelay).
	FaultTooManyRequests Fault = "too many requests"
	// FaultAppliedServerError is an ambiguous write: the write reaches the
	// server and is applied, and the client gets a 500 Internal Server
	// Error instead of the answer (apierrors.IsInternalError), as when the
	// server fails after persisting, or a proxy in front of it does.
	FaultAppliedServerError Fault = "applied, then server error"
	// FaultAppliedTimeout is an ambiguous write: the write reaches the
	// server and is applied, and the client gives up waiting for the answer
	// (errors.Is context.DeadlineExceeded, in a *url.Error as from
	// client-go), as when the response is lost or too late.
	FaultAppliedTimeout Fault = "applied, then timeout"
)

// FaultOptions configure [NewFaults]. Rates are probabilities per call, each
// in [0, 1], and their sum at most 1: one random draw per call picks at most
// one fault.
type FaultOptions struct {
	// Seed makes the sequence of faults replayable: the same seed and the
	// same sequence of calls give the same faults. Log it in a failing test.
	Seed uint64

	// Conflict is the rate of FaultConflict.
	Conflict float64
	// ServerError is the rate of FaultServerError.
	ServerError float64
	// TooManyRequests is the rate of FaultTooManyRequests.
	TooManyRequests float64
	// AppliedServerError is the rate of FaultAppliedServerError.
	AppliedServerError float64
	// AppliedTimeout is the rate of FaultAppliedTimeout.
	AppliedTimeout float64
	// RetryAfterSeconds is the Retry-After of FaultTooManyRequests; zero
	// means 1, negative is an error.
	RetryAfterSeconds int

	// Operations are the operations that may fail; nil means updates,
	// patches and status updates and patches. Creates and deletes fail only
	// when named here (OpCreate, OpDelete).
	Operations []Operation
	// Match, if set, further selects the calls that may fail, for example
	// only WorkItems. Calls it rejects pass and draw no random number, so
	// unrelated traffic does not shift the replayed sequence.
	Match func(op Operation, obj client.Object) bool
}

// ErrInvalidFaultOptions is matched by every error NewFaults returns.
var ErrInvalidFaultOptions = errors.New("invalid fault options")

// FaultOptionsError says which field of [FaultOptions] is invalid.
type FaultOptionsError struct {
	// Field names the field, or the sum of rates.
	Field string
	// Value is the rejected value.
	Value any
	// Reason says what a valid value is.
	Reason string
}

// Error implements error.
func (e *FaultOptionsError) Error() string { return e.message("FaultOptions.") }

// message is the error's text for a field of the options struct whose
// field names are prefixed with prefix ("" for arguments).
func (e *FaultOptionsError) message(prefix string) string {
	return fmt.Sprintf("%v: %s%s = %v: %s", ErrInvalidFaultOptions, prefix, e.Field, e.Value, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidFaultOptions) true.
func (e *FaultOptionsError) Is(target error) bool { return target == ErrInvalidFaultOptions }

// Faults injects API errors into a controller-runtime client's writes, at
// given rates, from a seeded random source. Use it as
// interceptor.NewClient(c, f.Funcs()) on a client.WithWatch c, or as a
// manager's client through [Faults.NewClient]. A Faults is safe for concurrent use;
// calls draw from one source in the order they reach it, so a replay is exact
// only when the calls come in the same order (one reconcile worker).
//
// A conflict, server error or 429 replaces the call: the write never reaches
// the server, as when a real server rejects it before persisting anything.
// An applied fault (FaultAppliedServerError, FaultAppliedTimeout) sends the
// write through the wrapped client first and then returns its error instead
// of the answer; the caller's object is left as the caller passed it, see
// [Faults.Funcs].
type Faults struct {
	opts FaultOptions
	ops  []Operation

	mu     sync.Mutex
	rng    *rand.Rand
	counts FaultCounts
}

// NewFaults validates opts and returns a Faults for them.
func NewFaults(opts FaultOptions) (*Faults, error) {
	rates := []struct {
		field string
		rate  float64
	}{
		{"Conflict", opts.Conflict}, {"ServerError", opts.ServerError}, {"TooManyRequests", opts.TooManyRequests},
		{"AppliedServerError", opts.AppliedServerError}, {"AppliedTimeout", opts.AppliedTimeout},
	}
	sum := 0.0
	for _, r := range rates {
		if math.IsNaN(r.rate) || r.rate < 0 || r.rate > 1 {
			return nil, &FaultOptionsError{Field: r.field, Value: r.rate, Reason: "a rate must be in [0, 1]"}
		}
		sum += r.rate
	}
	if sum > 1 {
		return nil, &FaultOptionsError{Field: "Conflict+ServerError+TooManyRequests+AppliedServerError+AppliedTimeout", Value: sum, Reason: "the rates must sum to at most 1"}
	}
	if opts.RetryAfterSeconds < 0 {
		return nil, &FaultOptionsError{Field: "RetryAfterSeconds", Value: opts.RetryAfterSeconds, Reason: "must not be negative"}
	}
	if opts.RetryAfterSeconds == 0 {
		opts.RetryAfterSeconds = 1
	}
	ops := slices.Clone(opts.Operations)
	if ops == nil {
		ops = defaultOperations
	}
	for _, op := range ops {
		if !slices.Contains(allOperations, op) {
			return nil, &FaultOptionsError{Field: "Operations", Value: op, Reason: fmt.Sprintf("not one of %v", allOperations)}
		}
	}
	return &Faults{
		opts: opts,
		ops:  ops,
		// The second PCG word is fixed so that Seed alone names a sequence.
		rng:    rand.New(rand.NewPCG(opts.Seed, 0x9e3779b97f4a7c15)),
		counts: FaultCounts{Calls: map[Operation]int{}, Injected: map[Injection]int{}},
	}, nil
}

// Injection is one kind of fault on one operation.
type Injection struct {
	Fault     Fault
	Operation Operation
}

// FaultCounts is what a Faults saw and did.
type FaultCounts struct {
	// Calls counts the calls that could have failed (in Operations and
	// accepted by Match), failed or not.
	Calls map[Operation]int
	// Injected counts the faults injected. An applied fault counts once the
	// server applied its write; one whose write the server refused is not
	// injected, the caller got the server's own error.
	Injected map[Injection]int
}

// Of returns how many faults of kind f were injected, over all operations.
func (c FaultCounts) Of(f Fault) int {
	n := 0
	for k, v := range c.Injected {
		if k.Fault == f {
			n += v
		}
	}
	return n
}

// Total returns how many faults were injected.
func (c FaultCounts) Total() int {
	n := 0
	for _, v := range c.Injected {
		n += v
	}
	return n
}

// Injected returns a copy of the counts so far.
func (f *Faults) Injected() FaultCounts {
	f.mu.Lock()
	defer f.mu.Unlock()
	return FaultCounts{Calls: maps.Clone(f.counts.Calls), Injected: maps.Clone(f.counts.Injected)}
}

// draw decides whether the call fails, and how.
func (f *Faults) draw(op Operation, obj client.Object) (Fault, bool) {
	if !slices.Contains(f.ops, op) || (f.opts.Match != nil && !f.opts.Match(op, obj)) {
		return "", false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts.Calls[op]++
	u, sum := f.rng.Float64(), 0.0
	for _, r := range []struct {
		fault Fault
		rate  float64
	}{
		{FaultConflict, f.opts.Conflict},
		{FaultServerError, f.opts.ServerError},
		{FaultTooManyRequests, f.opts.TooManyRequests},
		{FaultAppliedServerError, f.opts.AppliedServerError},
		{FaultAppliedTimeout, f.opts.AppliedTimeout},
	} {
		if sum += r.rate; u < sum {
			if !applied(r.fault) {
				f.counts.Injected[Injection{Fault: r.fault, Operation: op}]++
			}
			return r.fault, true
		}
	}
	return "", false
}

// applied reports whether fault lets the write through before failing it.
func applied(fault Fault) bool {
	return fault == FaultAppliedServerError || fault == FaultAppliedTimeout
}

// count records an applied fault, once its write was applied.
func (f *Faults) count(fault Fault, op Operation) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts.Injected[Injection{Fault: fault, Operation: op}]++
}

// call runs one write that may fail: send performs it through the wrapped
// client, decoding the answer into the object it is given.
//
// An applied fault sends a deep copy of obj, so the answer lands in the copy
// and obj keeps what the caller passed, old resourceVersion included: a real
// client that times out, or gets a 500, decodes nothing into it either. If
// the server refuses the write, its own error is returned and nothing is
// injected: nothing was applied, so nothing is ambiguous.
func (f *Faults) call(c client.Client, op Operation, obj client.Object, send func(client.Object) error) error {
	fault, ok := f.draw(op, obj)
	if !ok {
		return send(obj)
	}
	if !applied(fault) {
		return f.fail(c, fault, op, obj)
	}
	sent, err := objcopy.DeepCopy(obj)
	if err != nil {
		return fmt.Errorf("racetest: %s on %s: %w", fault, op, err)
	}
	if err := send(sent); err != nil {
		return err
	}
	f.count(fault, op)
	return f.fail(c, fault, op, obj)
}

// fail returns the error the client sees for fault.
func (f *Faults) fail(c client.Client, fault Fault, op Operation, obj client.Object) error {
	msg := fmt.Sprintf("racetest: injected %s on %s", fault, op)
	switch fault {
	case FaultConflict:
		return apierrors.NewConflict(groupResource(c, obj), obj.GetName(), errors.New(msg))
	case FaultServerError, FaultAppliedServerError:
		return apierrors.NewInternalError(errors.New(msg))
	case FaultAppliedTimeout:
		method := http.MethodPatch
		switch op {
		case OpUpdate, OpStatusUpdate:
			method = http.MethodPut
		case OpCreate:
			method = http.MethodPost
		case OpDelete:
			method = http.MethodDelete
		}
		return &url.Error{Op: method[:1] + strings.ToLower(method[1:]), URL: requestPath(c, obj, op), Err: context.DeadlineExceeded}
	default:
		return apierrors.NewTooManyRequests(msg, f.opts.RetryAfterSeconds)
	}
}

// requestPath is the path a client would have sent op on obj to, for the
// message of a timeout; parts the client's RESTMapper does not know are left
// out.
func requestPath(c client.Client, obj client.Object, op Operation) string {
	var b strings.Builder
	if gvk, err := c.GroupVersionKindFor(obj); err == nil {
		if gvk.Group == "" {
			b.WriteString("/api/" + gvk.Version)
		} else {
			b.WriteString("/apis/" + gvk.Group + "/" + gvk.Version)
		}
	}
	if ns := obj.GetNamespace(); ns != "" {
		b.WriteString("/namespaces/" + ns)
	}
	b.WriteString("/" + groupResource(c, obj).Resource)
	if op != OpCreate {
		b.WriteString("/" + obj.GetName())
	}
	if op == OpStatusUpdate || op == OpStatusPatch {
		b.WriteString("/status")
	}
	return b.String()
}

// groupResource names obj's resource the way a server's conflict does. A kind
// the client's RESTMapper does not know (a fake client's mapper is empty) gets
// its resource guessed from the kind, as kubectl does; an unknown type gets
// none rather than no error at all.
func groupResource(c client.Client, obj client.Object) schema.GroupResource {
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return schema.GroupResource{}
	}
	m, err := c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		plural, _ := meta.UnsafeGuessKindToResource(gvk)
		return plural.GroupResource()
	}
	return m.Resource.GroupResource()
}

// Funcs returns the interceptor functions that inject the faults: Create,
// Update, Patch, Delete and the status subresource's Update and Patch are
// set; the others pass.
//
// After an applied fault the write is on the server, and obj is as the
// caller passed it: neither the server's answer nor its new resourceVersion
// is written into it.
func (f *Faults) Funcs() interceptor.Funcs {
	return interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return f.call(c, OpCreate, obj, func(obj client.Object) error {
				return c.Create(ctx, obj, opts...)
			})
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return f.call(c, OpDelete, obj, func(obj client.Object) error {
				return c.Delete(ctx, obj, opts...)
			})
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return f.call(c, OpUpdate, obj, func(obj client.Object) error {
				return c.Update(ctx, obj, opts...)
			})
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return f.call(c, OpPatch, obj, func(obj client.Object) error {
				return c.Patch(ctx, obj, patch, opts...)
			})
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			send := func(obj client.Object) error { return c.SubResource(sub).Update(ctx, obj, opts...) }
			if sub != "status" {
				return send(obj)
			}
			return f.call(c, OpStatusUpdate, obj, send)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			send := func(obj client.Object) error { return c.SubResource(sub).Patch(ctx, obj, patch, opts...) }
			if sub != "status" {
				return send(obj)
			}
			return f.call(c, OpStatusPatch, obj, send)
		},
	}
}

// NewClient is a client.NewClientFunc for manager.Options.NewClient: it builds
// the client the manager would, reading from its cache, and injects f's
// faults into its writes, so every reconciler the manager runs sees them:
//
//	mgr, err := manager.New(cfg, manager.Options{NewClient: faults.NewClient})
//
// interceptor.NewClient needs a client.WithWatch, which mgr.GetClient() is
// not; outside a manager, wrap a client from client.NewWithWatch.
func (f *Faults) NewClient(cfg *rest.Config, o client.Options) (client.Client, error) {
	c, err := client.NewWithWatch(cfg, o)
	if err != nil {
		return nil, fmt.Errorf("client for injected faults: %w", err)
	}
	return interceptor.NewClient(c, f.Funcs()), nil
}
