package expectations

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/racesafe/racesafe/internal/objcopy"
)

// Every method of client.Client is implemented here, none embedded: a
// write method controller-runtime adds later breaks this assertion, rather
// than passing through unrecorded.
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

// ListStaleError reports a List the Client refused: this client has writes
// of the listed kind that the cache has not shown, and the list cannot have
// them merged in exactly. errors.Is(err, ErrStale) holds.
type ListStaleError struct {
	// Kind is the listed kind.
	Kind schema.GroupKind
	// Namespace is the listed namespace, empty for all.
	Namespace string
	// Reason says why the merge could not be computed.
	Reason string
}

// Error implements error.
func (e *ListStaleError) Error() string {
	return fmt.Sprintf("%s: list of %s in namespace %q: %s", ErrStale, e.Kind, e.Namespace, e.Reason)
}

// Is reports whether target is ErrStale.
func (e *ListStaleError) Is(target error) bool { return target == ErrStale }

// ClientOptions configure [NewClient]. APIReader is required; every other
// field is ready to use at its zero value. [ForManager] fills APIReader
// and Cache from a manager.
type ClientOptions struct {
	// Name is the controller's name, the controller label of the Client's
	// metrics and the name of the Tracker NewClient makes; "default" when
	// empty. See Client.Named to set it later.
	Name string
	// Tracker, when set, is shared with other recorders (a
	// statusupdate.Patcher, a Predicate): the Client records its writes
	// with it too, and refuses a cached read older than a write recorded
	// there by someone else. When nil, NewClient makes a private one on the
	// wrapped client's scheme, which only names kinds.
	Tracker *Tracker
	// Owners, when set, records every write and delete of an object whose
	// controller reference points to its owner kind against that owner, and
	// CheckOwner refuses such an owner while the caches of what it owns lag
	// behind those writes.
	Owners *OwnerTracker
	// APIReader (normally mgr.GetAPIReader()) reads the server itself
	// where a write's answer does not say what the server has: after a
	// Delete, a write answered NotFound, an answer terminating without
	// finalizers, and a write that ended ambiguously (a timeout, a 500, a
	// reset connection). Required: NewClient refuses a nil one with
	// ErrClientOptions.
	APIReader client.Reader
	// Cache, when set (normally mgr.GetCache()), is the cache the wrapped
	// client reads: the Client adds an event handler to the informer of
	// each kind and form it reads (never starting one of its own), so that
	// it learns how far each has got without a read: another writer's
	// deletion of an object this client wrote is then served as soon as
	// the informer delivers it, and racesafe_client_pending falls as the
	// cache catches up. When nil, the Client learns it only from what its
	// reads return, in each namespace: such a deletion is seen once a read
	// of that kind, form and namespace returns a later version, or at the
	// TTL.
	Cache Informers
	// RequestTimeout is the API server's request deadline
	// (kube-apiserver's --request-timeout): a Create without a name that
	// ended ambiguously and is not found is taken as not applied only once
	// this long has passed since it was sent, since the server may still
	// apply it until then. Zero or negative takes the first read as final,
	// as before this option; set DefaultRequestTimeout (kube-apiserver's
	// default) where a webhook or etcd may be slow.
	RequestTimeout time.Duration
	// TTL bounds how long a write is kept for a cache that does not show
	// it; DefaultTTL when zero or negative.
	TTL time.Duration
	// Clock measures TTLs; clock.RealClock{} when nil.
	Clock clock.PassiveClock
}

// Informers is what a Client reads its cache's progress from:
// controller-runtime's cache.Cache (a manager's GetCache()) satisfies it.
type Informers interface {
	GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error)
}

// DefaultRequestTimeout is kube-apiserver's default --request-timeout, the
// value to give ClientOptions.RequestTimeout.
const DefaultRequestTimeout = 60 * time.Second

// Client is a drop-in client.Client with session consistency: its reads
// serve its own writes. It writes to the wrapped client unchanged, keeps
// the server's answer to each write until the cache has shown it (or the
// TTL), and serves every Get and List from whichever is newer, the cache or
// its own last write, without waiting and without touching the cache.
// See the package documentation's "A drop-in client" for what it
// guarantees and what it cannot record.
type Client struct {
	inner     client.Client
	scheme    *runtime.Scheme
	tracker   *Tracker
	shared    bool
	reader    *Reader
	owners    *OwnerTracker
	apiReader client.Reader
	clock     clock.PassiveClock
	// ticker reads clock as ticks for a Get's expiry test: on the real
	// clock, the monotonic clock only, at half the cost of time.Now.
	ticker ticker
	s      *session
	m      atomic.Pointer[clientMetrics]
	// unresolved are the ambiguous writes whose read back failed (the API
	// server unreachable): a refused read retries them, at most once per
	// readBackInterval (nextReadBack, unix nanoseconds).
	unresolved   unresolvedWrites
	nextReadBack atomic.Int64
	// bareCache is set once a Get compared one of this client's writes,
	// which carried managedFields, with the cache's copy, which had none: a
	// cache that strips them (cache.TransformStripManagedFields). Writes
	// are then kept without managedFields, as the cache keeps objects.
	bareCache atomic.Bool
	// multiForm: some kind is read in more than one form, so reads keep
	// versions (remember) and no read skips the session.
	multiForm atomic.Bool
	// formsRead holds every form the Client has read (Client.watch): a
	// read skips the session only in the one form read so far, so the
	// first read of each form registers it, and a second form ends the
	// skipping (the history checker's seed 150: a typed Get that skipped
	// the session kept no version, and a metadata Get then served older).
	formsRead atomic.Uint32
	// informers is ClientOptions.Cache, nil when not given; marks is what
	// the Client knows of its caches' progress.
	informers      Informers
	marks          *watermarks
	requestTimeout time.Duration
	// deliveredHook, set by tests only, runs in an event handler between
	// reading the entry and acting on it: a read may replace the entry
	// there.
	deliveredHook func()
}

// NewClient wraps c, normally the manager's GetClient(): it reads from the
// manager's cache and writes to the API server.
func NewClient(c client.Client, opts ClientOptions) (*Client, error) {
	if objcopy.IsNil(c) {
		return nil, fmt.Errorf("NewClient of a nil client: %w", ErrClientOptions)
	}
	if objcopy.IsNil(opts.APIReader) {
		return nil, fmt.Errorf("NewClient without an APIReader (mgr.GetAPIReader(), or ForManager): %w", ErrClientOptions)
	}
	if objcopy.IsNil(opts.Cache) {
		opts.Cache = nil
	}
	if opts.RequestTimeout < 0 {
		opts.RequestTimeout = 0
	}
	opts.Name, opts.TTL, opts.Clock = withDefaults(opts.Name, opts.TTL, opts.Clock)
	shared := opts.Tracker != nil
	if !shared {
		opts.Tracker = New(Options{Name: opts.Name, Scheme: c.Scheme(), TTL: opts.TTL, Clock: opts.Clock})
	}
	cl := &Client{
		inner: c, scheme: c.Scheme(), tracker: opts.Tracker, shared: shared,
		reader: NewReader(c, opts.Tracker), owners: opts.Owners, apiReader: opts.APIReader,
		clock: opts.Clock, ticker: newTicker(opts.Clock), s: newSession(opts.TTL, opts.Clock.Now()),
		informers: opts.Cache, marks: newWatermarks(), requestTimeout: opts.RequestTimeout,
	}
	cl.m.Store(newClientMetrics(opts.Name))
	livePending.add(cl)
	return cl, nil
}

