package expectations

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/racesafe/racesafe/internal/objcopy"
)

// ownerKind is the cache's view of one owned kind, over every form of it
// the tracker reads (typed, unstructured, metadata-only): how new each
// form's informer is, read from the client-go store or, where that is
// unavailable, from the events an added handler saw. A record of the kind
// is satisfied only when every form has caught up, since a controller may
// write in one form and List in another.
type ownerKind struct {
	gk      schema.GroupKind
	forms   []*kindForm // fixed once the kind is made
	m       ownerKindMetrics
	waiting atomic.Int64 // records waiting on this kind; events skip the owners' scan at zero
}

// kindForm is one informer of an owned kind.
type kindForm struct {
	proto client.Object // empty object of the kind, in the informer's form
	inf   cache.Informer
	// store is the informer's client-go store, nil when the informer does
	// not expose one (controller-runtime's multi-namespace informer) or
	// when client-go's store cannot tell its version (before k8s.io
	// v0.36).
	store versionedStore
	// oneStream: the informer is one client-go informer (it exposes its
	// store), one watch for every namespace: seen keeps one maximum.
	oneStream bool

	mu sync.Mutex
	// seen holds, per namespace, the highest resourceVersion the handler
	// saw, kept only while the store cannot say (see version). A watch
	// delivers one stream's events in resourceVersion order, so once an
	// object at rv was delivered, every write at or below rv on that
	// stream was delivered before it. A multi-namespace cache runs one
	// informer, so one stream, per namespace, and the streams run apart: a
	// namespace whose stream is ahead says nothing of another, hence the
	// key. A cluster-wide informer is one stream for all namespaces: any
	// namespace's maximum is a lower bound of what it delivered, so keying
	// by namespace is only conservative there. A relist is not a stream:
	// with AtomicFIFO off its items may be handed out in key order, so the
	// maximum may run ahead of objects of the same list not yet delivered;
	// client-go's store version (AtomicFIFO on, the default) has no such gap.
	// One informer is one stream for all namespaces, and keeps its maximum
	// under "": per namespace, a process would remember every namespace
	// that ever held a child (defect 11 of issue 35: +16 MiB after 200,000
	// namespaces); a multi-namespace cache's namespaces are its
	// configuration's.
	seen map[string]string
}

// kindFor returns the view of gvk's cache, fetching the informers and adding
// the handlers at the first call for the kind. With OwnerOptions.Owns, the
// forms are the ones declared for the kind, and a kind not declared is not
// tracked (nil, nil): the tracker never starts an informer the controller
// does not run. Without it, the form is the one written.
func (t *OwnerTracker) kindFor(ctx context.Context, gvk schema.GroupVersionKind, owned client.Object) (*ownerKind, error) {
	gk := gvk.GroupKind()
	t.kindsMu.Lock()
	defer t.kindsMu.Unlock()
	if k, found := t.kinds[gk]; found {
		return k, nil
	}
	var protos []client.Object
	if t.declared != nil {
		protos = t.declared[gk]
		if len(protos) == 0 {
			return nil, nil
		}
	} else {
		proto, err := objcopy.EmptyLike(owned)
		if err != nil {
			return nil, err
		}
		proto.SetName("")
		proto.SetNamespace("")
		proto.GetObjectKind().SetGroupVersionKind(gvk)
		protos = []client.Object{proto}
	}
	k := &ownerKind{gk: gk, m: newOwnerKindMetrics(t.name, t.ownerLabel, gk.String())}
	for _, proto := range protos {
		f, err := t.formFor(ctx, k, proto)
		if err != nil {
			return nil, err
		}
		k.forms = append(k.forms, f)
	}
	t.kinds[gk] = k
	return k, nil
}

// formFor fetches proto's informer and adds the tracker's handler to it.
func (t *OwnerTracker) formFor(ctx context.Context, k *ownerKind, proto client.Object) (*kindForm, error) {
	// Not blocking: the first record may be made before the cache syncs;
	// until it does, the kind reads as stale.
	inf, err := t.cache.GetInformer(ctx, proto, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("get informer of %T: %w", proto, err)
	}
	f := &kindForm{proto: proto, inf: inf, seen: make(map[string]string)}
	if s, ok := inf.(interface{ GetStore() toolscache.Store }); ok {
		f.store, _ = s.GetStore().(versionedStore)
		f.oneStream = true
	}
	// The handler is added even when the store answers: it wakes owners,
	// and stands in when the store's version is empty (AtomicFIFO off).
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.observe(k, f, obj, false) },
		UpdateFunc: func(_, obj any) { t.observe(k, f, obj, false) },
		DeleteFunc: func(obj any) { t.observe(k, f, obj, true) },
	}); err != nil {
		return nil, fmt.Errorf("add event handler to the informer of %T: %w", proto, err)
	}
	return f, nil
}

// versionedStore is client-go's store where it tells the version it has
// applied (k8s.io/client-go v0.36 and later). Older stores do not, and the
// tracker's handler answers instead.
type versionedStore interface {
	LastStoreSyncResourceVersion() string
}

// version returns the resourceVersion every form of the kind has reached in
// namespace: the lowest of the forms' versions, "" when a form knows
// nothing, or a version that cannot be ordered (the caller reports it).
func (k *ownerKind) version(namespace string) string {
	low := ""
	for i, f := range k.forms {
		rv := f.version(namespace)
		if rv == "" {
			return ""
		}
		if _, err := resourceversion.CompareResourceVersion(rv, rv); err != nil {
			return rv // cannot be ordered: the caller reports it
		}
		if cmp, _ := resourceversion.CompareResourceVersion(rv, low); i == 0 || cmp < 0 {
			low = rv
		}
	}
	if n, err := strconv.ParseUint(low, 10, 64); err == nil {
		k.m.version.Set(float64(n))
	}
	return low
}

