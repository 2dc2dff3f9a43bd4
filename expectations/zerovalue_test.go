package expectations_test

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/racesafe/racesafe/expectations"
)

var widgetGVK = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "widget"}

func widgetScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	s.AddKnownTypes(widgetGVK.GroupVersion(), &widget{})
	metav1.AddToGroupVersion(s, widgetGVK.GroupVersion())
	return s
}

func newWidget(name, rv string) *widget {
	return &widget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("w-" + name), ResourceVersion: rv}}
}

// TestZeroOptionsTrackerTakesTheClientsScheme: a Tracker from
// expectations.Options{} knows the kinds of the client NewReader is given
// (the manager's client, whose scheme has the controller's own kinds), for
// the Reader's Gets and for ExpectWrite and Check.
func TestZeroOptionsTrackerTakesTheClientsScheme(t *testing.T) {
	s := widgetScheme(t)
	tr := expectations.New(expectations.Options{})
	if err := tr.ExpectWrite(newWidget("a", "5")); !errors.Is(err, expectations.ErrUnknownKind) {
		t.Fatalf("ExpectWrite before the tracker met a client = %v, want ErrUnknownKind", err)
	}
	stored := newWidget("a", "")
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(stored).Build()
	r := expectations.NewReader(c, tr)

	got := &widget{}
	if err := r.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "a"}, got); err != nil {
		t.Fatalf("Reader.Get of a custom kind with zero Options = %v", err)
	}
	written := got.DeepCopyObject().(*widget)
	written.ResourceVersion = bump(t, got.ResourceVersion)
	if err := tr.ExpectWrite(written); err != nil {
		t.Fatalf("ExpectWrite of a custom kind after NewReader = %v", err)
	}
	var stale *expectations.StaleError
	if err := tr.Check(got); !errors.As(err, &stale) || stale.Kind != widgetGVK.GroupKind() {
		t.Errorf("Check of the copy before the write = %v, want stale for %s", err, widgetGVK.GroupKind())
	}
	// An explicit scheme stays the only answer.
	strict := expectations.New(expectations.Options{Scheme: clientgoscheme.Scheme})
	_ = expectations.NewReader(c, strict)
	if err := strict.ExpectWrite(written); !errors.Is(err, expectations.ErrUnknownKind) {
		t.Errorf("ExpectWrite with an explicit Scheme that lacks the kind = %v, want ErrUnknownKind", err)
	}
}

// TestZeroOptionsTrackerNamesKindByTypeMeta: without a scheme, a typed
// object whose TypeMeta carries its kind is named by it, and its Go type
// keeps that kind for objects without TypeMeta (a write's answer).
func TestZeroOptionsTrackerNamesKindByTypeMeta(t *testing.T) {
	tr := expectations.New(expectations.Options{})
	cached := newWidget("a", "4")
	cached.SetGroupVersionKind(widgetGVK)
	if err := tr.Check(cached); err != nil {
		t.Fatalf("Check of a typed object with its TypeMeta = %v", err)
	}
	if err := tr.ExpectWrite(newWidget("a", "5")); err != nil {
		t.Fatalf("ExpectWrite of the same Go type without TypeMeta = %v", err)
	}
	var stale *expectations.StaleError
	if err := tr.Check(cached); !errors.As(err, &stale) || stale.Kind != widgetGVK.GroupKind() {
		t.Errorf("Check = %v, want stale for %s", err, widgetGVK.GroupKind())
	}
}

// cacheLike is a reader without a scheme that sets the kind on what it
// returns, as controller-runtime's cache (mgr.GetCache()) does.
type cacheLike struct {
	c client.Client
}

func (r cacheLike) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := r.c.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	gvk, err := r.c.GroupVersionKindFor(obj)
	if err != nil {
		return err
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return nil
}

func (r cacheLike) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return r.c.List(ctx, list, opts...)
}

// TestZeroOptionsReaderLearnsKindFromTheCache: NewReader over a cache that
// has no scheme (mgr.GetCache()) reads a custom kind: the kind comes from
// the cache's answer, and the write's answer, without TypeMeta, is then
// recorded under it.
func TestZeroOptionsReaderLearnsKindFromTheCache(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(widgetScheme(t)).WithObjects(newWidget("a", "")).Build()
	tr := expectations.New(expectations.Options{})
	r := expectations.NewReader(cacheLike{c}, tr)
	key := client.ObjectKey{Namespace: "default", Name: "a"}
	if err := r.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "missing"}, &widget{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of a missing object = %v, want NotFound", err)
	}
	got := &widget{}
	if err := r.Get(t.Context(), key, got); err != nil {
		t.Fatalf("Reader.Get over a cache without a scheme = %v", err)
	}
	written := newWidget("a", bump(t, got.ResourceVersion))
	written.UID = got.UID
	if err := tr.ExpectWrite(written); err != nil {
		t.Fatalf("ExpectWrite after the Reader learned the kind = %v", err)
	}
	if err := r.Get(t.Context(), key, &widget{}); !errors.Is(err, expectations.ErrStale) {
		t.Errorf("Get of the cache's older copy = %v, want ErrStale", err)
	}
}

// TestZeroOptionsTrackerSharedWithClient: a Tracker from Options{} shared
// with a Client (ClientOptions.Tracker) records the Client's writes of a
// custom kind: NewClient gives it the wrapped client's scheme.
func TestZeroOptionsTrackerSharedWithClient(t *testing.T) {
	base := fake.NewClientBuilder().WithScheme(widgetScheme(t)).Build()
	tr := expectations.New(expectations.Options{})
	c, err := expectations.NewClient(base, expectations.ClientOptions{Tracker: tr, APIReader: base})
	if err != nil {
		t.Fatal(err)
	}
	w := newWidget("new", "")
	w.UID = ""
	if err := c.Create(t.Context(), w); err != nil {
		t.Fatalf("Create of a custom kind through a Client sharing a Tracker from Options{} = %v", err)
	}
	if got := tr.Pending(); got != 1 {
		t.Errorf("the shared tracker holds %d expectations, want the Create's 1", got)
	}
}
