package expectations

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
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
//     resourceVersion older than the List's: its deletion, the name free
//     at the List's version, so Get answers NotFound and List leaves it
//     out for every copy at that version or older, those the cache has
//     yet to deliver included, until the cache drops it (Gone). With a
//     label or field selector, absence may mean the object no longer
//     matches: Prime then reads it live by name, and keeps the live copy
//     when the cache's is older, or, when it is gone, reads it back as a
//     Delete's answer is (the name free at a live List's version).
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
	res, err := primeGap(ctx, live, c.inner, list, opts, primeActions{
		check:  func(o client.Object) error { _, err := c.tracker.kindOf(o, formOf(o)); return err },
		behind: func(s client.Object) error { return c.recordWrite(ctx, "prime", s, "") },
		gone: func(cached client.Object, freeAt string) error {
			if freeAt == "" {
				// Only a Get by name said so: read the version live.
				return c.settle(ctx, "prime", cached)
			}
			return c.recordDeletion(ctx, cached, freeAt)
		},
	})
	if err != nil {
		return res, fmt.Errorf("client: %w", err)
	}
	return res, nil
}