// Manager is what ForManager reads from a controller-runtime manager.
type Manager interface {
	GetClient() client.Client
	GetAPIReader() client.Reader
	GetCache() cache.Cache
}

// ForManager is NewClient over mgr's client, with its API reader and its
// cache as opts.APIReader and opts.Cache where those are unset.
func ForManager(mgr Manager, opts ClientOptions) (*Client, error) {
	if objcopy.IsNil(mgr) {
		return nil, fmt.Errorf("ForManager of a nil manager: %w", ErrClientOptions)
	}
	if objcopy.IsNil(opts.APIReader) {
		opts.APIReader = mgr.GetAPIReader()
	}
	if objcopy.IsNil(opts.Cache) {
		opts.Cache = mgr.GetCache()
	}
	return NewClient(mgr.GetClient(), opts)
}

// Named sets the controller label of c's metrics to name and returns c.
// Call it before c's first use, when the name is known only after NewClient
// (a builder's Named); reads and writes counted before it keep the old
// label.
func (c *Client) Named(name string) *Client {
	if name != "" {
		c.m.Store(newClientMetrics(name))
	}
	return c
}

// WithOwners sets the OwnerTracker c records owned writes with and that
// CheckOwner and Guard consult, and returns c. Call it before c's first
// use, when the owner kind is known only after NewClient (a builder's For);
// a nil owners leaves c as it was.
func (c *Client) WithOwners(owners *OwnerTracker) *Client {
	if owners != nil {
		c.owners = owners
	}
	return c
}

// Scheme returns the wrapped client's scheme.
func (c *Client) Scheme() *runtime.Scheme { return c.inner.Scheme() }

// RESTMapper returns the wrapped client's RESTMapper.
func (c *Client) RESTMapper() meta.RESTMapper { return c.inner.RESTMapper() }

// GroupVersionKindFor returns the wrapped client's answer.
func (c *Client) GroupVersionKindFor(obj runtime.Object) (schema.GroupVersionKind, error) {
	return c.inner.GroupVersionKindFor(obj)
}

// IsObjectNamespaced returns the wrapped client's answer.
func (c *Client) IsObjectNamespaced(obj runtime.Object) (bool, error) {
	return c.inner.IsObjectNamespaced(obj)
}

// Pending returns what racesafe_client_pending reports: the writes the
// Client keeps, not expired, that no form of the cache has shown yet or
// that a form the Client reads their kind in has not, and its ambiguous
// writes not yet told. A form the Client never reads does not hold a
// write pending: an idle controller whose caches have caught up reads 0.
func (c *Client) Pending() int { return c.s.pending(c.clock.Now(), c.marks.forms) }

// Get reads key from the cache into obj, or this client's entry for it
// when that is newer, as the package documentation's rule says. obj is
// written only on success; what it receives is the caller's own copy.
func (c *Client) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if c.s.n.Load() == 0 && !c.shared && !c.multiForm.Load() && c.formsRead.Load() == uint32(formOf(obj)) {
		// Nothing pending, one form read: the cache alone, into obj,
		// allocating nothing.
		err := c.inner.Get(ctx, key, obj, opts...)
		if err == nil {
			c.metrics().cache.Inc()
		}
		return err
	}
	if objcopy.IsNil(obj) {
		return fmt.Errorf("get %s into %T: %w", key, obj, ErrNilObject)
	}
	f := formOf(obj)
	k, err := c.tracker.kindOf(obj, f)
	if err != nil {
		return fmt.Errorf("get %s: %w", key, err)
	}
	sk := sessionKey{gk: k.gk, ObjectKey: key}
	c.watch(ctx, k.gk, f, obj)
	e := c.s.get(sk)
	var caught *ownEntry // an entry this form's cache has caught up with
	if e != nil && (e.has(f) || c.ticker.now() >= e.deadline) {
		if !e.has(f) {
			c.s.drop(sk, e)
		} else {
			caught = e
		}
		e = nil
	}
	if e == nil {
		if c.shared {
			err = c.reader.Get(ctx, key, obj, opts...)
		} else {
			err = c.inner.Get(ctx, key, obj, opts...)
		}
		if err == nil {
			c.marks.raise(k.gk, f, key.Namespace, obj.GetResourceVersion())
			c.readAlone(sk, caught, f, obj)
		}
		c.count(err)
		return err
	}
	fresh, pool, err := scratchLike(obj, f)
	if err != nil {
		return fmt.Errorf("get %s: %w", key, err)
	}
	defer giveBack(pool, fresh)
	// The cache's copy is only compared, and copied out when it wins: a
	// shallow read spares the deep copy of an object that this client's own
	// entry replaces. fresh is never written through: its maps are the
	// cache's.
	var cached client.Object = fresh
	if err := c.inner.Get(ctx, key, fresh, shallow(opts)...); err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		cached = nil
	}
	d, stale := c.judged(ctx, sk, e, f, obj, cached)
	switch d {
	case serveCache:
		if cached == nil {
			c.metrics().cache.Inc()
			return apierrors.NewNotFound(schema.GroupResource{Group: k.gk.Group, Resource: k.gk.Kind}, key.Name)
		}
		own, ok := fresh.DeepCopyObject().(client.Object)
		if !ok {
			return fmt.Errorf("get %s: DeepCopyObject of %T is not an object", key, fresh)
		}
		setInto(obj, own)
		c.metrics().cache.Inc()
		return nil
	case serveNotFound:
		c.metrics().own.Inc()
		return apierrors.NewNotFound(schema.GroupResource{Group: k.gk.Group, Resource: k.gk.Kind}, key.Name)
	case serveOwn:
		// into writes obj only when it succeeds.
		if err := into(c.scheme, stale.obj, stale.gvk, obj); err == nil {
			if cached != nil && !hasManagedFields(cached) && hasManagedFields(obj) {
				// In the cache's form: a cache that strips managedFields
				// hands none out.
				obj.SetManagedFields(nil)
				c.bareCache.Store(true)
			}
			c.metrics().own.Inc()
			return nil
		}
	}
	c.metrics().refused.Inc()
	err = &StaleError{Kind: k.gk, Key: key, Want: stale.rv, Deletion: stale.state == ownGone}
	if cached != nil {
		err.(*StaleError).Seen = cached.GetResourceVersion()
	}
	log.FromContext(ctx).V(1).Info("stale cache read, not handed out", "controller", c.metrics().name,
		"kind", k.gk, "object", key, "want", stale.rv, "seen", err.(*StaleError).Seen)
	return err
}

