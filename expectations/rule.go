package expectations

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/racesafe/racesafe/internal/objcopy"
)

// This file is the Client's read rule, stated in the package documentation
// ("The rule"): judge decides what one read of one object serves, from the
// Client's entry for it, the cache's copy, and whether the cache of the
// form read has reached the entry's version. Get, List and the List's
// check of entries it did not list all end here.

// judge decides what a read in one form serves for an object with entry e,
// given cached, the cache's copy in that form (nil for NotFound), and
// reached, whether that form's cache has delivered every event up to a
// version in the object's namespace. caught reports whether the form's
// cache has caught up with e: from then on the cache alone answers.
func judge(e *ownEntry, cached client.Object, reached func(rv string) bool) (d decision, caught bool) {
	if cached == nil {
		switch {
		case e.state == ownGone:
			// NotFound is the deletion's answer. The cache has delivered
			// the deletion once it has also delivered a version the
			// object existed at: a cache that has not delivered even
			// the object's create shows NotFound too, and delivers the
			// older copy next (the history checker's seed 115).
			return serveCache, reached(e.rv) || (e.existed != "" && reached(e.existed))
		case e.rv != "" && reached(e.rv):
			// The cache delivered everything up to our version and shows
			// nothing: another writer deleted it since.
			return serveCache, true
		case e.state == ownWritten && e.obj != nil:
			return serveOwn, false // a Create not delivered yet
		}
		return serveRefused, false
	}
	if e.rv == "" {
		return serveRefused, false
	}
	cmp, err := resourceversion.CompareResourceVersion(cached.GetResourceVersion(), e.rv)
	if err != nil {
		return serveRefused, false
	}
	switch {
	case cmp > 0:
		// Later than anything this client knows: another writer's, a
		// successor incarnation, the server marking it terminating.
		return serveCache, true
	case cmp == 0 && e.state == ownWritten:
		// One resourceVersion is one write: this one.
		return serveCache, true
	}
	// The cache's copy is this client's entry or older: the entry wins.
	return own(e), false
}

// own is what an entry newer than the cache serves.
func own(e *ownEntry) decision {
	switch {
	case e.state == ownGone:
		return serveNotFound
	case e.state == ownWritten && e.obj != nil:
		return serveOwn
	}
	return serveRefused
}

// formNS names one form of a kind in one namespace ("" for cluster-scoped
// objects): the unit a cache's progress is known in.
type formNS struct {
	gk schema.GroupKind
	f  form
	ns string
}

// formKind is one form of a kind: one informer.
type formKind struct {
	gk schema.GroupKind
	f  form
}

// watermarks tells how far each form's cache has got: the highest
// resourceVersion it is known to have delivered in a namespace. A watch
// delivers one stream in resourceVersion order, so once the cache handed
// out, or its informer delivered, an object at rv, it has applied every
// event at or below rv of that stream. A multi-namespace cache runs one
// stream per namespace, hence the namespace in the key; a form whose
// informer is one client-go informer (it exposes its store) is one stream
// for every namespace, and keeps one mark, so that namespaces coming and
// going are not remembered. Sources: what the cache returns to this
// Client's reads, the event handler added to each informer the Client reads
// (ClientOptions.Cache), and client-go's store version where it tells one.
type watermarks struct {
	mu    sync.Mutex
	seen  map[formNS]string
	kinds map[formKind]*formInformer
}

type formInformer struct {
	store versionedStore // nil when the informer cannot say
	// oneStream: one informer, one watch for every namespace.
	oneStream bool
	// since is when the Client's handler was added to the informer, zero
	// until it is: the handler hears of no deletion delivered before.
	since time.Time
	// deaf: the Client has no informers (ClientOptions.Cache) and hears
	// no events; its marks alone tell.
	deaf bool
}

// blind reports whether form f's informer of gk may have delivered the
// deletion of e's object before the Client's handler heard it: the Client
// reads through a cache (ClientOptions.Cache) and e was written, or last
// checked live, before the handler was added (or it could not be). A
// NotFound in that form then says nothing the Client can judge: a
// deletion missed, or a create not delivered yet.
func (w *watermarks) blind(gk schema.GroupKind, f form, e *ownEntry) bool {
	w.mu.Lock()
	inf := w.kinds[formKind{gk: gk, f: f}]
	w.mu.Unlock()
	if inf == nil || inf.deaf {
		return false
	}
	at := e.at
	if l := e.checked.Load(); l != 0 {
		at = time.Unix(0, l)
	}
	return inf.since.IsZero() || at.Before(inf.since)
}

