package expectations_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/racesafe/racesafe/expectations"
)

// formCache serves one informer, with a store whose version the test sets,
// per Go type and kind asked for, and remembers what was asked.
type formCache struct {
	client.Reader
	mu    sync.Mutex
	infs  map[string]storeInformer
	asked []string
}

func formName(obj client.Object) string {
	return fmt.Sprintf("%T/%s", obj, obj.GetObjectKind().GroupVersionKind().Kind)
}

func (c *formCache) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	name := formName(obj)
	c.asked = append(c.asked, name)
	if c.infs == nil {
		c.infs = map[string]storeInformer{}
	}
	inf, ok := c.infs[name]
	if !ok {
		inf = storeInformer{fakeOwnedInformer: &fakeOwnedInformer{}, store: &fakeVersionStore{}}
		c.infs[name] = inf
	}
	return inf, nil
}

func (c *formCache) form(name string) storeInformer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.infs[name]
}

func (c *formCache) askedFor() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.asked...)
}

func metadataSecret() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	return m
}

const (
	typedSecretForm    = "*v1.Secret/Secret"
	metadataSecretForm = "*v1.PartialObjectMetadata/Secret"
)

// TestOwnerWaitsForEveryDeclaredForm: a controller that writes typed
// Secrets and Lists them metadata-only (Owns with OnlyMetadata) decides from
// the metadata informer; the typed one catching up proves nothing of it.
func TestOwnerWaitsForEveryDeclaredForm(t *testing.T) {
	ctx := t.Context()
	fc := &formCache{}
	tr, err := expectations.NewOwnerTracker(expectations.OwnerOptions{
		Name: "forms-" + t.Name(), For: &corev1.ConfigMap{}, Cache: fc,
		Owns: []client.Object{&corev1.Secret{}, metadataSecret()},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.ExpectWrite(ctx, ownerCM("o1"), child("default", "c-1", "c1", "100")); err != nil {
		t.Fatal(err)
	}
	fc.form(typedSecretForm).store.set("100")
	fc.form(metadataSecretForm).store.set("99")
	var stale *expectations.OwnerStaleError
	if err := tr.Check(ctx, ownerCM("o1")); !errors.As(err, &stale) || stale.Seen != "99" {
		t.Fatalf("Check with the metadata form behind = %v, want stale having seen 99", err)
	}
	fc.form(metadataSecretForm).store.set("100")
	if err := tr.Check(ctx, ownerCM("o1")); err != nil {
		t.Fatalf("Check with every form caught up = %v, want nil", err)
	}
}

// TestOwnerNeverStartsAnUndeclaredInformer: with Owns, the tracker reads
// only the declared forms, never the written form's informer (which the
// cache would create and start, cluster-wide), and leaves undeclared kinds
// alone.
func TestOwnerNeverStartsAnUndeclaredInformer(t *testing.T) {
	ctx := t.Context()
	fc := &formCache{}
	tr, err := expectations.NewOwnerTracker(expectations.OwnerOptions{
		Name: "undeclared-" + t.Name(), For: &corev1.ConfigMap{}, Cache: fc,
		Owns: []client.Object{metadataSecret()},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.ExpectWrite(ctx, ownerCM("o1"), child("default", "c-1", "c1", "100")); err != nil {
		t.Fatal(err)
	}
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cm", UID: "u", ResourceVersion: "5"}}
	if err := tr.ExpectWrite(ctx, ownerCM("o1"), other); !errors.Is(err, expectations.ErrNotOwned) {
		t.Fatalf("ExpectWrite of an undeclared kind = %v, want ErrNotOwned", err)
	}
	if got := fc.askedFor(); len(got) != 1 || got[0] != metadataSecretForm {
		t.Fatalf("informers asked for = %v, want only [%s]", got, metadataSecretForm)
	}
	if n := tr.Pending(); n != 1 {
		t.Fatalf("Pending = %d, want 1", n)
	}
}

func TestOwnerOptionsRefuseANilOwns(t *testing.T) {
	_, err := expectations.NewOwnerTracker(expectations.OwnerOptions{For: &corev1.ConfigMap{}, Cache: &formCache{}, Owns: []client.Object{nil}})
	if !errors.Is(err, expectations.ErrOwnerOptions) {
		t.Fatalf("NewOwnerTracker with a nil Owns entry = %v, want ErrOwnerOptions", err)
	}
}

// TestOwnerWakesWhenTheWatchBeatTheAnswer: the child's event reached the
// cache before the Create's answer was recorded; no later event comes, so
// the record itself must wake the owner.
func TestOwnerWakesWhenTheWatchBeatTheAnswer(t *testing.T) {
	ctx := t.Context()
	f := newOwnerFixture(t, true)
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	t.Cleanup(q.ShutDown)
	if err := f.tr.Source().Start(ctx, q); err != nil {
		t.Fatal(err)
	}
	f.store.set("100")
	f.inf.deliver(child("default", "c-1", "c1", "100"), false)
	if err := f.tr.ExpectWrite(ctx, ownerCM("o1"), child("default", "c-1", "c1", "100")); err != nil {
		t.Fatal(err)
	}
	if n := q.Len(); n != 1 {
		t.Fatalf("queue length after a record the cache already satisfies = %d, want 1", n)
	}
	req, _ := q.Get()
	q.Done(req)
	if req.NamespacedName != (types.NamespacedName{Namespace: "default", Name: "owner"}) {
		t.Fatalf("woke %v, want default/owner", req)
	}
}

// TestOwnerClusterScopedOwner: a Namespace-like owner of namespaced
// children. The records must be found by the owner's key, which has no
// namespace.
func TestOwnerClusterScopedOwner(t *testing.T) {
	ctx := t.Context()
	f := newOwnerFixture(t, true, func(o *expectations.OwnerOptions) {
		o.For = &corev1.Namespace{}
		m := meta.NewDefaultRESTMapper(nil)
		m.Add(corev1.SchemeGroupVersion.WithKind("Namespace"), meta.RESTScopeRoot)
		o.RESTMapper = m
	})
	owner := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team", UID: "ns1"}}
	c := child("team", "c-1", "c1", "100")
	c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Namespace", Name: "team", UID: "ns1", Controller: ptrTrue()}}
	if err := f.tr.ExpectOwnedWrite(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := f.tr.Check(ctx, owner); !errors.Is(err, expectations.ErrStale) {
		t.Fatalf("Check of the cluster-scoped owner with its child uncached = %v, want ErrStale", err)
	}
	f.store.set("100")
	if err := f.tr.Check(ctx, owner); err != nil {
		t.Fatalf("Check once the cache shows the child = %v, want nil", err)
	}
}

func ptrTrue() *bool { b := true; return &b }

// TestGuardReadsLiveAfterAnExpiredWait: with LiveReadOnExpiry, an owner
// whose record outlived the TTL is not refused, and not let through on the
// lagging cache either: the reconcile runs with LiveReadRequired, and the
// Client Lists the kind that waited from the API reader.
func TestGuardReadsLiveAfterAnExpiredWait(t *testing.T) {
	ctx := t.Context()
	clk := newFakeClock()
	fc := &formCache{}
	tr, err := expectations.NewOwnerTracker(expectations.OwnerOptions{
		Name: "live-" + t.Name(), For: &corev1.ConfigMap{}, Cache: fc, TTL: time.Minute, Clock: clk, LiveReadOnExpiry: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	owner := ownerCM("o1")
	lagging := fake.NewClientBuilder().WithObjects(owner).Build() // the cache: no child
	live := fake.NewClientBuilder().WithObjects(owner, child("default", "c-1", "c1", "100")).Build()
	c, err := expectations.NewClient(lagging, expectations.ClientOptions{Name: "live-" + t.Name(), Owners: tr, APIReader: live, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.ExpectWrite(ctx, owner, child("default", "c-1", "c1", "100")); err != nil {
		t.Fatal(err)
	}
	clk.Step(2 * time.Minute)

	var ran, required bool
	var children int
	r := c.Guard(reconcile.Func(func(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
		ran = true
		_, required = expectations.LiveReadRequired(ctx)
		var list corev1.SecretList
		if err := c.List(ctx, &list, client.InNamespace("default")); err != nil {
			return reconcile.Result{}, err
		}
		children = len(list.Items)
		return reconcile.Result{}, nil
	}))
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(owner)}); err != nil {
		t.Fatalf("Reconcile after the wait expired = %v, want the reconciler to run", err)
	}
	if !ran || !required || children != 1 {
		t.Fatalf("reconciler ran %v, LiveReadRequired %v, children listed %d; want true, true, 1 (read live)", ran, required, children)
	}
	// The next reconcile has nothing pending: the cache again.
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(owner)}); err != nil || required || children != 0 {
		t.Fatalf("next reconcile: err %v, LiveReadRequired %v, children %d; want the cache's 0", err, required, children)
	}
}

// TestOwnerAwaitPrime: with AwaitPrime, no owner passes before Prime has
// returned, and Prime's return (an error too) lets them through. Prime
// needs the declared kinds it lists.
func TestOwnerAwaitPrime(t *testing.T) {
	ctx := t.Context()
	tr, err := expectations.NewOwnerTracker(expectations.OwnerOptions{
		Name: "await-" + t.Name(), For: &corev1.ConfigMap{}, Cache: &formCache{}, AwaitPrime: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	var stale *expectations.OwnerStaleError
	if err := tr.Check(ctx, ownerCM("o1")); !errors.As(err, &stale) || !stale.Unprimed || !errors.Is(err, expectations.ErrStale) {
		t.Fatalf("Check before Prime = %v, want an unprimed *OwnerStaleError", err)
	}
	if _, err := tr.Prime(ctx, fake.NewClientBuilder().Build()); !errors.Is(err, expectations.ErrOwnerOptions) {
		t.Fatalf("Prime without Owns = %v, want ErrOwnerOptions", err)
	}
	if err := tr.Check(ctx, ownerCM("o1")); err != nil {
		t.Fatalf("Check after Prime returned = %v, want nil", err)
	}
	if _, err := tr.Prime(ctx, nil); !errors.Is(err, expectations.ErrOwnerOptions) {
		t.Fatalf("Prime with a nil reader = %v, want ErrOwnerOptions", err)
	}
}
