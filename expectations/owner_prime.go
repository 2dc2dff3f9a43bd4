package expectations

import (
	"context"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/racesafe/racesafe/internal/objcopy"
)

// OwnerPrimeResult says what OwnerTracker.Prime recorded, over every owned
// kind.
type OwnerPrimeResult struct {
	// Listed is how many owned objects (with a controller reference to the
	// owner kind) the live Lists returned.
	Listed int
	// Missing is how many of them a declared form's cache did not show,
	// Behind how many it showed at an older resourceVersion, and Gone how
	// many it showed that the server had deleted before its List: each is
	// now a record of its owner.
	Missing, Behind, Gone int
}

// Prime gives a tracker that starts empty, typically a new leader's, what
// it would have recorded had it made the owned writes of whoever ran
// before it: it Lists every kind declared in OwnerOptions.Owns live
// (through live, the manager's API reader; metadata only, in pages, with
// opts, for instance client.InNamespace), then each declared form from the
// cache, and records for each owned object's owner, found by its
// controller reference:
//
//   - live but not cached: a write at the live resourceVersion;
//   - cached at an older resourceVersion: a write at the live one;
//   - cached but absent from the live List, older than the List: a
//     deletion.
//
// The owners' Checks are then stale until the cache has shown that gap,
// so a new leader whose cache lags its predecessor's creates does not make
// a second child. Only the gap is recorded: each record is settled by an
// event already on its way. Prime requires OwnerOptions.Owns (an
// ErrOwnerOptions error otherwise) and returns the Lists' errors wrapped;
// with AwaitPrime, its return, error or not, lets Checks through.
func (t *OwnerTracker) Prime(ctx context.Context, live client.Reader, opts ...client.ListOption) (OwnerPrimeResult, error) {
	defer t.primeDone()
	var res OwnerPrimeResult
	if t.declared == nil {
		return res, fmt.Errorf("Prime needs OwnerOptions.Owns: %w", ErrOwnerOptions)
	}
	if objcopy.IsNil(live) {
		return res, fmt.Errorf("Prime with a nil reader: %w", ErrOwnerOptions)
	}
	gks := make([]schema.GroupKind, 0, len(t.declared))
	for gk := range t.declared {
		gks = append(gks, gk)
	}
	sort.Slice(gks, func(i, j int) bool { return gks[i].String() < gks[j].String() })
	for _, gk := range gks {
		if err := t.primeKind(ctx, live, t.declared[gk], &res, opts); err != nil {
			return res, fmt.Errorf("prime %s: %w", gk, err)
		}
	}
	return res, nil
}

func (t *OwnerTracker) primeKind(ctx context.Context, live client.Reader, protos []client.Object, res *OwnerPrimeResult, opts []client.ListOption) error {
	gvk := protos[0].GetObjectKind().GroupVersionKind()
	server := map[client.ObjectKey]*metav1.PartialObjectMetadata{}
	listRV := ""
	cont := ""
	for {
		page := &metav1.PartialObjectMetadataList{}
		page.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		pageOpts := append(append([]client.ListOption{}, opts...), client.Limit(primePage), client.Continue(cont))
		if err := live.List(ctx, page, pageOpts...); err != nil {
			return fmt.Errorf("live list: %w", err)
		}
		if listRV == "" {
			listRV = page.GetResourceVersion()
		}
		for i := range page.Items {
			o := &page.Items[i]
			if _, _, err := t.controllerOf(o); err != nil {
				continue
			}
			o.SetGroupVersionKind(gvk)
			server[client.ObjectKeyFromObject(o)] = o
		}
		if cont = page.GetContinue(); cont == "" {
			break
		}
	}
	res.Listed += len(server)

	for _, proto := range protos {
		list, err := t.listOf(proto, gvk)
		if err != nil {
			return err
		}
		if err := t.cache.List(ctx, list, opts...); err != nil {
			return fmt.Errorf("cached list of %T: %w", proto, err)
		}
		shown := map[client.ObjectKey]bool{}
		do := primeActions{
			behind: func(s client.Object) error { return t.ExpectOwnedWrite(ctx, s) },
			gone: func(c client.Object, _ string) error {
				c.GetObjectKind().SetGroupVersionKind(gvk)
				return t.ExpectOwnedDeletion(ctx, c)
			},
		}
		err = eachObject(list, func(c client.Object) error {
			key := client.ObjectKeyFromObject(c)
			shown[key] = true
			if _, _, err := t.controllerOf(c); err != nil {
				return nil
			}
			// Another incarnation under c's name means c's object is gone.
			var current client.Object
			if s, found := server[key]; found && sameUID(s.GetUID(), c.GetUID()) {
				current = s
			}
			return primeCached(c, current, listRV, listRV, &res.Behind, &res.Gone, do)
		})
		if err != nil {
			return err
		}
		for key, s := range server {
			if shown[key] {
				continue
			}
			res.Missing++
			if err := t.ExpectOwnedWrite(ctx, s); err != nil {
				return err
			}
		}
	}
	return nil
}

// listOf returns an empty list of proto's form for kind gvk.
func (t *OwnerTracker) listOf(proto client.Object, gvk schema.GroupVersionKind) (client.ObjectList, error) {
	l, err := objcopy.EmptyList(proto, gvk, t.scheme)
	if err != nil {
		return nil, fmt.Errorf("list of %s: %w: %w", gvk, ErrUnknownKind, err)
	}
	return l, nil
}

// primeDone lets Checks through once Prime has returned.
func (t *OwnerTracker) primeDone() { t.awaiting.Store(false) }
