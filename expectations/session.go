package expectations

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ownState is what this client knows of an object after its last write.
type ownState uint8

const (
	// ownWritten: the object exists at rv; obj is the server's answer, or nil
	// when only its resourceVersion is known (a subresource write with a
	// body), in which case a cache older than rv is refused.
	ownWritten ownState = iota
	// ownGone: the name was free on the server at rv (a live read after
	// the write told it): every copy at rv or older is gone, NotFound.
	ownGone
	// ownUnknown: a write ended ambiguously (a timeout, a 500, a reset
	// connection): the server may or may not have applied it.
	ownUnknown
)

// sessionKey names an object across kinds, as objectKey does, by the
// GroupKind itself so that the store needs no kind numbering of its own.
type sessionKey struct {
	gk schema.GroupKind
	client.ObjectKey
}

// ownEntry is this client's last write of one object.
type ownEntry struct {
	state ownState
	uid   types.UID
	// rv is well-formed, or empty where the write did not tell it (a Delete
	// of a key-only object).
	rv string
	// gvk is the version obj was written at: a typed read of another
	// version cannot be served from it.
	gvk schema.GroupVersionKind
	// obj is a private deep copy of the answer, never handed out.
	obj client.Object
	// caught holds the forms whose cache has shown rv or later; reads of
	// those forms go to the cache alone.
	// caught is written under the session's lock and read without it.
	caught atomic.Uint32
	at     time.Time
	// deadline is at plus the TTL on the Client's ticker: a Get after it
	// serves the cache alone (Client.put sets it).
	deadline ticks
	// seen: kept from a read, not a write (Client.remember): the version
	// one form served, which the others must not read below. Not pending.
	seen bool
	// existed, for a deletion (ownGone), is the newest version the object
	// is known to have existed at, "" when none is: a form's cache that
	// has delivered it and shows NotFound has delivered the deletion.
	existed string
	// checked is when a live read last found the object as the entry
	// has it (unix nanoseconds, 0 for never): a form whose handler was
	// added before that is not blind to it (watermarks.blind).
	checked atomic.Int64
}

// has reports whether form f's cache has caught up with e.
func (e *ownEntry) has(f form) bool { return form(e.caught.Load())&f != 0 }

// session is the Client's store of its own writes. Reads take the read
// lock; the count lets a Get with nothing pending skip the map.
type session struct {
	ttl time.Duration
	mu  sync.RWMutex
	m   map[sessionKey]*ownEntry
	// byNS holds m's entries again by kind and namespace, then name: a List
	// reads only its own kind and namespace, not every pending write.
	byNS map[kindNS]map[string]*ownEntry
	// barriers are (kind, namespace) pairs with an ambiguous write whose
	// object could not be named or read back: their Lists are refused
	// until the TTL, or until the cache is known to have reached the
	// version read live after the write.
	barriers map[sessionKey]barrier
	n        atomic.Int64
	// nextSweep is the UnixNano after which the next write sweeps.
	nextSweep atomic.Int64
}

func newSession(ttl time.Duration, now time.Time) *session {
	s := &session{ttl: ttl, m: make(map[sessionKey]*ownEntry), byNS: make(map[kindNS]map[string]*ownEntry),
		barriers: make(map[sessionKey]barrier)}
	s.nextSweep.Store(addSaturated(now.UnixNano(), ttl))
	return s
}

// newer reports whether a write at rv a is later than one at b. An empty
// resourceVersion is a later operation whose version was not told (a
// Delete): it replaces what it follows.
func newer(a, b string) bool {
	if a == "" || b == "" {
		return true
	}
	cmp, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && cmp >= 0
}

// kindNS is a kind in a namespace ("" for a cluster-scoped kind).
type kindNS struct {
	gk schema.GroupKind
	ns string
}

