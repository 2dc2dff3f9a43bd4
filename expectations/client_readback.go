package expectations

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/racesafe/racesafe/internal/objcopy"
)

// readBackInterval is how often a refused read tries again the read back
// of ambiguous writes whose first read back failed.
const readBackInterval = time.Second

// unresolvedWrite is an ambiguous write whose read back failed.
type unresolvedWrite struct {
	verb string
	obj  client.Object // a copy of what was sent
	gk   schema.GroupKind
	at   time.Time
}

// unresolvedWrites is the Client's list of them, safe for concurrent use.
type unresolvedWrites struct {
	mu sync.Mutex
	w  []unresolvedWrite
}

func (u *unresolvedWrites) add(w unresolvedWrite) {
	u.mu.Lock()
	u.w = append(u.w, w)
	u.mu.Unlock()
}

func (u *unresolvedWrites) empty() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.w) == 0
}

// forget drops the writes of obj's key (and, for a Create with
// generateName, of its generateName and controller): one read back told
// what all of them became.
func (u *unresolvedWrites) forget(obj client.Object) {
	u.mu.Lock()
	defer u.mu.Unlock()
	kept := u.w[:0]
	for _, w := range u.w {
		if !sameTarget(w.obj, obj) {
			kept = append(kept, w)
		}
	}
	clear(u.w[len(kept):])
	u.w = kept
}

// in reports whether a write of gk in namespace ns is unresolved.
func (u *unresolvedWrites) in(gk schema.GroupKind, ns string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, w := range u.w {
		if w.gk == gk && w.obj.GetNamespace() == ns {
			return true
		}
	}
	return false
}

// expire drops the writes older than ttl (their entries and barriers have
// gone with it) and returns a copy of the rest.
func (u *unresolvedWrites) expire(now time.Time, ttl time.Duration) []unresolvedWrite {
	u.mu.Lock()
	defer u.mu.Unlock()
	kept := u.w[:0]
	for _, w := range u.w {
		if now.Sub(w.at) < ttl {
			kept = append(kept, w)
		}
	}
	clear(u.w[len(kept):])
	u.w = kept
	return append([]unresolvedWrite(nil), kept...)
}

func sameTarget(a, b client.Object) bool {
	if a.GetNamespace() != b.GetNamespace() || a.GetName() != b.GetName() {
		return false
	}
	if a.GetName() != "" {
		return true
	}
	return a.GetGenerateName() == b.GetGenerateName()
}

type forReadKey struct{}

// forRead marks the read backs a read retries (retryReadBacks): they run
// on the reader's context, within its deadline, whereas a write's read
// back outlives the write's context, which may be what ended it.
func forRead(ctx context.Context) context.Context {
	return context.WithValue(ctx, forReadKey{}, true)
}

// readBackContext is the context of one live read made for a write: the
// caller's, within its deadline, for a read's retry; detached from it for
// a write's read back; bounded by timeout either way.
func readBackContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if v, _ := ctx.Value(forReadKey{}).(bool); !v {
		ctx = context.WithoutCancel(ctx)
	}
	return context.WithTimeout(ctx, timeout)
}

// settle ends a write whose answer does not say what the server has: a
// Delete (answered with a status, not the object), a write answered
// NotFound, an answer terminating without finalizers (deleted by the write,
// or a Pod in its grace period), a subresource answer without a version. It
// reads the object live, once, and keeps what the server has, as if the
// Client had written it: the object as it is, or, when it is gone, the
// name free at the version of a live List made just before the read, so
// that every copy at that version or older is NotFound, whichever
// incarnation or copy the caller held. Where the live reads fail, the
// object's reads are refused and the read back is retried, as for an
// ambiguous write.
func (c *Client) settle(ctx context.Context, verb string, obj client.Object) error {
	if objcopy.IsNil(obj) {
		return nil
	}
	key := client.ObjectKeyFromObject(obj)
	k, err := c.tracker.kindOf(obj, formOf(obj))
	if err != nil || key.Name == "" {
		if err == nil {
			err = ErrNoName
		}
		c.metrics().unrecorded(verb)
		return &NotRecordedError{Verb: verb, Key: key, Err: err}
	}
	told, retry := c.readLive(ctx, verb, obj, k.gk, c.clock.Now())
	if told {
		return nil
	}
	now := c.clock.Now()
	sk := sessionKey{gk: k.gk, ObjectKey: key}
	c.put(sk, &ownEntry{state: ownUnknown, uid: obj.GetUID(), rv: c.newestKnown(k.gk, key, obj), at: now}, now)
	if retry {
		if keep, cerr := objcopy.DeepCopy(obj); cerr == nil {
			c.unresolved.add(unresolvedWrite{verb: verb, obj: keep, gk: k.gk, at: now})
		}
	}
	return nil
}