// judged applies the rule (judge) to a read in form f of the object sk
// with entry e and the cache's copy cached (nil for NotFound), and keeps
// what the read learnt: the cache's progress, the form caught up, and, when
// the cache serves a copy newer than e, that copy as the entry, so that no
// form reads older later. An entry that cannot be served yet (an ambiguous
// write) has its read back retried first, within ctx. It returns the
// decision and the entry it was taken on.
func (c *Client) judged(ctx context.Context, sk sessionKey, e *ownEntry, f form, like, cached client.Object) (decision, *ownEntry) {
	if cached != nil {
		c.marks.raise(sk.gk, f, sk.Namespace, cached.GetResourceVersion())
	}
	reached := func(rv string) bool { return c.marks.reached(sk.gk, f, sk.Namespace, rv) }
	d, caught := judge(e, cached, reached)
	if cached == nil && d != serveCache && e.state == ownWritten && c.marks.blind(sk.gk, f, e) {
		// The form's informer may have delivered another writer's deletion
		// before the Client's handler was added (a form first read after
		// the write; the history checker's seed 78): the server tells.
		if cur := c.checkLive(ctx, sk, e, like); cur != e {
			e = cur
			d, caught = judge(e, cached, reached)
		}
	}
	if d == serveRefused && e.state == ownUnknown && !c.unresolved.empty() {
		c.retryReadBacks(ctx)
		if cur := c.s.get(sk); cur != nil && cur != e {
			e = cur
			d, caught = judge(e, cached, reached)
		}
	}
	if !caught {
		return d, e
	}
	if cached != nil && cached.GetResourceVersion() != e.rv {
		c.adopt(sk, e, f, cached)
		return d, e
	}
	c.caughtUp(sk, e, f)
	return d, e
}

// checkLive reads the object of entry e live, for a read in a form blind
// to e (watermarks.blind), within the read's context, and returns the
// entry the server's answer leaves: a deletion where it is gone, its copy
// where it is newer, e where it is as e has it (e is then checked) or the
// read failed.
func (c *Client) checkLive(ctx context.Context, sk sessionKey, e *ownEntry, like client.Object) *ownEntry {
	probe, err := objcopy.EmptyLike(like)
	if err != nil {
		return e
	}
	probe.SetNamespace(sk.Namespace)
	probe.SetName(sk.Name)
	probe.SetUID(e.uid)
	now := c.clock.Now()
	if told, _ := c.readLive(forRead(ctx), "get", probe, sk.gk, now); !told {
		return e
	}
	c.metrics().live.Inc()
	cur := c.s.get(sk)
	if cur == nil || cur == e {
		e.checked.Store(now.UnixNano())
		return e
	}
	return cur
}

// keepNewer keeps cached, which form f's cache served for an entry e it
// has caught up with, as the entry when it is newer than e: another form's
// cache, read now or first read later, may still be older than the copy
// just served, and must not serve older (monotonic reads across forms). A
// copy as old as the entry costs a comparison.
func (c *Client) keepNewer(sk sessionKey, e *ownEntry, f form, cached client.Object) {
	if e == nil || !wellFormed(e.rv) || !newer(cached.GetResourceVersion(), e.rv) {
		return
	}
	c.adopt(sk, e, f, cached)
}

// remember keeps the version form f's cache served of an object this
// Client holds no entry for, when the Client reads the kind in another form
// too: that form's informer may be behind this one, and must not serve
// older (monotonic reads across forms). Only the version is kept, not the
// object: the other forms serve their cache's copy once it is as new, and
// refuse (ErrStale) before. A kind read in one form keeps nothing.
func (c *Client) remember(sk sessionKey, f form, served client.Object) {
	rv := served.GetResourceVersion()
	if !wellFormed(rv) || c.marks.forms(sk.gk)&^f == 0 {
		return
	}
	now := c.clock.Now()
	e := &ownEntry{state: ownWritten, uid: served.GetUID(), rv: rv, at: now, seen: true}
	e.caught.Store(uint32(f))
	c.put(sk, e, now)
}

// readAlone keeps what a read of form f served from the cache alone for an
// object whose entry (nil when none) this form has caught up with.
func (c *Client) readAlone(sk sessionKey, e *ownEntry, f form, served client.Object) {
	if e == nil {
		c.remember(sk, f, served)
		return
	}
	c.keepNewer(sk, e, f, served)
}

// adopt replaces e with cached, a copy newer than e that form f's cache
// served: another writer's write, or the server's later state. The other
// forms' caches may still be older than it; they now serve it.
func (c *Client) adopt(sk sessionKey, e *ownEntry, f form, cached client.Object) {
	keep, err := objcopy.DeepCopy(cached)
	if err != nil {
		c.caughtUp(sk, e, f)
		return
	}
	gvk := e.gvk
	if g := keep.GetObjectKind().GroupVersionKind(); !g.Empty() {
		gvk = g
	} else if g, err := apiutil.GVKForObject(keep, c.scheme); err == nil {
		gvk = g
	}
	n := &ownEntry{state: ownWritten, uid: keep.GetUID(), rv: keep.GetResourceVersion(), gvk: gvk, obj: keep, at: e.at, deadline: e.deadline, seen: e.seen}
	n.caught.Store(uint32(f))
	if !c.s.replace(sk, e, n) {
		c.caughtUp(sk, e, f)
	}
}

// shallowOnly is the options of a Get that only compares: no deep copy.
var shallowOnly = []client.GetOption{client.UnsafeDisableDeepCopy}

func shallow(opts []client.GetOption) []client.GetOption {
	if len(opts) == 0 {
		return shallowOnly
	}
	return append(opts[:len(opts):len(opts)], client.UnsafeDisableDeepCopy)
}

// scratches keeps empty typed objects, per Go type, to read the cache's
// copy into for a comparison: a Get served from this client's own write
// then allocates only the copy it hands out.
var scratches sync.Map // reflect.Type -> *sync.Pool

// scratchLike returns an empty object of obj's type and form, and the pool
// to give it back to (giveBack) once it is no longer read. A typed one comes
// from a pool; an unstructured or metadata-only one names its kind, which
// the cache reads it by, and is made anew (its pool is nil).
func scratchLike(obj client.Object, f form) (client.Object, *sync.Pool, error) {
	if f != formTyped {
		fresh, err := objcopy.EmptyLike(obj)
		return fresh, nil, err
	}
	typ := reflect.TypeOf(obj)
	if typ.Kind() != reflect.Pointer {
		return nil, nil, fmt.Errorf("%T is not a pointer", obj)
	}
	p, ok := scratches.Load(typ)
	if !ok {
		p, _ = scratches.LoadOrStore(typ, &sync.Pool{New: func() any { return reflect.New(typ.Elem()).Interface() }})
	}
	pool := p.(*sync.Pool)
	fresh, ok := pool.Get().(client.Object)
	if !ok {
		return nil, nil, fmt.Errorf("cannot make an empty %T", obj)
	}
	return fresh, pool, nil
}

// giveBack zeroes a scratch object, so that it keeps no reference to the
// cache's maps, and puts it back in its pool.
func giveBack(pool *sync.Pool, fresh client.Object) {
	if pool == nil {
		return
	}
	reflect.ValueOf(fresh).Elem().SetZero()
	pool.Put(fresh)
}

func (c *Client) count(err error) {
	switch {
	case errors.Is(err, ErrStale):
		c.metrics().refused.Inc()
	case err == nil || apierrors.IsNotFound(err):
		c.metrics().cache.Inc()
	}
}

func (c *Client) metrics() *clientMetrics { return c.m.Load() }

func setInto(dst, src client.Object) {
	if d, ok := dst.(interface{ SetUnstructuredContent(map[string]any) }); ok {
		if s, ok := src.(runtime.Unstructured); ok {
			d.SetUnstructuredContent(s.UnstructuredContent())
			return
		}
	}
	reflect.ValueOf(dst).Elem().Set(reflect.ValueOf(src).Elem())
}