// set makes e the entry of k, in m and byNS. The caller holds mu.
func (s *session) set(k sessionKey, e *ownEntry) {
	s.m[k] = e
	kn := kindNS{gk: k.gk, ns: k.Namespace}
	names := s.byNS[kn]
	if names == nil {
		names = make(map[string]*ownEntry)
		s.byNS[kn] = names
	}
	names[k.Name] = e
}

// unset removes k from m and byNS. The caller holds mu.
func (s *session) unset(k sessionKey) {
	delete(s.m, k)
	kn := kindNS{gk: k.gk, ns: k.Namespace}
	if names := s.byNS[kn]; names != nil {
		delete(names, k.Name)
		if len(names) == 0 {
			delete(s.byNS, kn)
		}
	}
}

// put records e under k unless a later state is recorded already (a late
// response of a concurrent worker): the newer resourceVersion wins, and an
// ambiguous write replaces, and is replaced by, anything.
func (s *session) put(k sessionKey, e *ownEntry) {
	s.mu.Lock()
	prev, found := s.m[k]
	switch {
	case !found:
		s.set(k, e)
		s.n.Add(1)
	case prev.state == ownUnknown || e.state == ownUnknown || newer(e.rv, prev.rv):
		s.set(k, e)
	}
	s.mu.Unlock()
}

// inNS returns a copy of the entries of gk in namespace ns, by name.
func (s *session) inNS(gk schema.GroupKind, ns string) map[string]*ownEntry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := s.byNS[kindNS{gk: gk, ns: ns}]
	if len(names) == 0 {
		return nil
	}
	out := make(map[string]*ownEntry, len(names))
	for n, e := range names {
		out[n] = e
	}
	return out
}

func (s *session) get(k sessionKey) *ownEntry {
	s.mu.RLock()
	e := s.m[k]
	s.mu.RUnlock()
	return e
}

// caughtUp marks form f of k caught up with e, and drops e once every form
// has, or when its TTL has passed. It reports whether e was pending for f.
func (s *session) caughtUp(k sessionKey, e *ownEntry, f form) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, found := s.m[k]
	if !found || cur != e || e.has(f) {
		return false
	}
	caught := form(e.caught.Load()) | f
	e.caught.Store(uint32(caught))
	if caught == allForms {
		s.unset(k)
		s.n.Add(-1)
	}
	return true
}

// replace makes n the entry of k if e still is; it reports whether it did.
// n's caught forms are its own: the entry count is unchanged, and an n
// every form has shown is dropped.
func (s *session) replace(k sessionKey, e, n *ownEntry) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, found := s.m[k]; !found || cur != e {
		return false
	}
	if form(n.caught.Load()) == allForms {
		s.unset(k)
		s.n.Add(-1)
		return true
	}
	s.set(k, n)
	return true
}

// drop removes e from k if it is still the one recorded.
func (s *session) drop(k sessionKey, e *ownEntry) {
	s.mu.Lock()
	if cur, found := s.m[k]; found && cur == e {
		s.unset(k)
		s.n.Add(-1)
	}
	s.mu.Unlock()
}

func (s *session) expired(e *ownEntry, now time.Time) bool { return now.Sub(e.at) >= s.ttl }

// barrier is an ambiguous write of a kind in a namespace.
type barrier struct {
	at time.Time
	// rv, when known, is a version read live after the write: a cache at
	// rv shows the write if it was applied.
	rv string
}

// barrier records an ambiguous write of kind gk in namespace ns; rv is the
// live version read after it, "" when unknown. A later barrier replaces an
// earlier one: its version is the later.
func (s *session) barrier(gk schema.GroupKind, ns string, now time.Time, rv string) {
	s.mu.Lock()
	if _, found := s.barriers[sessionKey{gk: gk, ObjectKey: client.ObjectKey{Namespace: ns}}]; !found {
		s.n.Add(1)
	}
	s.barriers[sessionKey{gk: gk, ObjectKey: client.ObjectKey{Namespace: ns}}] = barrier{at: now, rv: rv}
	s.mu.Unlock()
}

