package expectations_test

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/racesafe/racesafe/expectations"
)

// listCache is an informer cache of ConfigMaps that the test moves by hand:
// the Client's writes go to the server (numbered here, not stored) and
// reach the cache only when the test says so. Gets and Lists are counted.
type listCache struct {
	mu  sync.Mutex
	cms map[client.ObjectKey]*corev1.ConfigMap
	// srv is the server's side: what the writes left, which the API
	// reader (server) reads.
	srv   map[client.ObjectKey]client.Object
	rv    atomic.Int64
	gets  atomic.Int64
	lists atomic.Int64
}

func newListCache() *listCache {
	l := &listCache{cms: map[client.ObjectKey]*corev1.ConfigMap{}, srv: map[client.ObjectKey]client.Object{}}
	l.rv.Store(100)
	return l
}

// show puts cm in the cache as it is.
func (l *listCache) show(cm *corev1.ConfigMap) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cms[client.ObjectKeyFromObject(cm)] = cm.DeepCopy()
}

// forget takes key out of the cache: the deletion was delivered.
func (l *listCache) forget(key client.ObjectKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.cms, key)
}

func (l *listCache) client() client.Client {
	return interceptor.NewClient(fake.NewClientBuilder().Build(), interceptor.Funcs{
		Get: func(_ context.Context, _ client.WithWatch, key client.ObjectKey, out client.Object, _ ...client.GetOption) error {
			l.gets.Add(1)
			l.mu.Lock()
			cm, found := l.cms[key]
			l.mu.Unlock()
			if !found {
				return apierrors.NewNotFound(corev1.Resource("configmaps"), key.Name)
			}
			reflect.ValueOf(out).Elem().Set(reflect.ValueOf(cm.DeepCopy()).Elem())
			return nil
		},
		List: func(_ context.Context, _ client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			l.lists.Add(1)
			lo := (&client.ListOptions{}).ApplyOptions(opts)
			sel := lo.LabelSelector
			if sel == nil {
				sel = labels.Everything()
			}
			l.mu.Lock()
			defer l.mu.Unlock()
			var items []runtime.Object
			for key, cm := range l.cms {
				if (lo.Namespace == "" || key.Namespace == lo.Namespace) && sel.Matches(labels.Set(cm.Labels)) {
					items = append(items, cm.DeepCopy())
				}
			}
			return meta.SetList(list, items)
		},
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			obj.SetResourceVersion(strconv.FormatInt(l.rv.Add(1), 10))
			obj.SetUID(types.UID("u-" + obj.GetName()))
			l.stored(obj)
			return nil
		},
		Update: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.UpdateOption) error {
			obj.SetResourceVersion(strconv.FormatInt(l.rv.Add(1), 10))
			l.stored(obj)
			return nil
		},
		Delete: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.DeleteOption) error {
			l.rv.Add(1)
			l.mu.Lock()
			delete(l.srv, client.ObjectKeyFromObject(obj))
			l.mu.Unlock()
			return nil
		},
	})
}

func (l *listCache) stored(obj client.Object) {
	l.mu.Lock()
	l.srv[client.ObjectKeyFromObject(obj)] = obj.DeepCopyObject().(client.Object)
	l.mu.Unlock()
}

// server is the API reader: the server's objects, and its version on a
// List.
func (l *listCache) server() client.Reader { return listServer{l} }

type listServer struct{ l *listCache }

func (s listServer) Get(_ context.Context, key client.ObjectKey, out client.Object, _ ...client.GetOption) error {
	s.l.mu.Lock()
	obj, found := s.l.srv[key]
	s.l.mu.Unlock()
	if !found {
		return apierrors.NewNotFound(corev1.Resource("configmaps"), key.Name)
	}
	cm, ok := obj.(*corev1.ConfigMap)
	dst, isCM := out.(*corev1.ConfigMap)
	if !ok || !isCM {
		return apierrors.NewNotFound(corev1.Resource("configmaps"), key.Name)
	}
	*dst = *cm.DeepCopy()
	return nil
}