// List reads list from the cache with this client's writes merged in:
// objects it created that the cache lacks are added (sorted by namespace
// and name, after the cache's items), objects it wrote are replaced by its
// newer answer, objects it deleted are removed, all within the list's
// namespace and label selector. A *ListStaleError (errors.Is(err, ErrStale))
// where the merge cannot be computed exactly: a field selector, a Limit or
// Continue, a kind with an ambiguous write, or a write that cannot be shown
// (a deletion that may be terminating, a write known only by its
// resourceVersion).
func (c *Client) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, live := LiveReadRequired(ctx); live {
		if gvk, err := c.listKind(list); err == nil {
			if c.listLive(ctx, gvk.GroupKind(), (&client.ListOptions{}).ApplyOptions(opts).Namespace) {
				if err := c.apiReader.List(ctx, list, opts...); err != nil {
					return err
				}
				c.metrics().live.Inc()
				return nil
			}
		}
	}
	if c.s.n.Load() == 0 && !c.multiForm.Load() && c.formsRead.Load() == uint32(formOf(list)) {
		err := c.inner.List(ctx, list, opts...)
		if err == nil {
			c.metrics().cache.Inc()
		}
		return err
	}
	gvk, err := c.listKind(list)
	if err != nil {
		return fmt.Errorf("list %T: %w", list, err)
	}
	gk := gvk.GroupKind()
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	now := c.clock.Now()
	refuse := func(reason string) error {
		c.metrics().refused.Inc()
		return &ListStaleError{Kind: gk, Namespace: lo.Namespace, Reason: reason}
	}
	if c.s.barred(gk, lo.Namespace, now, c.cacheReached()) {
		c.retryReadBacks(ctx)
		if c.s.barred(gk, lo.Namespace, now, c.cacheReached()) {
			return refuse("a write of this kind ended ambiguously and could not be read back")
		}
	}
	f := formOf(list)
	like := newItem(list, nil)
	if o, ok := like.(client.Object); ok {
		c.watch(ctx, gk, f, o)
	}
	own := c.s.ofKind(gk, lo.Namespace, f)
	for k, e := range own {
		if c.s.expired(e, now) {
			delete(own, k)
		}
	}
	if len(own) == 0 {
		err := c.inner.List(ctx, list, opts...)
		if err == nil && c.marks.forms(gk)&^f != 0 {
			_ = meta.EachListItem(list, func(item runtime.Object) error {
				if o, ok := item.(client.Object); ok {
					sk := sessionKey{gk: gk, ObjectKey: client.ObjectKeyFromObject(o)}
					c.readAlone(sk, c.s.get(sk), f, o)
				}
				return nil
			})
		}
		c.count(err)
		return err
	}
	if lo.FieldSelector != nil && !lo.FieldSelector.Empty() {
		return refuse("a field selector cannot be evaluated on this client's writes")
	}
	if lo.Limit > 0 || lo.Continue != "" {
		return refuse("a paginated list cannot have this client's writes merged in")
	}
	if err := c.inner.List(ctx, list, opts...); err != nil {
		return err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return fmt.Errorf("list %s: %w", gk, err)
	}
	// The list is one snapshot of the cache: every item tells how far the
	// form's cache had got in its namespace, before any entry is judged.
	for _, item := range items {
		if o, ok := item.(client.Object); ok {
			c.marks.raise(gk, f, o.GetNamespace(), o.GetResourceVersion())
		}
	}
	sel := lo.LabelSelector
	if sel == nil {
		sel = labels.Everything()
	}
	merged := make([]runtime.Object, 0, len(items)+len(own))
	served := false
	// The kind is read in another form too: an item newer than an entry
	// this form has caught up with becomes the entry (keepNewer).
	others := c.marks.forms(gk)&^f != 0
	for _, item := range items {
		o, ok := item.(client.Object)
		if !ok {
			merged = append(merged, item)
			continue
		}
		key := client.ObjectKeyFromObject(o)
		e, mine := own[key]
		if !mine {
			if others {
				sk := sessionKey{gk: gk, ObjectKey: key}
				c.readAlone(sk, c.s.get(sk), f, o)
			}
			merged = append(merged, item)
			continue
		}
		delete(own, key)
		d, e := c.judged(ctx, sessionKey{gk: gk, ObjectKey: key}, e, f, o, o)
		switch d {
		case serveCache:
			merged = append(merged, item)
		case serveNotFound:
			served = true
		case serveOwn:
			out, err := c.ownItem(item, e)
			if err != nil {
				return refuse(fmt.Sprintf("%s: %v", key, err))
			}
			if sel.Matches(labels.Set(out.GetLabels())) {
				merged = append(merged, out)
			}
			served = true
		default:
			return refuse(fmt.Sprintf("%s cannot be shown as this client last wrote it", key))
		}
	}
	// Entries the list did not show: created and not yet delivered, deleted,
	// or, by the cache's newer copy, out of the selector. Each is judged on
	// the cache's copy read by name, as a Get would.
	var added []client.Object
	for key, e := range own {
		o, ok := like.(client.Object)
		if !ok {
			return refuse(fmt.Sprintf("%T is not an object", like))
		}
		fresh, pool, err := scratchLike(o, f)
		if err != nil {
			return refuse(fmt.Sprintf("%s: %v", key, err))
		}
		var cached client.Object = fresh
		if err := c.inner.Get(ctx, key, fresh, shallowOnly...); err != nil {
			giveBack(pool, fresh)
			if !apierrors.IsNotFound(err) {
				return err
			}
			cached = nil
		}
		d, e := c.judged(ctx, sessionKey{gk: gk, ObjectKey: key}, e, f, o, cached)
		var out client.Object
		switch d {
		case serveCache:
			if cached != nil && sel.Matches(labels.Set(cached.GetLabels())) {
				// Changed between the List and this read: the newer copy.
				cp, ok := cached.DeepCopyObject().(client.Object)
				if ok {
					out = cp
				}
			}
		case serveNotFound:
			served = true
		case serveOwn:
			if out, err = c.ownItem(like, e); err != nil {
				giveBack(pool, fresh)
				return refuse(fmt.Sprintf("%s: %v", key, err))
			}
			if !sel.Matches(labels.Set(out.GetLabels())) {
				out = nil
			}
			served = true
		default:
			giveBack(pool, fresh)
			return refuse(fmt.Sprintf("%s cannot be shown as this client last wrote it", key))
		}
		if cached != nil {
			giveBack(pool, fresh)
		}
		if out != nil {
			added = append(added, out)
		}
	}
	slices.SortFunc(added, func(a, b client.Object) int {
		if n := strings.Compare(a.GetNamespace(), b.GetNamespace()); n != 0 {
			return n
		}
		return strings.Compare(a.GetName(), b.GetName())
	})
	for _, o := range added {
		merged = append(merged, o)
	}
	if len(added) > 0 {
		served = true
	}
	if err := meta.SetList(list, merged); err != nil {
		return fmt.Errorf("list %s: %w", gk, err)
	}
	if served {
		c.metrics().own.Inc()
	} else {
		c.metrics().cache.Inc()
	}
	return nil
}

// caughtUp marks form f of k caught up with e and counts it, if e was
// still pending for f.
func (c *Client) caughtUp(k sessionKey, e *ownEntry, f form) {
	if c.s.caughtUp(k, e, f) {
		c.metrics().caughtUp.Inc()
	}
}

// caughtUpOn is caughtUp that reports false when e is no longer k's entry,
// so that the caller judges again on the entry there now.
func (c *Client) caughtUpOn(k sessionKey, e *ownEntry, f form) bool {
	c.caughtUp(k, e, f)
	return c.s.get(k) == e || e.has(f)
}