// unbar drops the barrier of gk in ns that waits for no version: the
// writes it stood for have been read back.
func (s *session) unbar(gk schema.GroupKind, ns string) {
	k := sessionKey{gk: gk, ObjectKey: client.ObjectKey{Namespace: ns}}
	s.mu.Lock()
	if b, found := s.barriers[k]; found && b.rv == "" {
		delete(s.barriers, k)
		s.n.Add(-1)
	}
	s.mu.Unlock()
}

// barred reports whether an ambiguous write of gk in ns (any namespace when
// ns is empty) is younger than the TTL and not known to be in the cache:
// reached, when set, says whether the cache of a kind in a namespace has
// reached a version; a barrier it says yes of is dropped.
func (s *session) barred(gk schema.GroupKind, ns string, now time.Time, reached func(gk schema.GroupKind, ns, rv string) bool) bool {
	var done []sessionKey
	barred := false
	s.mu.RLock()
	for k, b := range s.barriers {
		if k.gk != gk || (ns != "" && k.Namespace != ns && k.Namespace != "") || now.Sub(b.at) >= s.ttl {
			continue
		}
		if b.rv != "" && reached != nil && reached(k.gk, k.Namespace, b.rv) {
			done = append(done, k)
			continue
		}
		barred = true
		break
	}
	s.mu.RUnlock()
	if len(done) > 0 {
		s.mu.Lock()
		for _, k := range done {
			if b, found := s.barriers[k]; found && b.rv != "" && reached(k.gk, k.Namespace, b.rv) {
				delete(s.barriers, k)
				s.n.Add(-1)
			}
		}
		s.mu.Unlock()
	}
	return barred
}

// ofKind returns the entries of gk in namespace ns (every namespace when
// ns is empty) that form f's cache has not caught up with, with their keys.
// It reads only the kind's namespaces, not every pending write.
func (s *session) ofKind(gk schema.GroupKind, ns string, f form) map[client.ObjectKey]*ownEntry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out map[client.ObjectKey]*ownEntry
	add := func(ns string, names map[string]*ownEntry) {
		for name, e := range names {
			if e.has(f) {
				continue
			}
			if out == nil {
				out = make(map[client.ObjectKey]*ownEntry)
			}
			out[client.ObjectKey{Namespace: ns, Name: name}] = e
		}
	}
	if ns != "" {
		add(ns, s.byNS[kindNS{gk: gk, ns: ns}])
		return out
	}
	for kn, names := range s.byNS {
		if kn.gk == gk {
			add(kn.ns, names)
		}
	}
	return out
}

// sweep drops entries and barriers older than the TTL, at most once per
// TTL, on a write path: memory follows the writes of the last two TTLs.
func (s *session) sweep(now time.Time) int {
	next, at := s.nextSweep.Load(), now.UnixNano()
	if at < next || !s.nextSweep.CompareAndSwap(next, addSaturated(at, s.ttl)) {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	dropped := 0
	for k, e := range s.m {
		if now.Sub(e.at) >= s.ttl {
			s.unset(k)
			dropped++
		}
	}
	for k, b := range s.barriers {
		if now.Sub(b.at) >= s.ttl {
			delete(s.barriers, k)
			dropped++
		}
	}
	s.n.Add(int64(-dropped))
	return dropped
}

// pending counts the entries younger than the TTL that no form has caught
// up with, or that a form read of their kind (read tells them) has not,
// or that are not told (an ambiguous write), and the barriers younger than
// the TTL.
func (s *session) pending(now time.Time, read func(schema.GroupKind) form) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	forms := make(map[schema.GroupKind]form)
	for k, e := range s.m {
		if s.expired(e, now) {
			continue
		}
		if e.seen {
			continue
		}
		if e.state == ownUnknown {
			n++
			continue
		}
		fs, found := forms[k.gk]
		if !found {
			fs = read(k.gk)
			forms[k.gk] = fs
		}
		if caught := form(e.caught.Load()); fs&^caught != 0 || caught == 0 {
			n++
		}
	}
	for _, b := range s.barriers {
		if now.Sub(b.at) < s.ttl {
			n++
		}
	}
	return n
}

