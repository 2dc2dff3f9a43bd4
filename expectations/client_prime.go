package expectations

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/racesafe/racesafe/internal/objcopy"
)

// Prime gives an empty Client what it would have kept had it made the
// writes of whoever wrote before it: typically a new leader, whose
// predecessor's last writes its own lagging cache may not show yet. It
// Lists list's kind live (through live, the manager's API reader, in pages,
// one snapshot), then the same from the wrapped client's cache, with the
// same opts, and keeps, as if this Client had written them:
//
//   - an object the cache holds at a resourceVersion older than the live
//     one: the live copy, which Get and List then serve until the cache
//     shows it (Behind);
//   - an object the cache holds that is absent from the live List, at a
//     resourceVersion older than the List's: its deletion, so Get answers
//     NotFound and List leaves it out until the cache drops it (Gone).
//     With a label or field selector, absence may mean the object no
//     longer matches: Prime then reads it live by name, and keeps the live
//     copy when the cache's is older, the deletion only when it is gone or
//     another incarnation holds the name.
//
// Objects the cache already shows as new as the server, or not at all, and
// cached objects newer than the List, are left alone: Prime keeps only the
// gap, which the cache closes as the events in flight arrive; each entry
// then goes as a write's does. A write that lands after the live List is
// not covered: that is its writer's to keep.
//
// Call it before the first reconcile acts on a cached object, for instance
// from a leader-election runnable (wire does, for the For kind). It returns
// ErrNilObject for a nil list or reader, ErrUnknownKind for a kind the
// Client cannot tell, a *ResourceVersionError for a version that cannot be
// ordered, and the Lists' errors wrapped.
func (c *Client) Prime(ctx context.Context, live client.Reader, list client.ObjectList, opts ...client.ListOption) (PrimeResult, error) {
	var res PrimeResult
	if objcopy.IsNil(list) || objcopy.IsNil(live) {
		return res, fmt.Errorf("prime the client from %T: %w", list, ErrNilObject)
	}
	server := map[client.ObjectKey]client.Object{}
	var cont string
	for {
		page, ok := list.DeepCopyObject().(client.ObjectList)
		if !ok {
			return res, fmt.Errorf("prime the client from %T: its copy is not a list: %w", list, ErrNilObject)
		}
		pageOpts := append(append([]client.ListOption{}, opts...), client.Limit(primePage), client.Continue(cont))
		if err := live.List(ctx, page, pageOpts...); err != nil {
			return res, fmt.Errorf("prime the client: live list %T: %w", list, err)
		}
		if res.ResourceVersion == "" {
			res.ResourceVersion = page.GetResourceVersion()
		}
		if err := eachObject(page, func(o client.Object) error {
			if _, err := c.tracker.kindOf(o, formOf(o)); err != nil {
				return err
			}
			server[client.ObjectKeyFromObject(o)] = o
			return nil
		}); err != nil {
			return res, fmt.Errorf("prime the client: %w", err)
		}
		if cont = page.GetContinue(); cont == "" {
			break
		}
	}
	res.Listed = len(server)

	inCache, ok := list.DeepCopyObject().(client.ObjectList)
	if !ok {
		return res, fmt.Errorf("prime the client from %T: its copy is not a list: %w", list, ErrNilObject)
	}
	if err := c.inner.List(ctx, inCache, opts...); err != nil {
		return res, fmt.Errorf("prime the client: cached list %T: %w", list, err)
	}
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	selective := (lo.LabelSelector != nil && !lo.LabelSelector.Empty()) || (lo.FieldSelector != nil && !lo.FieldSelector.Empty())
	err := eachObject(inCache, func(cached client.Object) error {
		s, found := server[client.ObjectKeyFromObject(cached)]
		if !found && selective {
			var err error
			if s, err = liveCopy(ctx, live, cached); err != nil {
				return err
			}
			found = s != nil
		}
		than := res.ResourceVersion
		if found {
			than = s.GetResourceVersion()
		}
		behind, err := older(cached, than)
		switch {
		case err != nil || !behind:
			return err
		case found:
			res.Behind++
			return c.recordWrite(ctx, "prime", s, "")
		default:
			res.Gone++
			return c.recordDeletion(ctx, cached, ownGone)
		}
	})
	if err != nil {
		return res, fmt.Errorf("prime the client: %w", err)
	}
	return res, nil
}
