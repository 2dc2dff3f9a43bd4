package expectations

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/racesafe/racesafe/internal/objcopy"
)

var _ client.Client = (*Client)(nil)

// ErrClientOptions is matched by errors.Is for ClientOptions that NewClient
// cannot build a Client from.
var ErrClientOptions = errors.New("invalid ClientOptions")

// ErrNotRecorded is matched by errors.Is for a *NotRecordedError: the write
// reached the API server, but its expectation could not be recorded.
var ErrNotRecorded = errors.New("write succeeded but was not recorded")

// NotRecordedError reports a write the API server accepted whose expectation
// the Client could not record (a kind the tracker cannot tell, say). The
// write happened: do not retry it blindly; later reads of the object are not
// protected until the next recorded write.
type NotRecordedError struct {
	// Verb is the write: create, update, patch, delete, status update...
	Verb string
	// Key names the object written.
	Key client.ObjectKey
	// Err is why the expectation was not recorded.
	Err error
}

func (e *NotRecordedError) Error() string {
	return fmt.Sprintf("%s %s: %v: %v", e.Verb, e.Key, ErrNotRecorded, e.Err)
}

// Is makes errors.Is(err, ErrNotRecorded) hold.
func (e *NotRecordedError) Is(target error) bool { return target == ErrNotRecorded }

// Unwrap returns the recording error.
func (e *NotRecordedError) Unwrap() error { return e.Err }

// ClientOptions configure [NewClient]. The zero value is ready to use.
type ClientOptions struct {
	// Name labels the metrics of the Tracker NewClient makes when Tracker is
	// nil.
	Name string
	// Tracker records every write of the Client and refuses older reads;
	// when nil, NewClient makes one named Name on the wrapped client's
	// scheme.
	Tracker *Tracker
	// Owners, when set, records every write and delete of an object whose
	// controller reference points to its owner kind against that owner, and
	// CheckOwner refuses such an owner while the caches of what it owns lag
	// behind those writes.
	Owners *OwnerTracker
}

// Client is a drop-in client.Client that remembers what it wrote, so that
// a controller's reads cannot go back in time. Every call goes to the
// wrapped client unchanged; in addition:
//
//   - a successful Create, Update, Patch, or a Status() or SubResource()
//     Update or Patch records the object the server answered with the
//     Tracker, and, when the object has a controller reference to the
//     Owners' kind, with the OwnerTracker; a successful Delete of an owned
//     object records the deletion with the OwnerTracker;
//   - a Get returns the Tracker's *StaleError for a cached object older than
//     this client's last write of it, errors.Is(err, ErrStale), and leaves
//     the caller's object untouched;
//   - CheckOwner, at the reconcile's entry, returns an error that matches
//     ErrStale for an owner whose owned objects' caches have not seen this
//     client's writes of them.
//
// Not recorded, because the Client cannot see what the server wrote:
// dry-run writes, DeleteAllOf, the object of a Delete (the server answers a
// Delete without it), server-side Apply of an apply configuration, and
// subresource Creates. A List is passed through unchecked: CheckOwner at
// the reconcile's entry covers the Lists of what it owns, so end the
// reconcile after a write that a later List in the same reconcile would
// need to see.
type Client struct {
	client.Client
	reader  *Reader
	tracker *Tracker
	owners  *OwnerTracker
}

// NewClient wraps c, normally the manager's GetClient(): it reads from the
// manager's cache and writes to the API server.
func NewClient(c client.Client, opts ClientOptions) (*Client, error) {
	if objcopy.IsNil(c) {
		return nil, fmt.Errorf("NewClient of a nil client: %w", ErrClientOptions)
	}
	if opts.Tracker == nil {
		opts.Tracker = New(Options{Name: opts.Name, Scheme: c.Scheme()})
	}
	return &Client{Client: c, reader: NewReader(c, opts.Tracker), tracker: opts.Tracker, owners: opts.Owners}, nil
}

// Get reads key through the Tracker's Reader: obj is written only when the
// cached object is not older than this client's last write of it.
func (c *Client) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.reader.Get(ctx, key, obj, opts...)
}

