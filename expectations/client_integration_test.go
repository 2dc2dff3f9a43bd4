package expectations_test

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/racesafe/racesafe/expectations"
	"github.com/racesafe/racesafe/internal/testenv"
)

// testClientRecordsOwnedWrites: through the drop-in Client, the Create and
// the Delete of an owned object each make CheckOwner refuse the owner until
// the cache has seen them, while a Get of the owner itself, which the
// client did not write, is not refused.
func testClientRecordsOwnedWrites(t *testing.T, cfg *rest.Config, direct client.Client) {
	ctx := t.Context()
	ns := "client-owned"
	testenv.Namespace(t, direct, ns)
	informers, gate := gatedCache(t, cfg, ns, false)
	owners, err := expectations.NewOwnerTracker(expectations.OwnerOptions{Name: "client-owned", For: &corev1.ConfigMap{}, Cache: informers})
	if err != nil {
		t.Fatal(err)
	}
	cached := testenv.Client(t, cfg, client.Options{Cache: &client.CacheOptions{Reader: informers}})
	c, err := expectations.NewClient(cached, expectations.ClientOptions{Name: "client-owned", Owners: owners, APIReader: direct})
	if err != nil {
		t.Fatal(err)
	}
	testenv.SyncInformers(ctx, t, informers, &corev1.Secret{}, &corev1.ConfigMap{})
	owner := createOwner(t, direct, ns)
	key := client.ObjectKeyFromObject(owner)
	waitFor(t, "the cache to show the owner", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, key, &corev1.ConfigMap{})
		return err == nil, client.IgnoreNotFound(err)
	})

	refusedUntilRelease := func(what string) {
		t.Helper()
		err := c.CheckOwner(ctx, key)
		var stale *expectations.OwnerStaleError
		if !errors.As(err, &stale) || !errors.Is(err, expectations.ErrStale) {
			t.Fatalf("CheckOwner after %s, watch held = %v, want *OwnerStaleError", what, err)
		}
		if err := c.Get(ctx, key, &corev1.ConfigMap{}); err != nil {
			t.Errorf("Get of the owner, which this client did not write, = %v", err)
		}
		gate.release()
		waitFor(t, "CheckOwner to pass after "+what, func(ctx context.Context) (bool, error) {
			err := c.CheckOwner(ctx, key)
			if errors.Is(err, expectations.ErrStale) {
				return false, nil
			}
			return err == nil, err
		})
	}

	gate.hold()
	child := newOwnedSecret(t, owner)
	if err := c.Create(ctx, child); err != nil {
		t.Fatal(err)
	}
	refusedUntilRelease("the child's Create")

	gate.hold()
	if err := c.Delete(ctx, child); err != nil {
		t.Fatal(err)
	}
	refusedUntilRelease("the child's Delete")

	if err := direct.Delete(ctx, owner); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "CheckOwner of a deleted owner to pass", func(ctx context.Context) (bool, error) {
		return c.CheckOwner(ctx, key) == nil, nil
	})
}