func (s *session) len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.m) + len(s.barriers)
}

// decision is what a read of one object serves.
type decision uint8

const (
	serveCache    decision = iota // the cache is at least as new: serve it
	serveOwn                      // this client's last write is newer
	serveNotFound                 // this client deleted it; the cache lags
	serveRefused                  // newer than the cache, but not servable
)

// into writes a deep copy of src, written at gvk, into dst, in dst's form.
// It fails where src cannot give dst's form: a metadata-only write read as a
// full object, or a typed read of another version.
func into(scheme *runtime.Scheme, src client.Object, gvk schema.GroupVersionKind, dst client.Object) error {
	if reflect.TypeOf(src) == reflect.TypeOf(dst) {
		if u, ok := dst.(*unstructured.Unstructured); ok && u.GetAPIVersion() != "" && u.GetAPIVersion() != gvk.GroupVersion().String() {
			return fmt.Errorf("written at %s, read at %s", gvk.GroupVersion(), u.GetAPIVersion())
		}
		reflect.ValueOf(dst).Elem().Set(reflect.ValueOf(src.DeepCopyObject()).Elem())
		return nil
	}
	if formOf(src) == formMetadata {
		return fmt.Errorf("a metadata-only write cannot be read as %T", dst)
	}
	var m map[string]any
	if u, ok := src.(runtime.Unstructured); ok {
		m = runtime.DeepCopyJSON(u.UnstructuredContent())
	} else {
		var err error
		if m, err = runtime.DefaultUnstructuredConverter.ToUnstructured(src); err != nil {
			return err
		}
	}
	m["apiVersion"], m["kind"] = gvk.GroupVersion().String(), gvk.Kind
	switch d := dst.(type) {
	case *metav1.PartialObjectMetadata:
		want := d.GroupVersionKind()
		var meta metav1.ObjectMeta
		md, _ := m["metadata"].(map[string]any)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(md, &meta); err != nil {
			return err
		}
		*d = metav1.PartialObjectMetadata{ObjectMeta: meta}
		if want.Empty() {
			want = gvk
		}
		d.SetGroupVersionKind(want)
		return nil
	case *unstructured.Unstructured:
		if v := d.GetAPIVersion(); v != "" && v != gvk.GroupVersion().String() {
			return fmt.Errorf("written at %s, read at %s", gvk.GroupVersion(), v)
		}
		d.Object = m
		return nil
	}
	if kinds, _, err := scheme.ObjectKinds(dst); err != nil || !hasGVK(kinds, gvk) {
		return fmt.Errorf("written at %s, which %T is not", gvk, dst)
	}
	fresh := reflect.New(reflect.TypeOf(dst).Elem()).Interface()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, fresh); err != nil {
		return err
	}
	reflect.ValueOf(dst).Elem().Set(reflect.ValueOf(fresh).Elem())
	// Typed objects read from a cache carry no TypeMeta.
	dst.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return nil
}

func hasGVK(kinds []schema.GroupVersionKind, gvk schema.GroupVersionKind) bool {
	for _, k := range kinds {
		if k == gvk {
			return true
		}
	}
	return false
}

// applyAnswer turns the answer decoded into an apply configuration into an
// unstructured object: apply configurations marshal as the object does.
func applyAnswer(obj runtime.ApplyConfiguration) (*unstructured.Unstructured, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		return nil, err
	}
	if u.GetName() == "" || u.GetResourceVersion() == "" {
		return nil, fmt.Errorf("the answer carries no name or resourceVersion")
	}
	return u, nil
}
