package expectations

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/racesafe/racesafe/internal/objcopy"
)

// primePage is how many objects one page of Prime's live List asks for.
const primePage = 500

// PrimeResult says what Prime recorded.
type PrimeResult struct {
	// Listed is how many objects the live List returned, and
	// ResourceVersion the List's own (the snapshot it was served at).
	Listed          int
	ResourceVersion string
	// Behind is how many of them the cache held at an older
	// resourceVersion, and Gone how many the cache held that the server had
	// deleted before its List: each is now an expectation.
	Behind, Gone int
}

// Prime gives an empty Tracker what it would have known had it made the
// writes of whoever wrote before it: typically a new leader, whose
// predecessor's writes its own lagging cache may not show yet. It Lists
// list's kind live (through live, the manager's API reader, in pages,
// one snapshot), then the same from cached, with the same opts, and
// records, for each object:
//
//   - cached at a resourceVersion older than the live one: ExpectWrite of
//     the live object, so the cached copy is stale until the cache has
//     caught up;
//   - cached but absent from the live List, at a resourceVersion older than
//     the List's: ExpectDeletion, as the server deleted it before listing.
//     With a label or field selector, absence may mean the object no longer
//     matches: Prime then Gets it live, and records ExpectWrite of the
//     live copy (older cached copy of an object relabelled since),
//     ExpectDeletion only when it is gone or another incarnation holds the
//     name, and nothing when the cached copy is as new.
//
// Objects the cache already shows as new as the server, or not at all, and
// cached objects newer than the List, are left alone: Prime records only
// the gap, so its expectations settle as the cache delivers the events in
// flight. A write that lands after the live List is not covered; that is
// the writer's own expectation to record.
//
// Call it before acting on any cached object, for instance from a
// leader-election runnable that the reconciler waits for. It returns
// ErrNilObject for a nil list, ErrUnknownKind for a kind the tracker cannot
// tell, and the Lists' errors wrapped. A tracker made without
// Options.Scheme takes the scheme of live (a manager's API reader has the
// manager's) and of cached, when they have one, as NewReader does.
func (t *Tracker) Prime(ctx context.Context, live, cached client.Reader, list client.ObjectList, opts ...client.ListOption) (PrimeResult, error) {
	if objcopy.IsNil(cached) {
		return PrimeResult{}, fmt.Errorf("prime from %T: %w", list, ErrNilObject)
	}
	t.takeScheme(live)
	t.takeScheme(cached)
	return primeGap(ctx, live, cached, list, opts, primeActions{
		check:  func(o client.Object) error { _, _, _, err := t.keyOf(o); return err },
		behind: t.ExpectWrite,
		gone:   func(c client.Object, _ string) error { return t.ExpectDeletion(c) },
	})
}

// primeActions are what Tracker.Prime and Client.Prime do with the gap
// between the live List and the cache.
type primeActions struct {
	check  func(client.Object) error // a live object the primer cannot take
	behind func(client.Object) error // the live copy of an object the cache holds older
	// gone is given the cached copy of an object the server deleted, and
	// the version its name was found free at: the live List's, or "" when
	// only a live Get by name (after a selected List) said it is gone.
	gone func(cached client.Object, freeAt string) error
}