// readLive reads a named object live and keeps what the server has (see
// settle). sent is when the write was sent: a Create the read finds absent
// may still be in flight until the server's request deadline, but a name
// found free at a version is free for every copy at or below it, which is
// all a Get needs; a later create is newer. told reports whether the read
// told; retry whether a later one may.
func (c *Client) readLive(ctx context.Context, verb string, obj client.Object, gk schema.GroupKind, sent time.Time) (told, retry bool) {
	if c.apiReader == nil {
		return false, false
	}
	key := client.ObjectKeyFromObject(obj)
	// A write's context may be what ended: its read back gets a deadline
	// of its own, no longer than the server's; a read's retry keeps the
	// reader's (readBackContext).
	rctx, cancel := readBackContext(ctx, c.readBackTimeout())
	defer cancel()
	free, err := c.listVersion(rctx, obj, gk)
	if err != nil {
		return false, true
	}
	live, err := objcopy.EmptyLike(obj)
	if err != nil {
		return false, false
	}
	switch gerr := c.apiReader.Get(rctx, key, live); {
	case gerr == nil:
		return c.keepLive(ctx, live) == nil, false
	case apierrors.IsNotFound(gerr):
		existed := c.newestKnown(gk, key, obj)
		if cv := c.cachedVersion(ctx, key, obj); cv != "" && (existed == "" || newer(cv, existed)) {
			existed = cv
		}
		if free == "" {
			// The reader's List tells no version (a fake client): the
			// newest version the object is known to have existed at
			// stands in; for a key-only Delete of an object this Client
			// never wrote, that is the cache's copy, read after the
			// server said it is gone.
			free = existed
		}
		now := c.clock.Now()
		c.put(sessionKey{gk: gk, ObjectKey: key}, &ownEntry{state: ownGone, uid: obj.GetUID(), rv: free, existed: existed, at: now}, now)
		if c.owners != nil {
			c.tellOwnerScope()
			if err := c.owners.ExpectOwnedDeletion(ctx, obj); err != nil && !notOwned(err) {
				log.FromContext(ctx).V(1).Info("owned deletion not recorded", "controller", c.metrics().name, "object", key, "error", err.Error())
			}
		}
		return true, false
	default:
		return false, true
	}
}

// cachedVersion returns the version of the cache's copy of key, "" when
// the cache has none, or one of another incarnation than obj's.
func (c *Client) cachedVersion(ctx context.Context, key client.ObjectKey, obj client.Object) string {
	cached, err := objcopy.EmptyLike(obj)
	if err != nil || c.inner.Get(ctx, key, cached, shallowOnly...) != nil {
		return ""
	}
	if uid := obj.GetUID(); uid != "" && cached.GetUID() != uid {
		return ""
	}
	if rv := cached.GetResourceVersion(); wellFormed(rv) {
		return rv
	}
	return ""
}

// keepLive keeps live, the server's copy read after a write, as a write's
// answer.
func (c *Client) keepLive(ctx context.Context, live client.Object) error {
	return c.recordWrite(ctx, "settle", live, "")
}

// listVersion returns the version of a live List of obj's kind in its
// namespace (metadata only, one item): the server's version now, which a
// read made after it is at least as new as. "" when the reader's List
// tells none (a fake client).
func (c *Client) listVersion(ctx context.Context, obj client.Object, gk schema.GroupKind) (string, error) {
	gvk, err := apiutil.GVKForObject(obj, c.scheme)
	if err != nil {
		gvk = obj.GetObjectKind().GroupVersionKind()
	}
	if gvk.Kind == "" {
		gvk = gk.WithVersion("")
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := c.apiReader.List(ctx, list, client.InNamespace(obj.GetNamespace()), client.Limit(1)); err != nil {
		return "", err
	}
	rv := list.GetResourceVersion()
	if !wellFormed(rv) {
		return "", nil
	}
	return rv, nil
}

// readBackTimeout bounds a live read made for a write: the request
// timeout, at most 10 seconds.
func (c *Client) readBackTimeout() time.Duration {
	if c.requestTimeout > 0 && c.requestTimeout < 10*time.Second {
		return c.requestTimeout
	}
	return 10 * time.Second
}

// newestKnown returns the newest well-formed resourceVersion of key that
// obj or this Client's entry carries, "" when neither has one.
func (c *Client) newestKnown(gk schema.GroupKind, key client.ObjectKey, obj client.Object) string {
	rv := obj.GetResourceVersion()
	if !wellFormed(rv) {
		rv = ""
	}
	if e := c.s.get(sessionKey{gk: gk, ObjectKey: key}); e != nil && wellFormed(e.rv) && (rv == "" || newer(e.rv, rv)) {
		rv = e.rv
	}
	return rv
}