// version returns the resourceVersion the form's informer has reached in
// namespace, "" when nothing is known. client-go's store answers first:
// its LastStoreSyncResourceVersion is the version of the last event, list
// or bookmark applied, for the informer's whole stream. It is "" when the
// AtomicFIFO feature is off (client-go then cannot say); the handler's
// per-namespace maximum answers instead.
func (f *kindForm) version(namespace string) string {
	if rv := f.storeVersion(); rv != "" {
		return rv
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[f.streamOf(namespace)]
}

// streamOf is the key of namespace's stream in seen.
func (f *kindForm) streamOf(namespace string) string {
	if f.oneStream {
		return ""
	}
	return namespace
}

func (f *kindForm) storeVersion() string {
	if f.store == nil {
		return ""
	}
	return f.store.LastStoreSyncResourceVersion()
}

// shows reports whether any form's cache still shows the incarnation uid
// of key as not deleted. An informer that has not synced cannot tell: it
// shows.
func (k *ownerKind) shows(ctx context.Context, r client.Reader, key client.ObjectKey, uid types.UID) (bool, error) {
	for _, f := range k.forms {
		if shown, err := f.shows(ctx, r, key, uid); shown || err != nil {
			return true, err
		}
	}
	return false, nil
}

func (f *kindForm) shows(ctx context.Context, r client.Reader, key client.ObjectKey, uid types.UID) (bool, error) {
	if !f.inf.HasSynced() {
		return true, nil
	}
	obj, ok := f.proto.DeepCopyObject().(client.Object)
	if !ok {
		return true, fmt.Errorf("copy of %T is not a client.Object", f.proto)
	}
	if err := r.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return true, err
	}
	return sameUID(uid, obj.GetUID()) && obj.GetDeletionTimestamp() == nil, nil
}

// observe is the kind's event handler: it raises the namespace's version and
// wakes the owners whose records the event satisfied.
func (t *OwnerTracker) observe(k *ownerKind, f *kindForm, obj any, deleted bool) {
	tomb := false
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj, tomb, deleted = d.Obj, true, true
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	ns := m.GetNamespace()
	// A tombstone carries the last version known, not the deletion's. The
	// per-namespace maximum is kept only while the store cannot answer, so
	// that namespaces that came and went are not remembered for nothing.
	if !tomb && f.storeVersion() == "" {
		f.raiseSeen(ns, m.GetResourceVersion())
	}
	if k.waiting.Load() == 0 {
		return
	}
	t.wake(k, ns, deletedName{uid: m.GetUID(), name: m.GetName()}, deleted || m.GetDeletionTimestamp() != nil)
}

func (f *kindForm) raiseSeen(namespace, rv string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	namespace = f.streamOf(namespace)
	cur := f.seen[namespace]
	if cur == "" {
		if _, err := resourceversion.CompareResourceVersion(rv, rv); err == nil {
			f.seen[namespace] = rv
		}
		return
	}
	if cmp, err := resourceversion.CompareResourceVersion(rv, cur); err == nil && cmp > 0 {
		f.seen[namespace] = rv
	}
}

// wake marks deletions seen and enqueues, once per raise, every owner whose
// record for (kind, namespace) the cache now satisfies. It scans the owners,
// so it costs O(owners with records) per event of a kind someone waits on.
func (t *OwnerTracker) wake(k *ownerKind, namespace string, obj deletedName, gone bool) {
	var keys []client.ObjectKey
	ok := ownedKey{gk: k.gk, namespace: namespace}
	t.mu.Lock()
	for key, e := range t.owners {
		wake := false
		for _, waits := range e.incs {
			w := waits[ok]
			if w == nil {
				continue
			}
			if gone {
				// A deletion recorded without a UID is the name's.
				for _, dn := range []deletedName{obj, {name: obj.name}} {
					if d := w.gone[dn]; d != nil {
						d.seen = true
					}
				}
			}
			if w.woken || len(t.queues) == 0 || !w.caughtUp(namespace) {
				continue
			}
			w.woken = true
			wake = true
		}
		if wake {
			keys = append(keys, key)
		}
	}
	var queues []*ownerQueue
	if len(keys) > 0 {
		queues = t.queueList()
	}
	t.mu.Unlock()
	for _, q := range queues {
		for _, key := range keys {
			q.q.Add(reconcile.Request{NamespacedName: key})
		}
	}
}

// caughtUp reports, from the kind's version and the deletions the handler
// saw, whether the record is satisfied. Check decides; this only wakes.
func (w *ownedWait) caughtUp(namespace string) bool {
	if w.rv != "" {
		cmp, err := resourceversion.CompareResourceVersion(w.kind.version(namespace), w.rv)
		if err != nil || cmp < 0 {
			return false
		}
	}
	for _, d := range w.gone {
		if !d.seen {
			return false
		}
	}
	return true
}

// Source returns an event source for the owner's controller
// (builder.WatchesRawSource) that enqueues an owner when an owned kind's
// cache reaches what the owner's records wait for. It is driven by the
// owned kinds' informer events, not by polling, and enqueues each owner once
// per raise of a record. It may be started by several controllers; each
// start lasts until its context ends.
func (t *OwnerTracker) Source() source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		oq := &ownerQueue{q: q}
		t.mu.Lock()
		t.queues[oq] = struct{}{}
		t.mu.Unlock()
		context.AfterFunc(ctx, func() {
			t.mu.Lock()
			delete(t.queues, oq)
			t.mu.Unlock()
		})
		return nil
	})
}