// hasManagedFields reports whether obj carries managedFields, without
// converting an unstructured object's.
func hasManagedFields(obj client.Object) bool {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		mf, found, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", "managedFields")
		l, _ := mf.([]any)
		return found && len(l) > 0
	}
	return len(obj.GetManagedFields()) > 0
}

// ownItem returns e's object in the form of the list item like.
func (c *Client) ownItem(like runtime.Object, e *ownEntry) (client.Object, error) {
	o, ok := like.(client.Object)
	if !ok {
		return nil, fmt.Errorf("%T is not an object", like)
	}
	out, err := objcopy.EmptyLike(o)
	if err != nil {
		return nil, err
	}
	if err := into(c.scheme, e.obj, e.gvk, out); err != nil {
		return nil, err
	}
	if c.bareCache.Load() && hasManagedFields(out) {
		out.SetManagedFields(nil)
	}
	return out, nil
}

// newItem returns an empty item of list's item type.
func newItem(list client.ObjectList, items []runtime.Object) runtime.Object {
	switch l := list.(type) {
	case *metav1.PartialObjectMetadataList:
		p := &metav1.PartialObjectMetadata{}
		p.SetGroupVersionKind(l.GroupVersionKind().GroupVersion().WithKind(strings.TrimSuffix(l.GroupVersionKind().Kind, "List")))
		return p
	case runtime.Unstructured:
		u := &unstructured.Unstructured{}
		gvk := list.GetObjectKind().GroupVersionKind()
		u.SetGroupVersionKind(gvk.GroupVersion().WithKind(strings.TrimSuffix(gvk.Kind, "List")))
		return u
	}
	if len(items) > 0 {
		return items[0]
	}
	// An empty typed list: its Items field's element type names the item.
	if f := reflect.ValueOf(list).Elem().FieldByName("Items"); f.IsValid() && f.Kind() == reflect.Slice {
		t := f.Type().Elem()
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if o, ok := reflect.New(t).Interface().(runtime.Object); ok {
			return o
		}
	}
	return nil
}

// listKind returns the item kind of list.
func (c *Client) listKind(list client.ObjectList) (schema.GroupVersionKind, error) {
	var gvk schema.GroupVersionKind
	if formOf(list) == formTyped {
		var err error
		if gvk, err = apiutil.GVKForObject(list, c.scheme); err != nil {
			return gvk, fmt.Errorf("%w: %w", ErrUnknownKind, err)
		}
	} else {
		gvk = list.GetObjectKind().GroupVersionKind()
	}
	if !strings.HasSuffix(gvk.Kind, "List") {
		return gvk, fmt.Errorf("%s is not a list kind: %w", gvk, ErrUnknownKind)
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	return gvk, nil
}

// CheckOwner guards a reconcile's entry: it reads the owner key, of the
// Owners' kind, through this Client and returns an error that errors.Is
// ErrStale when the cache of anything the client wrote for the owner has
// not caught up (see OwnerTracker.Check). Call it once, before the
// reconcile Lists what it owns. An owner that is gone passes: the reconcile
// sees the NotFound itself. A Client without Owners returns
// ErrClientOptions.
func (c *Client) CheckOwner(ctx context.Context, key client.ObjectKey) error {
	if c.owners == nil {
		return ErrClientOptions
	}
	owner, err := objcopy.EmptyLike(c.owners.owner)
	if err != nil {
		return err
	}
	if err := c.Get(ctx, key, owner); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	return c.owners.Check(ctx, owner)
}

// Guard returns r with CheckOwner of the request at its entry: a refused
// owner ends the reconcile with CheckOwner's error before r runs. Put a
// requeue.UntilSettled around it to turn that error into a short requeue. An
// owner whose wait outlived the TTL with OwnerOptions.LiveReadOnExpiry (an
// *OwnerExpiredError) is not refused: r runs with a context that
// LiveReadRequired reports, and through which this Client Lists the kind
// that waited, in its namespace, from the APIReader. On a Client without
// Owners, Guard returns r itself: the Client's Gets and Lists already serve
// its own writes, and there is no owner to check.
func (c *Client) Guard(r reconcile.Reconciler) reconcile.Reconciler {
	if c.owners == nil {
		return r
	}
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		ctx, err := c.GuardEntry(ctx, req.NamespacedName)
		if err != nil {
			return reconcile.Result{}, err
		}
		return r.Reconcile(ctx, req)
	})
}

// GuardEntry is Guard's check, for a builder that guards a reconcile
// itself: CheckOwner, with an *OwnerExpiredError turned into the context
// the reconcile runs with (see Guard) and a nil error.
func (c *Client) GuardEntry(ctx context.Context, key client.ObjectKey) (context.Context, error) {
	return c.guarded(ctx, c.CheckOwner(ctx, key))
}

// GuardOwner is GuardEntry for an owner the caller has already read
// through this Client, so that the entry reads it once.
func (c *Client) GuardOwner(ctx context.Context, owner client.Object) (context.Context, error) {
	if c.owners == nil {
		return ctx, nil
	}
	return c.guarded(ctx, c.owners.Check(ctx, owner))
}

// guarded turns an *OwnerExpiredError into the live-read context.
func (c *Client) guarded(ctx context.Context, err error) (context.Context, error) {
	var expired *OwnerExpiredError
	if errors.As(err, &expired) {
		return context.WithValue(ctx, liveReadKey{}, expired), nil
	}
	return ctx, err
}

type liveReadKey struct{}

// LiveReadRequired reports whether ctx is a reconcile's whose owner waited
// for a cache longer than the TTL (OwnerOptions.LiveReadOnExpiry), and
// which kind: the reconcile should take its decision about that kind from
// the API reader. A Client does so for its Lists of the kind in the
// namespace when it has an APIReader.
func LiveReadRequired(ctx context.Context) (*OwnerExpiredError, bool) {
	e, ok := ctx.Value(liveReadKey{}).(*OwnerExpiredError)
	return e, ok
}

// listLive reports whether a List of gk in ns must be read live: the
// reconcile's owner waited past the TTL for that kind there.
func (c *Client) listLive(ctx context.Context, gk schema.GroupKind, ns string) bool {
	e, ok := LiveReadRequired(ctx)
	return ok && c.apiReader != nil && e.Kind == gk && (ns == "" || e.Namespace == "" || e.Namespace == ns)
}

// AmbiguousWrites reports whether a write of kind gk in namespace ns (in
// any namespace when ns is empty) ended ambiguously and could not be read
// back, and is younger than the TTL: until then, Lists of that kind there
// are refused. An owner-level guard refuses the owners of such a kind.
func (c *Client) AmbiguousWrites(gk schema.GroupKind, ns string) bool {
	return c.s.barred(gk, ns, c.clock.Now(), c.cacheReached())
}

// Create creates obj and keeps the server's answer.
func (c *Client) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	err := c.inner.Create(ctx, obj, opts...)
	return c.finishWrite(ctx, "create", obj, "", dryRun((&client.CreateOptions{}).ApplyOptions(opts).DryRun), err,
		func() error { return c.recordWrite(ctx, "create", obj, "") })
}

// Update updates obj and keeps the server's answer.
func (c *Client) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	sent := resourceVersionOf(obj)
	err := c.inner.Update(ctx, obj, opts...)
	return c.finishWrite(ctx, "update", obj, sent, dryRun((&client.UpdateOptions{}).ApplyOptions(opts).DryRun), err,
		func() error { return c.recordWrite(ctx, "update", obj, sent) })
}

