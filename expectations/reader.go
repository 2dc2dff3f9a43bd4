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
// cache, or its client) and checks every Get against t. When t was made
// without Options.Scheme and cache has a scheme (a client.Client such as
// mgr.GetClient() has), t takes it: the kinds of that scheme are then known
// to t, for the Reader's reads and for every other call of t.
func NewReader(cache client.Reader, t *Tracker) *Reader {
	t.takeScheme(cache)
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
// tracker cannot tell is an ErrUnknownKind error, and the cache is not read,
// with one exception: a tracker made without Options.Scheme reads the cache
// for a typed obj whose Go type no scheme it has knows, and takes the kind
// from the TypeMeta of the object the cache returns (a controller-runtime
// cache sets it); the Go type keeps that kind. If the cache's answer names
// none, or fails otherwise than NotFound, Get returns ErrUnknownKind (with
// the cache's error); a NotFound is returned as it is.
//
// A NotFound is returned as it is, after CheckAbsent has settled the
// expectation for obj's kind and form (see CheckAbsent for why a NotFound is
// never stale). Any other error of the cache is returned unchanged, so
// apierrors.IsX keeps working.
func (r *Reader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if objcopy.IsNil(obj) {
		return fmt.Errorf("get %s into %T: %w", key, obj, ErrNilObject)
	}
	f := formOf(obj)
	_, kindErr := r.tracker.kindOf(obj, f)
	if kindErr != nil && (f != formTyped || r.tracker.scheme != nil) {
		return fmt.Errorf("get %s: %w", key, kindErr)
	}
	fresh, err := objcopy.EmptyLike(obj)
	if err != nil {
		return fmt.Errorf("get %s: %w", key, err)
	}
	if err := r.cache.Get(ctx, key, fresh, opts...); err != nil {
		if kindErr != nil {
			// The typed form of a kind the tracker cannot tell has
			// nothing to settle: a NotFound is never stale (see
			// CheckAbsent) and is returned as it is. Any other error
			// (a cache that does not know the type either) says both.
			if apierrors.IsNotFound(err) {
				return err
			}
			return fmt.Errorf("get %s: %w (the cache: %w)", key, kindErr, err)
		}
		if apierrors.IsNotFound(err) {
			if absentErr := r.tracker.CheckAbsent(key, obj); absentErr != nil {
				return fmt.Errorf("get %s: %w", key, absentErr)
			}
		}
		return err
	}
	if kindErr != nil {
		if err := r.tracker.learnKind(fresh); err != nil {
			return fmt.Errorf("get %s: %w", key, kindErr)
		}
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
