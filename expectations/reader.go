package expectations

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

var _ client.Reader = (*Reader)(nil)

// Reader is a client.Reader over a cache that refuses to hand out an object
// older than the tracker's expectation for it. Use it where a reconcile reads
// the objects it writes: the manager's client.Reader wrapped once, with the
// tracker its writes feed.
type Reader struct {
	cache   client.Reader
	tracker *Tracker
}

// NewReader returns a Reader that reads from cache (normally the manager's
// cache, or its client) and checks every Get against t.
func NewReader(cache client.Reader, t *Tracker) *Reader {
	return &Reader{cache: cache, tracker: t}
}

// Get reads key from the cache into a fresh object and checks it with the
// tracker. When the cached object is stale, Get returns the *StaleError and
// leaves obj untouched, so the caller's copy, typically the one the server
// returned from its last write, is never overwritten with an older snapshot.
// That overwrite is the incident this package exists for. Otherwise obj is
// replaced by the cached object.
//
// A NotFound is returned as it is, after CheckAbsent has settled the key's
// expectation (see CheckAbsent for why a NotFound is never stale). Any other
// error of the cache is returned unchanged, so apierrors.IsX keeps working.
func (r *Reader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, err := keyOf(obj); errors.Is(err, ErrNilObject) {
		return err
	}
	fresh, err := emptyLike(obj)
	if err != nil {
		return err
	}
	if err := r.cache.Get(ctx, key, fresh, opts...); err != nil {
		if apierrors.IsNotFound(err) {
			if absentErr := r.tracker.CheckAbsent(key); absentErr != nil {
				return fmt.Errorf("get %s: %w", key, absentErr)
			}
		}
		return err
	}
	if err := r.tracker.Check(fresh); err != nil {
		if staleErr, ok := errors.AsType[*StaleError](err); ok {
			log.FromContext(ctx).V(1).Info("stale cache read, not handed out",
				"tracker", r.tracker.name, "object", key, "want", staleErr.Want, "seen", staleErr.Seen,
				"deletion", staleErr.Deletion)
		}
		return err
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(fresh).Elem())
	return nil
}

// List passes through to the cache unchecked. A list is a snapshot of many
// objects at one collection resourceVersion; failing the whole list for one
// stale item would stall every caller, and dropping or replacing the item
// would hand out a list that never existed. Call Check on the items you act
// on, or Get them through this Reader.
func (r *Reader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return r.cache.List(ctx, list, opts...)
}

// emptyLike returns a new zero object of obj's type, with obj's
// GroupVersionKind so that unstructured and metadata-only objects still name
// their kind. A zero object, not a deep copy: a reader that decodes into
// its target would otherwise merge the cached object into the caller's data.
func emptyLike(obj client.Object) (client.Object, error) {
	t := reflect.TypeOf(obj)
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("get into %T: want a pointer to a struct", obj)
	}
	fresh, ok := reflect.New(t.Elem()).Interface().(client.Object)
	if !ok {
		return nil, fmt.Errorf("get into %T: a new %s is not a client.Object", obj, t.Elem())
	}
	fresh.GetObjectKind().SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
	return fresh, nil
}