// Patch patches obj, whatever the patch type, and keeps the server's
// answer.
func (c *Client) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	sent := patchSentAt(obj, patch)
	err := c.inner.Patch(ctx, obj, patch, opts...)
	return c.finishWrite(ctx, "patch", obj, sent, dryRun((&client.PatchOptions{}).ApplyOptions(opts).DryRun), err,
		func() error { return c.recordWrite(ctx, "patch", obj, sent) })
}

// Apply applies obj (server-side apply) and keeps the server's answer,
// which controller-runtime decodes into obj.
func (c *Client) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if err := c.inner.Apply(ctx, obj, opts...); err != nil {
		return err
	}
	if dryRun((&client.ApplyOptions{}).ApplyOptions(opts).DryRun) {
		return nil
	}
	c.recordApplied(ctx, "apply", obj)
	return nil
}

// Delete deletes obj and keeps what the server has after it, read live
// (see settle): NotFound until the cache shows the object gone, or the
// object still there (finalizers, an orphan or foreground propagation, a
// Pod's grace period) as the server has it.
func (c *Client) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	do := (&client.DeleteOptions{}).ApplyOptions(opts)
	err := c.inner.Delete(ctx, obj, opts...)
	if dryRun(do.DryRun) {
		return err
	}
	switch {
	case err == nil, apierrors.IsNotFound(err):
		if serr := c.settle(ctx, "delete", obj); serr != nil && err == nil {
			return serr
		}
	default:
		c.ambiguous(ctx, "delete", obj, "", err)
	}
	return err
}

// DeleteAllOf deletes every object of obj's kind that matches opts. What it
// deleted is not answered, so it is not kept: it is counted in
// racesafe_client_writes_unrecorded_total{verb="deleteallof"}.
func (c *Client) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	if err := c.inner.DeleteAllOf(ctx, obj, opts...); err != nil {
		return err
	}
	if !dryRun((&client.DeleteAllOfOptions{}).ApplyOptions(opts).DryRun) {
		c.metrics().unrecorded("deleteallof")
	}
	return nil
}

// Status returns a writer for the status subresource that keeps its
// answers, as Update and Patch do.
func (c *Client) Status() client.SubResourceWriter {
	return &subResourceClient{c: c, name: "status", inner: c.inner.SubResource("status")}
}

// SubResource returns a client for the named subresource whose writes are
// kept, as the Client's are.
func (c *Client) SubResource(subResource string) client.SubResourceClient {
	return &subResourceClient{c: c, name: subResource, inner: c.inner.SubResource(subResource)}
}

func resourceVersionOf(obj client.Object) string {
	if objcopy.IsNil(obj) {
		return ""
	}
	return obj.GetResourceVersion()
}

// recordWrite keeps obj, the server's answer to a write sent at sentRV.
func (c *Client) recordWrite(ctx context.Context, verb string, obj client.Object, sentRV string) error {
	key := client.ObjectKeyFromObject(obj)
	k, err := c.tracker.kindOf(obj, formOf(obj))
	if err != nil {
		c.metrics().unrecorded(verb)
		return &NotRecordedError{Verb: verb, Key: key, Err: err}
	}
	if key.Name == "" || !wellFormed(obj.GetResourceVersion()) {
		c.metrics().unrecorded(verb)
		return &NotRecordedError{Verb: verb, Key: key, Err: fmt.Errorf("the answer has no name or no valid resourceVersion: %w", ErrInvalidResourceVersion)}
	}
	// An answer terminating without finalizers may be an object the write
	// deleted (it released the last finalizer) or one still there (a Pod
	// in its grace period): the answer does not say, the server does.
	if obj.GetDeletionTimestamp() != nil && len(obj.GetFinalizers()) == 0 && verb != "settle" {
		return c.settle(ctx, verb, obj)
	}
	gvk, err := apiutil.GVKForObject(obj, c.scheme)
	if err != nil {
		c.metrics().unrecorded(verb)
		return &NotRecordedError{Verb: verb, Key: key, Err: err}
	}
	keep, err := objcopy.DeepCopy(obj)
	if err != nil {
		c.metrics().unrecorded(verb)
		return &NotRecordedError{Verb: verb, Key: key, Err: err}
	}
	if c.bareCache.Load() && hasManagedFields(keep) {
		keep.SetManagedFields(nil)
	}
	now := c.clock.Now()
	c.put(sessionKey{gk: k.gk, ObjectKey: key}, &ownEntry{state: ownWritten, uid: obj.GetUID(), rv: obj.GetResourceVersion(), gvk: gvk, obj: keep, at: now}, now)
	if c.shared {
		if err := c.tracker.ExpectWrite(obj); err != nil {
			return &NotRecordedError{Verb: verb, Key: key, Err: err}
		}
	}
	if c.owners == nil {
		return nil
	}
	c.tellOwnerScope()
	if err := c.owners.ExpectOwnedWrite(ctx, obj); err != nil && !notOwned(err) {
		return &NotRecordedError{Verb: verb, Key: key, Err: err}
	}
	return nil
}

// recordDeletion keeps obj's name free at freeAt, a version a live List
// was served at: every copy at or below it is NotFound.
func (c *Client) recordDeletion(ctx context.Context, obj client.Object, freeAt string) error {
	key := client.ObjectKeyFromObject(obj)
	k, err := c.tracker.kindOf(obj, formOf(obj))
	if err != nil || key.Name == "" {
		if err == nil {
			err = ErrNoName
		}
		c.metrics().unrecorded("delete")
		return &NotRecordedError{Verb: "delete", Key: key, Err: err}
	}
	existed := c.newestKnown(k.gk, key, obj)
	rv := freeAt
	if !wellFormed(rv) {
		rv = existed
	}
	now := c.clock.Now()
	c.put(sessionKey{gk: k.gk, ObjectKey: key}, &ownEntry{state: ownGone, uid: obj.GetUID(), rv: rv, existed: existed, at: now}, now)
	if c.shared && rv != "" {
		if err := c.tracker.ExpectDeletion(obj); err != nil {
			return &NotRecordedError{Verb: "delete", Key: key, Err: err}
		}
	}
	if c.owners == nil {
		return nil
	}
	c.tellOwnerScope()
	if err := c.owners.ExpectOwnedDeletion(ctx, obj); err != nil && !notOwned(err) {
		return &NotRecordedError{Verb: "delete", Key: key, Err: err}
	}
	return nil
}

func (c *Client) put(k sessionKey, e *ownEntry, now time.Time) {
	e.deadline = ticks(addSaturated(int64(c.ticker.at(e.at)), c.s.ttl))
	c.s.put(k, e)
	c.s.sweep(now)
}

// recordApplied keeps the answer decoded into an apply configuration.
func (c *Client) recordApplied(ctx context.Context, verb string, obj runtime.ApplyConfiguration) {
	u, err := applyAnswer(obj)
	if err != nil {
		c.metrics().unrecorded(verb)
		log.FromContext(ctx).V(1).Info("write not kept", "controller", c.metrics().name, "verb", verb, "error", err.Error())
		return
	}
	if err := c.recordWrite(ctx, verb, u, ""); err != nil {
		log.FromContext(ctx).V(1).Info("write not kept", "controller", c.metrics().name, "verb", verb, "error", err.Error())
	}
}