// key is where the mark of form f of gk in ns is kept; w.mu is held.
func (w *watermarks) key(gk schema.GroupKind, f form, ns string) formNS {
	if inf := w.kinds[formKind{gk: gk, f: f}]; inf != nil && inf.oneStream {
		ns = ""
	}
	return formNS{gk: gk, f: f, ns: ns}
}

func newWatermarks() *watermarks {
	return &watermarks{seen: make(map[formNS]string), kinds: make(map[formKind]*formInformer)}
}

// raise records that the cache of form f of gk delivered rv in ns.
func (w *watermarks) raise(gk schema.GroupKind, f form, ns, rv string) {
	if !wellFormed(rv) {
		return
	}
	w.mu.Lock()
	k := w.key(gk, f, ns)
	if cur, found := w.seen[k]; !found || newer(rv, cur) {
		w.seen[k] = rv
	}
	w.mu.Unlock()
}

// reached reports whether form f of gk has delivered rv in ns.
func (w *watermarks) reached(gk schema.GroupKind, f form, ns, rv string) bool {
	if rv == "" {
		return false
	}
	w.mu.Lock()
	cur := w.seen[w.key(gk, f, ns)]
	inf := w.kinds[formKind{gk: gk, f: f}]
	w.mu.Unlock()
	if inf != nil && inf.store != nil {
		if sv := inf.store.LastStoreSyncResourceVersion(); sv != "" && (cur == "" || newer(sv, cur)) {
			cur = sv
		}
	}
	if cur == "" {
		return false
	}
	cmp, err := resourceversion.CompareResourceVersion(cur, rv)
	return err == nil && cmp >= 0
}

// forms returns the forms of gk this Client has read.
func (w *watermarks) forms(gk schema.GroupKind) form {
	w.mu.Lock()
	defer w.mu.Unlock()
	var fs form
	for k := range w.kinds {
		if k.gk == gk {
			fs |= k.f
		}
	}
	return fs
}

// watch notes that the Client reads form f of gk and, with an informer
// source, adds a handler to that informer (which the read itself has made
// the cache start): its events raise the watermark and mark the entries
// they show caught up, so that another writer's deletion is seen without a
// read and the pending gauge falls as the cache catches up.
func (c *Client) watch(ctx context.Context, gk schema.GroupKind, f form, like client.Object) {
	w := c.marks
	k := formKind{gk: gk, f: f}
	c.formsRead.Or(uint32(f))
	w.mu.Lock()
	_, known := w.kinds[k]
	if !known {
		w.kinds[k] = &formInformer{deaf: c.informers == nil}
		for o := range w.kinds {
			if o.gk == gk && o.f != f {
				c.multiForm.Store(true)
			}
		}
	}
	w.mu.Unlock()
	if known || c.informers == nil {
		return
	}
	proto, err := emptyOf(like)
	if err != nil {
		return
	}
	inf, err := c.informers.GetInformer(ctx, proto, cache.BlockUntilSynced(false))
	if err != nil {
		return
	}
	fi := &formInformer{}
	if s, ok := inf.(interface{ GetStore() toolscache.Store }); ok {
		fi.store, _ = s.GetStore().(versionedStore)
		fi.oneStream = true
	}
	w.mu.Lock()
	w.kinds[k] = fi
	if fi.oneStream {
		// Marks kept per namespace before the informer was known: the
		// stream's mark is their highest.
		one := formNS{gk: gk, f: f}
		for m, rv := range w.seen {
			if m.gk == gk && m.f == f && m.ns != "" {
				if cur, found := w.seen[one]; !found || newer(rv, cur) {
					w.seen[one] = rv
				}
				delete(w.seen, m)
			}
		}
	}
	w.mu.Unlock()
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.delivered(gk, f, obj, false) },
		UpdateFunc: func(_, obj any) { c.delivered(gk, f, obj, false) },
		DeleteFunc: func(obj any) { c.delivered(gk, f, obj, true) },
	}); err != nil {
		return
	}
	w.mu.Lock()
	fi.since = c.clock.Now()
	w.mu.Unlock()
}

