package expectations_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/racesafe/racesafe/expectations"
	"github.com/racesafe/racesafe/internal/testenv"
	"github.com/racesafe/racesafe/racetest"
)

// TestIntegrationOwnerCheckCoversWhatTheListReads attacks the owner check
// where the last review found it blind, on a real API server, each case in
// its own namespace with its own gated cache: the watch is held while the
// controller writes, so the cached List lacks the write, and the check must
// say so.
func TestIntegrationOwnerCheckCoversWhatTheListReads(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	direct := testenv.Client(t, env.Config, client.Options{})
	t.Run("typed write, metadata-only List", func(t *testing.T) {
		testTypedWriteMetadataList(t, env.Config, direct)
	})
	t.Run("cluster-scoped owner of namespaced children", func(t *testing.T) {
		testClusterScopedOwner(t, env.Config, direct)
	})
	t.Run("cleanup of an old incarnation's child", func(t *testing.T) {
		testOldIncarnationCleanup(t, env.Config, direct)
	})
	t.Run("ambiguous generateName create, not applied", func(t *testing.T) {
		testAmbiguousCreateNotApplied(t, env.Config, direct)
	})
	t.Run("ambiguous generateName create, still in flight", func(t *testing.T) {
		testAmbiguousCreateInFlight(t, env.Config, direct)
	})
}