// primeGap lists list's kind live, in pages (one snapshot), then from
// cached, and calls do.behind with the live copy of each cached object that
// is older than the server's, and do.gone with each cached object absent
// from the live List at a version older than the List's (with a selector,
// read live by name first: absent may mean relabelled).
func primeGap(ctx context.Context, live, cached client.Reader, list client.ObjectList, opts []client.ListOption, do primeActions) (PrimeResult, error) {
	var res PrimeResult
	if objcopy.IsNil(list) || objcopy.IsNil(live) {
		return res, fmt.Errorf("prime from %T: %w", list, ErrNilObject)
	}
	server := map[client.ObjectKey]client.Object{}
	var cont string
	for {
		page, ok := list.DeepCopyObject().(client.ObjectList)
		if !ok {
			return res, fmt.Errorf("prime from %T: its copy is not a list: %w", list, ErrNilObject)
		}
		pageOpts := append(append([]client.ListOption{}, opts...), client.Limit(primePage), client.Continue(cont))
		if err := live.List(ctx, page, pageOpts...); err != nil {
			return res, fmt.Errorf("prime: live list %T: %w", list, err)
		}
		if res.ResourceVersion == "" {
			res.ResourceVersion = page.GetResourceVersion()
		}
		if err := eachObject(page, func(o client.Object) error {
			if err := do.check(o); err != nil {
				return err
			}
			server[client.ObjectKeyFromObject(o)] = o
			return nil
		}); err != nil {
			return res, fmt.Errorf("prime: %w", err)
		}
		if cont = page.GetContinue(); cont == "" {
			break
		}
	}
	res.Listed = len(server)

	inCache, ok := list.DeepCopyObject().(client.ObjectList)
	if !ok {
		return res, fmt.Errorf("prime from %T: its copy is not a list: %w", list, ErrNilObject)
	}
	if err := cached.List(ctx, inCache, opts...); err != nil {
		return res, fmt.Errorf("prime: cached list %T: %w", list, err)
	}
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	selective := (lo.LabelSelector != nil && !lo.LabelSelector.Empty()) || (lo.FieldSelector != nil && !lo.FieldSelector.Empty())
	err := eachObject(inCache, func(c client.Object) error {
		s, found := server[client.ObjectKeyFromObject(c)]
		freeAt := res.ResourceVersion
		if !found && selective {
			var err error
			if s, err = liveCopy(ctx, live, c); err != nil {
				return err
			}
			found = s != nil
			freeAt = ""
		}
		if !found {
			s = nil
		}
		return primeCached(c, s, res.ResourceVersion, freeAt, &res.Behind, &res.Gone, do)
	})
	if err != nil {
		return res, fmt.Errorf("prime: %w", err)
	}
	return res, nil
}

// primeCached acts on one cached object c of a prime, as Tracker.Prime,
// Client.Prime and OwnerTracker.Prime all must: s is the server's copy of
// c's object, nil when the live List (at listRV) does not hold it. A cached
// copy older than s is behind: do.behind(s), counted in behind. A cached
// copy older than a List that does not hold it shows an object the server
// deleted: do.gone(c, freeAt), counted in gone. A copy as new as the
// server's needs nothing.
func primeCached(c, s client.Object, listRV, freeAt string, behind, gone *int, do primeActions) error {
	than := listRV
	if s != nil {
		than = s.GetResourceVersion()
	}
	isOlder, err := older(c, than)
	switch {
	case err != nil || !isOlder:
		return err
	case s != nil:
		*behind++
		return do.behind(s)
	default:
		*gone++
		return do.gone(c, freeAt)
	}
}

// liveCopy Gets c's object live: nil when it is gone or another incarnation
// holds its name, which is a deletion of c's.
func liveCopy(ctx context.Context, live client.Reader, c client.Object) (client.Object, error) {
	obj, err := objcopy.EmptyLike(c)
	if err != nil {
		return nil, err
	}
	switch err := live.Get(ctx, client.ObjectKeyFromObject(c), obj); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("live get of %s, absent from the selected list: %w", client.ObjectKeyFromObject(c), err)
	}
	if c.GetUID() != "" && obj.GetUID() != "" && obj.GetUID() != c.GetUID() {
		return nil, nil
	}
	return obj, nil
}

// older reports whether the cached obj orders strictly before rv. A
// version that cannot be ordered is a *ResourceVersionError, never a guess.
func older(obj client.Object, rv string) (bool, error) {
	c, err := resourceversion.CompareResourceVersion(obj.GetResourceVersion(), rv)
	if err != nil {
		bad := rv
		if !wellFormed(obj.GetResourceVersion()) {
			bad = obj.GetResourceVersion()
		}
		return false, &ResourceVersionError{Key: client.ObjectKeyFromObject(obj), ResourceVersion: bad, Err: err}
	}
	return c < 0, nil
}

func eachObject(list client.ObjectList, f func(client.Object) error) error {
	return meta.EachListItem(list, func(o runtime.Object) error {
		obj, ok := o.(client.Object)
		if !ok {
			return fmt.Errorf("list item %T is not an object: %w", o, ErrNilObject)
		}
		return f(obj)
	})
}