// delivered is a read form's event handler. It judges the entry of the
// event's own object only: once the informer handed out the object at the
// entry's version or later, or its deletion, the store holds that, and the
// form's reads of it go to the cache. Events of other objects raise
// nothing: a relist hands its items out one by one, so an object's event
// at a high version says nothing of another object of the same list not
// handed out yet (the history checker's seed 182 read a deleted object's
// older copy in that gap).
func (c *Client) delivered(gk schema.GroupKind, f form, obj any, deleted bool) {
	if d, tomb := obj.(toolscache.DeletedFinalStateUnknown); tomb {
		obj, deleted = d.Obj, true
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	sk := sessionKey{gk: gk, ObjectKey: client.ObjectKey{Namespace: m.GetNamespace(), Name: m.GetName()}}
	// A read may replace the entry between reading it and acting on it (a
	// newer copy another form served; the history checker's seed 9914): the
	// event is then judged again on the entry the read left. Each round
	// lost is another writer's change of the entry, so a few suffice.
	for range 16 {
		e := c.s.get(sk)
		if e == nil || e.state == ownUnknown || !deleted && e.has(f) {
			return
		}
		if c.deliveredHook != nil {
			c.deliveredHook()
		}
		if c.deliveredTo(sk, e, f, m, deleted) {
			return
		}
	}
}

// deliveredTo judges form f's event of object m (deleted for a delete
// event) on entry e, and reports whether it is done: false when e was
// replaced before the event acted on it.
func (c *Client) deliveredTo(sk sessionKey, e *ownEntry, f form, m metav1.Object, deleted bool) bool {
	switch {
	case deleted && e.state == ownWritten && e.uid != "" && e.uid == m.GetUID():
		// The incarnation written is deleted: every form's copy of it is
		// stale now, including a form whose handler was added after its
		// informer delivered the deletion (the history checker's seed
		// 152), and the other forms whatever this one had shown. The
		// entry becomes that deletion.
		return c.deletedSince(sk, e, f, m.GetResourceVersion())
	case deleted && e.state == ownGone && wellFormed(m.GetResourceVersion()) && newer(m.GetResourceVersion(), e.rv):
		// A deletion kept, and an incarnation deleted since (created
		// by another writer after it): the name is free at the later
		// version, so that a form still showing that incarnation does
		// not serve it, nor pass it on to the others (the history
		// checker's seed 806).
		return c.goneSince(sk, e, f, m.GetUID(), m.GetResourceVersion())
	case deleted:
		// The store no longer holds the object's incarnation: a deletion
		// kept is what it waits for; a write of it was deleted since. The
		// deletion of another incarnation (a lagging cache's older one)
		// says nothing of this one.
		if (e.uid == "" || e.uid == m.GetUID()) && !e.has(f) {
			return c.caughtUpOn(sk, e, f)
		}
	case e.rv != "" && !newer(e.rv, m.GetResourceVersion()) && wellFormed(m.GetResourceVersion()):
		// An event at an older version than the entry's says nothing of
		// it; one at the entry's or later catches f up, and a lost round
		// does not matter: the entry now there is another's.
		c.caughtUp(sk, e, f)
	}
	return true
}

// deletedSince replaces e, a write of an incarnation form f's informer
// has just delivered the deletion of (at rv, the event's version), by that
// deletion, caught up in f: the other forms serve NotFound for it from now
// on, and their caches' copies of it, all older, are not served.
// It reports whether e was still the entry.
func (c *Client) deletedSince(sk sessionKey, e *ownEntry, f form, rv string) bool {
	n := &ownEntry{state: ownGone, uid: e.uid, rv: e.rv, existed: e.rv, at: e.at, deadline: e.deadline, seen: e.seen}
	if wellFormed(rv) && newer(rv, e.rv) {
		n.rv = rv
	}
	n.caught.Store(uint32(f))
	return c.s.replace(sk, e, n)
}

// goneSince replaces e, a deletion kept, by the deletion of incarnation
// uid that form f's informer has just delivered at rv, newer than e: the
// name is free at rv. f has caught up with it where the incarnation is
// e's, or e tells none; the deletion of another incarnation catches no
// form up (TestDeleteEventOfAnotherIncarnationIsNotTheClients).
// It reports whether e was still the entry.
func (c *Client) goneSince(sk sessionKey, e *ownEntry, f form, uid types.UID, rv string) bool {
	caught := e.caught.Load()
	if e.uid == "" || e.uid == uid {
		caught |= uint32(f)
	} else {
		uid = e.uid
	}
	n := &ownEntry{state: ownGone, uid: uid, rv: rv, existed: rv, at: e.at, deadline: e.deadline, seen: e.seen}
	n.caught.Store(caught)
	return c.s.replace(sk, e, n)
}

// emptyOf returns an empty object of like's type and kind, the prototype
// an informer is asked for by.
func emptyOf(like client.Object) (client.Object, error) {
	out, err := objcopy.EmptyLike(like)
	if err != nil {
		return nil, err
	}
	out.SetName("")
	out.SetNamespace("")
	return out, nil
}