// testAmbiguousCreateNotApplied: a child Create with generateName answered
// with a 500 the server did not apply. The Client's live List finds nothing
// of this owner's by that generateName: the owner's check passes, and the
// kind's List is served once the server's request deadline
// (ClientOptions.RequestTimeout) has passed since the Create, where the
// kind's current version (the List's, which every write anywhere moves)
// would have held it until a Secret event came, or the TTL.
func testAmbiguousCreateNotApplied(t *testing.T, cfg *rest.Config, direct client.Client) {
	ctx := t.Context()
	ns := "holes-unapplied"
	informers, tr, cached := ownedCache(t, cfg, direct, ns)
	faults, err := racetest.NewFaults(racetest.FaultOptions{ServerError: 1, Operations: []racetest.Operation{racetest.OpCreate}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := expectations.NewClient(interceptor.NewClient(cached, faults.Funcs()), expectations.ClientOptions{Name: "holes-unapplied", Owners: tr, APIReader: direct, RequestTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	testenv.SyncInformers(t.Context(), t, informers, &corev1.Secret{}, &corev1.ConfigMap{})
	owner := createOwner(t, direct, ns)
	waitFor(t, "the owner in the cache", func(ctx context.Context) (bool, error) {
		return informers.Get(ctx, client.ObjectKeyFromObject(owner), &corev1.ConfigMap{}) == nil, nil
	})
	if err := c.Create(ctx, newOwnedSecret(t, owner)); err == nil {
		t.Fatal("Create succeeded; the test needs it to fail with a 500")
	}
	// Something else written after the failed Create moves the server's
	// version past anything the Secrets' watch will deliver.
	if err := direct.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"}}); err != nil {
		t.Fatal(err)
	}
	var live corev1.SecretList
	if err := direct.List(ctx, &live, client.InNamespace(ns)); err != nil || len(live.Items) != 0 {
		t.Fatalf("Secrets on the server: %d, %v; the fault must not have been applied", len(live.Items), err)
	}
	if err := c.CheckOwner(ctx, client.ObjectKeyFromObject(owner)); err != nil {
		t.Errorf("CheckOwner after a create the server did not apply = %v, want nil", err)
	}
	waitFor(t, "the List served once the request deadline has passed", func(ctx context.Context) (bool, error) {
		var list corev1.SecretList
		err := c.List(ctx, &list, client.InNamespace(ns))
		if errors.Is(err, expectations.ErrStale) {
			return false, nil
		}
		return err == nil, err
	})
}

// ownedCache makes namespace ns and, over a cache of it, an OwnerTracker of
// ConfigMap owners named ns and a client that reads the cache.
func ownedCache(t *testing.T, cfg *rest.Config, direct client.Client, ns string) (cache.Cache, *expectations.OwnerTracker, client.WithWatch) {
	t.Helper()
	testenv.Namespace(t, direct, ns)
	informers, _ := gatedCache(t, cfg, ns, false)
	tr, err := expectations.NewOwnerTracker(expectations.OwnerOptions{Name: ns, For: &corev1.ConfigMap{}, Cache: informers})
	if err != nil {
		t.Fatal(err)
	}
	cached, err := client.NewWithWatch(cfg, client.Options{Cache: &client.CacheOptions{Reader: informers}})
	if err != nil {
		t.Fatal(err)
	}
	return informers, tr, cached
}

// testAmbiguousCreateInFlight (issue 35, 3): a child Create with
// generateName answered with a timeout while the server is still
// processing it (a slow webhook, a slow etcd). The Client's read back finds
// no child, which proves nothing before the server's request deadline: the
// kind's List is refused, never served without the child, until the cache
// shows the child the server applied a moment later.
func testAmbiguousCreateInFlight(t *testing.T, cfg *rest.Config, direct client.Client) {
	ctx := t.Context()
	ns := "holes-inflight"
	informers, tr, cached := ownedCache(t, cfg, direct, ns)
	// The Create is answered with a timeout at once, and applied by the
	// server only after the test lets it: after the Client's read back.
	apply := make(chan struct{})
	release := sync.OnceFunc(func() { close(apply) })
	t.Cleanup(release)
	applied := make(chan error, 1)
	slow := interceptor.Funcs{Create: func(_ context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		sent := obj.DeepCopyObject().(client.Object)
		go func() {
			<-apply
			applied <- c.Create(context.Background(), sent, opts...)
		}()
		return apierrors.NewTimeoutError("the request is still being processed", 1)
	}}
	c, err := expectations.NewClient(interceptor.NewClient(cached, slow), expectations.ClientOptions{Name: "holes-inflight", Owners: tr, APIReader: direct, RequestTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	testenv.SyncInformers(t.Context(), t, informers, &corev1.Secret{}, &corev1.ConfigMap{})
	owner := createOwner(t, direct, ns)
	waitFor(t, "the owner in the cache", func(ctx context.Context) (bool, error) {
		return informers.Get(ctx, client.ObjectKeyFromObject(owner), &corev1.ConfigMap{}) == nil, nil
	})
	if err := c.Create(ctx, newOwnedSecret(t, owner)); !apierrors.IsTimeout(err) {
		t.Fatalf("Create = %v, want the timeout", err)
	}
	var list corev1.SecretList
	if err := c.List(ctx, &list, client.InNamespace(ns)); !errors.Is(err, expectations.ErrStale) {
		t.Fatalf("List while the Create may still be applied = %d items, %v; want ErrStale", len(list.Items), err)
	}
	release()
	if err := <-applied; err != nil {
		t.Fatalf("the server's late Create: %v", err)
	}
	waitFor(t, "the List to show the child the server applied", func(ctx context.Context) (bool, error) {
		var list corev1.SecretList
		err := c.List(ctx, &list, client.InNamespace(ns))
		if errors.Is(err, expectations.ErrStale) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if len(list.Items) > 1 {
			return false, fmt.Errorf("listed %d children", len(list.Items))
		}
		return len(list.Items) == 1, nil
	})
}

// testTypedWriteMetadataList: Owns(&corev1.Secret{}, builder.OnlyMetadata)
// and a typed Create. The List the controller decides from is the metadata
// one; the typed informer, had the tracker started it, would list the child
// at once and pass the check while that List lacks it.
func testTypedWriteMetadataList(t *testing.T, cfg *rest.Config, direct client.Client) {
	ctx := t.Context()
	ns := "holes-forms"
	testenv.Namespace(t, direct, ns)
	informers, gate := gatedCache(t, cfg, ns, false)
	// Only the metadata-only watch is held, so that a typed informer can
	// start and sync (its initial list is a watch stream too).
	gate.holdOnly(func(req *http.Request) bool {
		return strings.Contains(req.Header.Get("Accept"), "as=PartialObjectMetadata")
	})
	tr, err := expectations.NewOwnerTracker(expectations.OwnerOptions{
		Name: "holes-forms", For: &corev1.ConfigMap{}, Cache: informers,
		Owns: []client.Object{metadataSecret()},
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.SyncInformers(t.Context(), t, informers, metadataSecret())
	owner := createOwner(t, direct, ns)

	gate.hold()
	c := newOwnedSecret(t, owner)
	if err := direct.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := tr.ExpectWrite(ctx, owner, c); err != nil {
		t.Fatal(err)
	}
	// A typed informer started now (the controller also Gets typed
	// Secrets) lists the child at once: it is ahead of the metadata one,
	// and says nothing of the List the controller decides from.
	testenv.SyncInformers(t.Context(), t, informers, &corev1.Secret{})
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := informers.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Fatalf("metadata List shows %d children while the watch is held; the test needs it stale", len(list.Items))
	}
	if err := tr.Check(ctx, owner); !errors.Is(err, expectations.ErrStale) {
		t.Fatalf("Check while the metadata List lacks the child = %v, want ErrStale", err)
	}
	gate.release()
	waitFor(t, "the check to pass", func(ctx context.Context) (bool, error) {
		err := tr.Check(ctx, owner)
		return err == nil, ignoreStale(err)
	})
	if err := informers.List(ctx, list, client.InNamespace(ns)); err != nil || len(list.Items) != 1 {
		t.Fatalf("metadata List after the check passed: %d children, %v; want 1", len(list.Items), err)
	}
}

// testClusterScopedOwner: a cluster-scoped owner (a Namespace) of a
// namespaced child, written through a Client whose tracker was told nothing
// of scopes: the Client asks its RESTMapper.
func testClusterScopedOwner(t *testing.T, cfg *rest.Config, direct client.Client) {
	ctx := t.Context()
	ns := "holes-cluster"
	testenv.Namespace(t, direct, ns)
	informers, gate := gatedCache(t, cfg, ns, false)
	tr, err := expectations.NewOwnerTracker(expectations.OwnerOptions{Name: "holes-cluster", For: &corev1.Namespace{}, Cache: informers})
	if err != nil {
		t.Fatal(err)
	}
	cached := testenv.Client(t, cfg, client.Options{Cache: &client.CacheOptions{Reader: informers}})
	c, err := expectations.NewClient(cached, expectations.ClientOptions{Name: "holes-cluster", Owners: tr, APIReader: direct})
	if err != nil {
		t.Fatal(err)
	}
	testenv.SyncInformers(t.Context(), t, informers, &corev1.Secret{}, &corev1.Namespace{})
	owner := &corev1.Namespace{}
	waitFor(t, "the namespace in the cache", func(ctx context.Context) (bool, error) {
		return informers.Get(ctx, client.ObjectKey{Name: ns}, owner) == nil, nil
	})

	gate.hold()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "child-"}}
	if err := controllerutil.SetControllerReference(owner, s, clientgoscheme.Scheme); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	var secrets corev1.SecretList
	if err := informers.List(ctx, &secrets, client.InNamespace(ns)); err != nil || len(secrets.Items) != 0 {
		t.Fatalf("cached List while the watch is held: %d, %v; the test needs it stale", len(secrets.Items), err)
	}
	if err := c.CheckOwner(ctx, client.ObjectKey{Name: ns}); !errors.Is(err, expectations.ErrStale) {
		t.Fatalf("CheckOwner of the cluster-scoped owner while its child is uncached = %v, want ErrStale", err)
	}
	gate.release()
	waitFor(t, "the check to pass", func(ctx context.Context) (bool, error) {
		err := c.CheckOwner(ctx, client.ObjectKey{Name: ns})
		return err == nil, ignoreStale(err)
	})
}

// testOldIncarnationCleanup: the owner was deleted and recreated (another
// UID) while a child of the old one remained. The reconcile of the new
// incarnation creates its child, then deletes the old one's: that deletion
// is recorded for the old incarnation and must not drop the new one's
// record.
func testOldIncarnationCleanup(t *testing.T, cfg *rest.Config, direct client.Client) {
	ctx := t.Context()
	ns := "holes-incarnation"
	testenv.Namespace(t, direct, ns)
	informers, gate := gatedCache(t, cfg, ns, false)
	tr, err := expectations.NewOwnerTracker(expectations.OwnerOptions{Name: "holes-incarnation", For: &corev1.ConfigMap{}, Cache: informers})
	if err != nil {
		t.Fatal(err)
	}
	cached := testenv.Client(t, cfg, client.Options{Cache: &client.CacheOptions{Reader: informers}})
	c, err := expectations.NewClient(cached, expectations.ClientOptions{Name: "holes-incarnation", Owners: tr, APIReader: direct})
	if err != nil {
		t.Fatal(err)
	}
	testenv.SyncInformers(t.Context(), t, informers, &corev1.Secret{}, &corev1.ConfigMap{})

	old := createOwner(t, direct, ns)
	oldChild := newOwnedSecret(t, old)
	if err := direct.Create(ctx, oldChild); err != nil {
		t.Fatal(err)
	}
	// envtest runs no garbage collector: the old child stays.
	if err := direct.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	current := createOwner(t, direct, ns)
	waitFor(t, "the new owner and the old child in the cache", func(ctx context.Context) (bool, error) {
		var cm corev1.ConfigMap
		if err := informers.Get(ctx, client.ObjectKeyFromObject(current), &cm); err != nil || cm.UID != current.UID {
			return false, nil
		}
		var s corev1.Secret
		return informers.Get(ctx, client.ObjectKeyFromObject(oldChild), &s) == nil, nil
	})

	gate.hold()
	if err := c.Create(ctx, newOwnedSecret(t, current)); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, oldChild); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckOwner(ctx, client.ObjectKeyFromObject(current)); !errors.Is(err, expectations.ErrStale) {
		t.Fatalf("CheckOwner of the new incarnation after the old child's cleanup = %v, want ErrStale: its child is uncached", err)
	}
	gate.release()
	waitFor(t, "the check to pass", func(ctx context.Context) (bool, error) {
		err := c.CheckOwner(ctx, client.ObjectKeyFromObject(current))
		return err == nil, ignoreStale(err)
	})
}

func ignoreStale(err error) error {
	if errors.Is(err, expectations.ErrStale) {
		return nil
	}
	return err
}
