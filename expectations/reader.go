package expectations

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/racesafe/racesafe/internal/objcopy"
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
// obj's type and kind say which expectation applies: a read of a ConfigMap
// never settles a Pod's of the same name, and a metadata-only read settles
// only the metadata-only form (see Tracker.Check). An obj whose kind the
// tracker cannot tell is an ErrUnknownKind error, and the cache is not read.
//
// A NotFound is returned as it is, after CheckAbsent has settled the
// expectation for obj's kind and form (see CheckAbsent for why a NotFound is
// never stale). Any other error of the cache is returned unchanged, so
// apierrors.IsX keeps working.
func (r *Reader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if objcopy.IsNil(obj) {
		return fmt.Errorf("get %s into %T: %w", key, obj, ErrNilObject)
	}
	if _, err := r.tracker.kindOf(obj, formOf(obj)); err != nil {
		return fmt.Errorf("get %s: %w", key, err)
	}
	fresh, err := objcopy.EmptyLike(obj)
	if err != nil {
		return fmt.Errorf("get %s: %w", key, err)
	}
	if err := r.cache.Get(ctx, key, fresh, opts...); err != nil {
		if apierrors.IsNotFound(err) {
			if absentErr := r.tracker.CheckAbsent(key, obj); absentErr != nil {
				return fmt.Errorf("get %s: %w", key, absentErr)
			}
		}
		return err
	}
	if err := r.tracker.Check(fresh); err != nil {
		if staleErr, ok := errors.AsType[*StaleError](err); ok {
			log.FromContext(ctx).V(1).Info("stale cache read, not handed out",
				"tracker", r.tracker.name, "kind", staleErr.Kind, "object", key,
				"want", staleErr.Want, "seen", staleErr.Seen, "deletion", staleErr.Deletion)
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