// CheckOwner guards a reconcile's entry: it reads the owner key, of the
// Owners' kind, from the cache and returns an error that errors.Is
// ErrStale when the cached owner is older than this client's last write of
// it or when the cache of anything the client wrote for the owner has not
// caught up (see OwnerTracker.Check). Call it once, before the reconcile
// Lists what it owns; a Get later in the reconcile checks only the object
// itself, so a reconcile that has acted is not turned back half-way. An
// owner that is gone passes: the reconcile sees the NotFound itself.
// A Client without Owners returns ErrClientOptions.
func (c *Client) CheckOwner(ctx context.Context, key client.ObjectKey) error {
	if c.owners == nil {
		return ErrClientOptions
	}
	owner, err := objcopy.EmptyLike(c.owners.owner)
	if err != nil {
		return err
	}
	if err := c.reader.Get(ctx, key, owner); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	return c.owners.Check(ctx, owner)
}

// Guard returns r with CheckOwner of the request at its entry: a refused
// owner ends the reconcile with CheckOwner's error before r runs. Put a
// requeue.Floor around it to turn that error into a short requeue.
func (c *Client) Guard(r reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		if err := c.CheckOwner(ctx, req.NamespacedName); err != nil {
			return reconcile.Result{}, err
		}
		return r.Reconcile(ctx, req)
	})
}

// Create creates obj and records the server's answer.
func (c *Client) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := c.Client.Create(ctx, obj, opts...); err != nil {
		return err
	}
	if dryRun((&client.CreateOptions{}).ApplyOptions(opts).DryRun) {
		return nil
	}
	return c.recordWrite(ctx, "create", obj)
}

// Update updates obj and records the server's answer.
func (c *Client) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if err := c.Client.Update(ctx, obj, opts...); err != nil {
		return err
	}
	if dryRun((&client.UpdateOptions{}).ApplyOptions(opts).DryRun) {
		return nil
	}
	return c.recordWrite(ctx, "update", obj)
}

// Patch patches obj and records the server's answer.
func (c *Client) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := c.Client.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	if dryRun((&client.PatchOptions{}).ApplyOptions(opts).DryRun) {
		return nil
	}
	return c.recordWrite(ctx, "patch", obj)
}

// Delete deletes obj and, when it is owned, records the deletion against
// its owner.
func (c *Client) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if err := c.Client.Delete(ctx, obj, opts...); err != nil {
		return err
	}
	if c.owners == nil || dryRun((&client.DeleteOptions{}).ApplyOptions(opts).DryRun) {
		return nil
	}
	if err := c.owners.DeletedOwned(ctx, obj); err != nil && !notOwned(err) {
		return &NotRecordedError{Verb: "delete", Key: client.ObjectKeyFromObject(obj), Err: err}
	}
	return nil
}

// Status returns a writer for the status subresource that records, as
// Update and Patch do.
func (c *Client) Status() client.SubResourceWriter {
	return &subResourceWriter{SubResourceWriter: c.Client.Status(), c: c, name: "status"}
}

// SubResource returns a client for the named subresource whose Update and
// Patch record, as the Client's do.
func (c *Client) SubResource(subResource string) client.SubResourceClient {
	sc := c.Client.SubResource(subResource)
	return subResourceClient{SubResourceReader: sc, subResourceWriter: &subResourceWriter{SubResourceWriter: sc, c: c, name: subResource}}
}

func (c *Client) recordWrite(ctx context.Context, verb string, obj client.Object) error {
	if err := c.tracker.ExpectWrite(obj); err != nil {
		return &NotRecordedError{Verb: verb, Key: client.ObjectKeyFromObject(obj), Err: err}
	}
	if c.owners == nil {
		return nil
	}
	if err := c.owners.WroteOwned(ctx, obj); err != nil && !notOwned(err) {
		return &NotRecordedError{Verb: verb, Key: client.ObjectKeyFromObject(obj), Err: err}
	}
	return nil
}

// notOwned: the object is not the Owners' to track, which is not an error
// of the write.
func notOwned(err error) bool {
	return errors.Is(err, ErrNotOwned) || errors.Is(err, ErrOwnerKind)
}

func dryRun(modes []string) bool { return len(modes) > 0 }

type subResourceClient struct {
	client.SubResourceReader
	*subResourceWriter
}

type subResourceWriter struct {
	client.SubResourceWriter
	c    *Client
	name string
}

func (s *subResourceWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if err := s.SubResourceWriter.Update(ctx, obj, opts...); err != nil {
		return err
	}
	if dryRun((&client.SubResourceUpdateOptions{}).ApplyOptions(opts).DryRun) {
		return nil
	}
	return s.c.recordWrite(ctx, s.name+" update", obj)
}

func (s *subResourceWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := s.SubResourceWriter.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	if dryRun((&client.SubResourcePatchOptions{}).ApplyOptions(opts).DryRun) {
		return nil
	}
	return s.c.recordWrite(ctx, s.name+" patch", obj)
}