func (s listServer) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	list.SetResourceVersion(strconv.FormatInt(s.l.rv.Load(), 10))
	return nil
}

// children creates n ConfigMaps labelled app=x through c, and shows them in
// the cache at the versions the server answered.
func children(t testing.TB, c *expectations.Client, l *listCache, ns string, n int) []*corev1.ConfigMap {
	t.Helper()
	out := make([]*corev1.ConfigMap, 0, n)
	for i := range n {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprint("child-", i), Labels: map[string]string{"app": "x"}}}
		if err := c.Create(context.Background(), cm); err != nil {
			t.Fatal(err)
		}
		l.show(cm)
		out = append(out, cm)
	}
	return out
}

// TestListAsksTheCacheOnceForAWriteItDoesNotShow: a List asks the cache
// about an own deletion it cannot show (by a Get, as a Get of it would) until
// the cache has caught up with it, then never again: the Lists of a burst of
// deletions read each deletion once, not once per List (the drop-in port
// spent more CPU in its Lists than in anything else of its own, all of it
// rereading deletions the cache had long shown). Writes of other kinds and
// namespaces are not read at all.
func TestListAsksTheCacheOnceForAWriteItDoesNotShow(t *testing.T) {
	l := newListCache()
	c, err := expectations.NewClient(l.client(), expectations.ClientOptions{Name: "list-once", APIReader: l.server()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const n = 20
	cms := children(t, c, l, "default", n)
	// Writes elsewhere: another namespace, and another kind in this one.
	children(t, c, l, "other", n)
	for i := range n {
		if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprint("s-", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	list := func() []string {
		t.Helper()
		var got corev1.ConfigMapList
		if err := c.List(ctx, &got, client.InNamespace("default"), client.MatchingLabels{"app": "x"}); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, cm := range got.Items {
			names = append(names, cm.Name)
		}
		return names
	}
	list() // the creates: shown by the cache, caught up

	for _, cm := range cms[:n/2] {
		if err := c.Delete(ctx, cm); err != nil {
			t.Fatal(err)
		}
		l.forget(client.ObjectKeyFromObject(cm)) // delivered
	}
	gets := l.gets.Load()
	if got := list(); len(got) != n/2 {
		t.Fatalf("after %d of %d deleted, listed %d: %v", n/2, n, len(got), got)
	}
	if asked := l.gets.Load() - gets; asked != n/2 {
		t.Errorf("the first List after %d deletions asked the cache %d times, want %d (one per deletion)", n/2, asked, n/2)
	}
	gets = l.gets.Load()
	for range 3 {
		list()
	}
	if asked := l.gets.Load() - gets; asked != 0 {
		t.Errorf("three more Lists asked the cache %d times about deletions it had caught up with, want 0", asked)
	}

	// A deletion the cache has not delivered is asked again, and served.
	lagging := cms[n-1]
	if err := c.Delete(ctx, lagging); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		for _, name := range list() {
			if name == lagging.Name {
				t.Fatalf("%s listed after this client deleted it", name)
			}
		}
	}
	var got corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKeyFromObject(lagging), &got); !apierrors.IsNotFound(err) {
		t.Errorf("Get of %s after this client deleted it, the cache not caught up: %v at %s, want NotFound", lagging.Name, err, got.ResourceVersion)
	}
}

// TestListDoesNotTakeAnAbsenceForTheCacheCatchingUp: a List by label that
// does not show an object is no proof that the cache has seen this client's
// write of it: the cache may hold an older version the selector leaves out.
// Attack: relabel an object (app=x to app=y), then delete it; the cache
// still holds the app=y version, which a List of app=x does not show. A Get
// after that List must still say NotFound, not hand out the version this
// client deleted.
func TestListDoesNotTakeAnAbsenceForTheCacheCatchingUp(t *testing.T) {
	l := newListCache()
	c, err := expectations.NewClient(l.client(), expectations.ClientOptions{Name: "list-absence", APIReader: l.server()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	cm := children(t, c, l, "default", 1)[0]
	cm.Labels = map[string]string{"app": "y"}
	if err := c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	l.show(cm) // the cache has the relabelled version
	if err := c.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	// The deletion is not delivered; the app=x List does not show the object.
	var xs corev1.ConfigMapList
	if err := c.List(ctx, &xs, client.InNamespace("default"), client.MatchingLabels{"app": "x"}); err != nil {
		t.Fatal(err)
	}
	if len(xs.Items) != 0 {
		t.Fatalf("app=x listed %d items, want 0", len(xs.Items))
	}
	var got corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), &got); !apierrors.IsNotFound(err) {
		t.Errorf("Get after the List: %v, %s at %s; want NotFound: this client deleted it", err, got.Name, got.ResourceVersion)
	}
	var ys corev1.ConfigMapList
	if err := c.List(ctx, &ys, client.InNamespace("default"), client.MatchingLabels{"app": "y"}); err != nil {
		t.Fatal(err)
	}
	if len(ys.Items) != 0 {
		t.Errorf("app=y listed %s after this client deleted it", ys.Items[0].Name)
	}

	// A write whose new labels the selector leaves out is not shown, and
	// the cache's older version that the selector matches is not either.
	cm2 := children(t, c, l, "default", 2)[1]
	cm2.Labels = map[string]string{"app": "z"}
	if err := c.Update(ctx, cm2); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		xs = corev1.ConfigMapList{}
		if err := c.List(ctx, &xs, client.InNamespace("default"), client.MatchingLabels{"app": "x"}); err != nil {
			t.Fatal(err)
		}
		for _, item := range xs.Items {
			if item.Name == cm2.Name {
				t.Fatalf("app=x listed %s, which this client relabelled app=z", item.Name)
			}
		}
	}
}

// BenchmarkClientList compares, in one run, a List of one namespace's
// children by label from the cache alone (the peer: what a controller
// without racesafe pays) with the Client's List while it holds, within the
// TTL, the writes of a burst: 500 children it created and deleted in that
// namespace (the cache has caught up), and 500 writes of another kind and
// another namespace.
func BenchmarkClientList(b *testing.B) {
	const burst = 500
	setup := func(b *testing.B) (*listCache, *expectations.Client) {
		l := newListCache()
		c, err := expectations.NewClient(l.client(), expectations.ClientOptions{Name: "bench-list", APIReader: l.server()})
		if err != nil {
			b.Fatal(err)
		}
		cms := children(b, c, l, "default", burst+4)
		children(b, c, l, "other", burst)
		for i := range burst {
			if err := c.Create(b.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprint("s-", i)}}); err != nil {
				b.Fatal(err)
			}
		}
		for _, cm := range cms[:burst] {
			if err := c.Delete(b.Context(), cm); err != nil {
				b.Fatal(err)
			}
			l.forget(client.ObjectKeyFromObject(cm))
		}
		return l, c
	}
	opts := []client.ListOption{client.InNamespace("default"), client.MatchingLabels{"app": "x"}}
	b.Run("case=cache_alone", func(b *testing.B) {
		l, _ := setup(b)
		inner := l.client()
		b.ReportAllocs()
		for b.Loop() {
			var list corev1.ConfigMapList
			if err := inner.List(b.Context(), &list, opts...); err != nil || len(list.Items) != 4 {
				b.Fatalf("%v: %d items", err, len(list.Items))
			}
		}
	})
	b.Run("case=client_after_burst", func(b *testing.B) {
		_, c := setup(b)
		b.ReportAllocs()
		for b.Loop() {
			var list corev1.ConfigMapList
			if err := c.List(b.Context(), &list, opts...); err != nil || len(list.Items) != 4 {
				b.Fatalf("%v: %d items", err, len(list.Items))
			}
		}
	})
}