// finishWrite ends a write of obj, sent at sentRV, that the server
// answered with err: a failed write is handed to ambiguous, which tells
// whether it was applied all the same, and a successful one is kept by
// record. A dry run is neither. It returns err, or record's error.
func (c *Client) finishWrite(ctx context.Context, verb string, obj client.Object, sentRV string, dry bool, err error, record func() error) error {
	if err != nil {
		switch {
		case dry:
		case apierrors.IsNotFound(err) && verb != "create":
			// The object is gone: what the Client kept of it must end.
			_ = c.settle(ctx, verb, obj)
		default:
			c.ambiguous(ctx, verb, obj, sentRV, err)
		}
		return err
	}
	if dry {
		return nil
	}
	return record()
}

// isAmbiguous reports whether err leaves open whether the server applied
// the write: it may have been applied and its answer lost.
func isAmbiguous(err error) bool {
	// A connection that was never made sent nothing.
	var oe *net.OpError
	if errors.Is(err, syscall.ECONNREFUSED) || (errors.As(err, &oe) && oe.Op == "dial") {
		return false
	}
	if apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsInternalError(err) ||
		apierrors.IsUnexpectedServerError(err) || apierrors.IsServiceUnavailable(err) {
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	if status, ok := err.(apierrors.APIStatus); ok && status.Status().Code >= 500 {
		return true
	}
	return false
}

// ambiguous handles a failed write: when the failure leaves open whether
// the server applied it, one live read through the APIReader tells. Where
// that read fails too (the API server unreachable), the object's Get and
// its kind's Lists in its namespace are refused, and a refused read tries
// the read back again (at most once per readBackInterval) until it tells,
// or the TTL. Without an APIReader, or for an object without a name that is
// not a child of the Owners' kind, they are refused until the TTL. sentRV
// is the resourceVersion an Update or Patch was sent at, "" if none.
func (c *Client) ambiguous(ctx context.Context, verb string, obj client.Object, sentRV string, err error) {
	if !isAmbiguous(err) || objcopy.IsNil(obj) {
		return
	}
	k, kerr := c.tracker.kindOf(obj, formOf(obj))
	if kerr != nil {
		c.metrics().unrecorded(verb)
		return
	}
	key := client.ObjectKeyFromObject(obj)
	now := c.clock.Now()
	sent := obj
	if key.Name != "" {
		sk := sessionKey{gk: k.gk, ObjectKey: key}
		sent = addressed(verb, obj, sentRV, c.s.get(sk))
		// Unknown from the newest version known: a copy the caller sent
		// may be older than one the session returned.
		c.put(sk, &ownEntry{state: ownUnknown, uid: obj.GetUID(), rv: c.newestKnown(k.gk, key, obj), at: now}, now)
	}
	c.s.barrier(k.gk, key.Namespace, now, "")
	told, retry := c.readBack(ctx, verb, sent, k.gk, now)
	if !told && retry {
		if keep, cerr := objcopy.DeepCopy(sent); cerr == nil {
			c.unresolved.add(unresolvedWrite{verb: verb, obj: keep, gk: k.gk, at: now})
		}
	}
	log.FromContext(ctx).V(1).Info("write ended ambiguously", "controller", c.metrics().name, "verb", verb,
		"kind", k.gk, "object", key, "readBack", map[bool]string{true: "told", false: "failed"}[told], "error", err.Error())
}

// addressed returns obj or, for an Update or Patch that did not carry them
// (statusupdate's Patcher sends into an empty object, its precondition in
// the body), a copy naming what the write addressed: the version sentRV it
// was sent at and, when kept, this client's entry for the object, is at
// that version, its UID. A read back that finds the object gone records
// that incarnation's deletion at that version.
func addressed(verb string, obj client.Object, sentRV string, kept *ownEntry) client.Object {
	if verb != "update" && verb != "patch" {
		return obj
	}
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	if rv == "" {
		rv = sentRV
	}
	if uid == "" && kept != nil && rv != "" && kept.rv == rv {
		uid = kept.uid
	}
	if uid == obj.GetUID() && rv == obj.GetResourceVersion() {
		return obj
	}
	cp, err := objcopy.DeepCopy(obj)
	if err != nil {
		return obj
	}
	cp.SetUID(uid)
	cp.SetResourceVersion(rv)
	return cp
}

// readBack reads an ambiguous write's object live and keeps what it tells:
// the object as the server has it, its deletion, or, for a Create with
// generateName of a child of the Owners' kind, the version the cache must
// reach (liveVersion). It lifts the kind's barrier in the namespace when
// it told and no other write there is unresolved. retry says whether a
// later read back may tell what this one could not.
func (c *Client) readBack(ctx context.Context, verb string, obj client.Object, gk schema.GroupKind, sent time.Time) (told, retry bool) {
	key := client.ObjectKeyFromObject(obj)
	now := c.clock.Now()
	switch {
	case c.apiReader == nil:
		return false, false
	case key.Name != "":
		if told, retry = c.readLive(ctx, verb, obj, gk, sent); !told {
			return false, retry
		}
	default:
		rv, absent, retry := c.liveVersion(ctx, verb, obj)
		switch {
		case absent && now.Before(sent.Add(c.requestTimeout)):
			// Not there yet proves nothing while the server may still be
			// processing the request (a slow webhook, a slow etcd): only
			// its request deadline ends that.
			return false, true
		case absent:
		case rv != "":
			c.unresolved.forget(obj)
			if !c.unresolved.in(gk, key.Namespace) {
				// The Lists wait for that version now, not for the TTL;
				// with another write there unresolved they keep waiting
				// for it (the owner's guard waits for rv either way).
				c.s.barrier(gk, key.Namespace, now, rv)
			}
			return true, false
		default:
			return false, retry
		}
	}
	c.unresolved.forget(obj)
	if !c.unresolved.in(gk, key.Namespace) {
		c.s.unbar(gk, key.Namespace)
	}
	return true, false
}

// retryReadBacks tries the read back of every unresolved ambiguous write
// again, at most once per readBackInterval, before a read that one of them
// would refuse.
func (c *Client) retryReadBacks(ctx context.Context) {
	if c.unresolved.empty() {
		return
	}
	now := c.clock.Now()
	next := c.nextReadBack.Load()
	if now.UnixNano() < next || !c.nextReadBack.CompareAndSwap(next, now.Add(readBackInterval).UnixNano()) {
		return
	}
	ctx = forRead(ctx)
	for _, w := range c.unresolved.expire(now, c.s.ttl) {
		if ctx.Err() != nil {
			return
		}
		c.readBack(ctx, w.verb, w.obj, w.gk, w.at)
	}
}

// tellOwnerScope tells the Owners whether their kind is cluster-scoped, from
// the wrapped client's RESTMapper, when nobody has: a cluster-scoped
// owner's children are recorded under the owner's name alone.
func (c *Client) tellOwnerScope() {
	if c.owners.scopeKnown() {
		return
	}
	if namespaced, err := c.inner.IsObjectNamespaced(c.owners.owner); err == nil {
		c.owners.setScope(!namespaced)
	}
}

// liveVersion handles an ambiguous Create of an object without a name (a
// generateName) whose controller is the Owners' kind. It lists the kind in
// the object's namespace live (metadata only) and keeps the objects the
// same owner incarnation controls under the same generateName: the child,
// if the server applied the Create, is one of them. With none, absent is
// true: the Create was not applied (as of that read). Otherwise it records
// for the owner that the cache must reach the highest resourceVersion among
// them, and returns it: the owner's guard refuses, and the barrier on
// Lists holds, only until a cache that shows the child if it was applied.
//
// It waits for the siblings' version, not the List's: the List's version is
// the whole store's (leases and events move it several times a second), and
// a cache of one kind reaches it only with that kind's next event, which a
// quiet namespace may not have for minutes (the soak under create faults
// waited out its 3-minute wave deadline). A sibling's version is one the
// kind's own events deliver. It returns "" and false when it cannot tell;
// retry then says whether a later call may (the List failed).
func (c *Client) liveVersion(ctx context.Context, verb string, obj client.Object) (rv string, absent, retry bool) {
	if verb != "create" || obj.GetName() != "" || c.apiReader == nil || c.owners == nil {
		return "", false, false
	}
	_, ownerUID, err := c.owners.controllerRef(obj, client.ObjectKey{Namespace: obj.GetNamespace()})
	if err != nil {
		return "", false, false
	}
	gvk, err := apiutil.GVKForObject(obj, c.scheme)
	if err != nil {
		return "", false, false
	}
	rctx, cancel := readBackContext(ctx, 10*time.Second)
	defer cancel()
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	opts := []client.ListOption{client.InNamespace(obj.GetNamespace()), client.Limit(500)}
	for {
		if err := c.apiReader.List(rctx, list, opts...); err != nil {
			return "", false, true
		}
		for i := range list.Items {
			it := &list.Items[i]
			ref := metav1.GetControllerOfNoCopy(it)
			if ref == nil || ref.UID != ownerUID || !strings.HasPrefix(it.GetName(), obj.GetGenerateName()) {
				continue
			}
			if !wellFormed(it.GetResourceVersion()) {
				return "", false, false
			}
			if cmp, _ := resourceversion.CompareResourceVersion(it.GetResourceVersion(), rv); rv == "" || cmp > 0 {
				rv = it.GetResourceVersion()
			}
		}
		if list.GetContinue() == "" {
			break
		}
		opts = []client.ListOption{client.InNamespace(obj.GetNamespace()), client.Limit(500), client.Continue(list.GetContinue())}
	}
	if rv == "" {
		return "", true, false
	}
	c.tellOwnerScope()
	if err := c.owners.wroteUnnamed(ctx, obj, rv); err != nil {
		return "", false, false
	}
	return rv, false, false
}

// cacheReached returns what tells the session whether the cache of a kind
// has reached a version: the Owners' view of the kinds they read, nil
// without Owners.
func (c *Client) cacheReached() func(schema.GroupKind, string, string) bool {
	if c.owners == nil {
		return nil
	}
	return c.owners.cacheAt
}

// notOwned: the object is not the Owners' to track, which is not an error
// of the write.
func notOwned(err error) bool {
	return errors.Is(err, ErrNotOwned) || errors.Is(err, ErrOwnerKind)
}

func dryRun(modes []string) bool { return len(modes) > 0 }

var _ client.SubResourceClient = (*subResourceClient)(nil)

// subResourceClient records the writes of one subresource.
type subResourceClient struct {
	c     *Client
	name  string
	inner client.SubResourceClient
}

func (s *subResourceClient) Get(ctx context.Context, obj client.Object, subResource client.Object, opts ...client.SubResourceGetOption) error {
	return s.inner.Get(ctx, obj, subResource, opts...)
}

// Create creates a subresource (an eviction, a token request). Its answer
// is the subresource, not the parent: nothing is kept, and it is counted
// as unrecorded.
func (s *subResourceClient) Create(ctx context.Context, obj client.Object, subResource client.Object, opts ...client.SubResourceCreateOption) error {
	if err := s.inner.Create(ctx, obj, subResource, opts...); err != nil {
		return err
	}
	if !dryRun((&client.SubResourceCreateOptions{}).ApplyOptions(opts).DryRun) {
		s.c.metrics().unrecorded("subresource_create")
	}
	return nil
}

func (s *subResourceClient) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	o := (&client.SubResourceUpdateOptions{}).ApplyOptions(opts)
	sent := resourceVersionOf(obj)
	err := s.inner.Update(ctx, obj, opts...)
	// Applied although it failed, maybe: the parent is read back as after
	// an ambiguous Update (a scale's body is about the parent all the
	// same).
	return s.c.finishWrite(ctx, "update", obj, sent, dryRun(o.DryRun), err,
		func() error { return s.record(ctx, "subresource_update", obj, o.SubResourceBody, sent) })
}

func (s *subResourceClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	o := (&client.SubResourcePatchOptions{}).ApplyOptions(opts)
	sent := patchSentAt(obj, patch)
	err := s.inner.Patch(ctx, obj, patch, opts...)
	return s.c.finishWrite(ctx, "patch", obj, sent, dryRun(o.DryRun), err,
		func() error { return s.record(ctx, "subresource_patch", obj, o.SubResourceBody, sent) })
}

func (s *subResourceClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	if err := s.inner.Apply(ctx, obj, opts...); err != nil {
		return err
	}
	if !dryRun((&client.SubResourceApplyOptions{}).ApplyOpts(opts).DryRun) {
		s.c.recordApplied(ctx, "subresource_apply", obj)
	}
	return nil
}

// record keeps a subresource write. With a body, the answer was decoded
// into the body, whose resourceVersion is the parent's: the parent is kept
// at it, by resourceVersion only, so a cache older than it is refused.
func (s *subResourceClient) record(ctx context.Context, verb string, obj, body client.Object, sentRV string) error {
	if body == nil {
		return s.c.recordWrite(ctx, verb, obj, sentRV)
	}
	key := client.ObjectKeyFromObject(obj)
	k, err := s.c.tracker.kindOf(obj, formOf(obj))
	rv := body.GetResourceVersion()
	if err != nil || key.Name == "" {
		if err == nil {
			err = ErrNoName
		}
		s.c.metrics().unrecorded(verb)
		return &NotRecordedError{Verb: verb, Key: key, Err: err}
	}
	if !wellFormed(rv) {
		// Acknowledged without the parent's version: the server tells it.
		return s.c.settle(ctx, verb, obj)
	}
	now := s.c.clock.Now()
	uid := obj.GetUID()
	if uid == "" {
		uid = body.GetUID()
	}
	s.c.put(sessionKey{gk: k.gk, ObjectKey: key}, &ownEntry{state: ownWritten, uid: uid, rv: rv, at: now}, now)
	return nil
}

// patchSentAt returns the resourceVersion a patch of obj is sent at: obj's,
// or, for a patch sent into an empty object (statusupdate's Patcher
// decodes the answer into one), the metadata.resourceVersion a merge patch
// carries in its body (the optimistic lock's precondition); "" when it has
// none.
func patchSentAt(obj client.Object, patch client.Patch) string {
	if objcopy.IsNil(obj) {
		return ""
	}
	if rv := obj.GetResourceVersion(); rv != "" || patch == nil {
		return rv
	}
	switch patch.Type() {
	case types.MergePatchType, types.StrategicMergePatchType:
	default:
		return ""
	}
	data, err := patch.Data(obj)
	if err != nil || !bytes.Contains(data, []byte(`"resourceVersion"`)) {
		return ""
	}
	var body struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if json.Unmarshal(data, &body) != nil {
		return ""
	}
	return body.Metadata.ResourceVersion
}
