package expectations_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/racesafe/racesafe/expectations"
)

// The forms of a cache: one informer each.
const (
	typedForm    = "typed"
	unstructForm = "unstructured"
	metaForm     = "metadata"
)

var allCacheForms = []string{typedForm, unstructForm, metaForm}

type snapKey struct {
	form string
	gk   schema.GroupKind
	key  client.ObjectKey
}

// rig is a Client over a controller-runtime fake server whose cache is a
// snapshot the test moves by hand, per form (show, drop), and whose
// informers' event handlers the test calls itself (deliver).
type rig struct {
	t      *testing.T
	srv    client.WithWatch // the server: fake, under the test's server funcs
	c      *expectations.Client
	mu     sync.Mutex
	snap   map[snapKey]client.Object // typed copies
	events []informerHandler
}

type informerHandler struct {
	form string
	gvk  schema.GroupVersionKind
	h    toolscache.ResourceEventHandler
}

type rigOptions struct {
	objs      []client.Object   // seeded on the server
	server    interceptor.Funcs // the server's own behaviour (its writes and reads)
	apiReader client.Reader     // the Client's API reader; the server when nil
	noCache   bool              // no ClientOptions.Cache
}

func newRig(t *testing.T, o rigOptions) *rig {
	t.Helper()
	r := &rig{t: t, snap: map[snapKey]client.Object{}}
	r.srv = interceptor.NewClient(fake.NewClientBuilder().WithObjects(o.objs...).Build(), o.server)
	inner := interceptor.NewClient(r.srv, interceptor.Funcs{
		Get: func(_ context.Context, _ client.WithWatch, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
			return r.get(key, obj)
		},
		List: func(_ context.Context, _ client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			return r.list(list, opts...)
		},
	})
	opts := expectations.ClientOptions{Name: "attack-" + t.Name(), APIReader: o.apiReader}
	if opts.APIReader == nil {
		opts.APIReader = r.srv
	}
	if !o.noCache {
		opts.Cache = rigInformers{r}
	}
	c, err := expectations.NewClient(inner, opts)
	if err != nil {
		t.Fatal(err)
	}
	r.c = c
	return r
}

func (r *rig) gk(obj runtime.Object) schema.GroupVersionKind {
	switch obj.(type) {
	case *unstructured.Unstructured, *metav1.PartialObjectMetadata, *unstructured.UnstructuredList, *metav1.PartialObjectMetadataList:
		return obj.GetObjectKind().GroupVersionKind()
	}
	gvk, err := apiutil.GVKForObject(obj, r.srv.Scheme())
	if err != nil {
		r.t.Fatalf("kind of %T: %v", obj, err)
	}
	return gvk
}

func rigFormName(obj runtime.Object) string {
	switch obj.(type) {
	case *unstructured.Unstructured, *unstructured.UnstructuredList:
		return unstructForm
	case *metav1.PartialObjectMetadata, *metav1.PartialObjectMetadataList:
		return metaForm
	}
	return typedForm
}

// show puts obj (typed) in the cache's forms, all when none are named.
func (r *rig) show(obj client.Object, forms ...string) {
	if len(forms) == 0 {
		forms = allCacheForms
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range forms {
		r.snap[snapKey{form: f, gk: r.gk(obj).GroupKind(), key: client.ObjectKeyFromObject(obj)}] = obj.DeepCopyObject().(client.Object)
	}
}

// showServer shows the server's copy of obj's key in every form and returns it.
func (r *rig) showServer(obj client.Object) client.Object {
	r.t.Helper()
	live := obj.DeepCopyObject().(client.Object)
	if err := r.srv.Get(context.Background(), client.ObjectKeyFromObject(obj), live); err != nil {
		r.t.Fatal(err)
	}
	r.show(live)
	return live
}

// drop takes obj's key out of every form of the cache.
func (r *rig) drop(obj client.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range allCacheForms {
		delete(r.snap, snapKey{form: f, gk: r.gk(obj).GroupKind(), key: client.ObjectKeyFromObject(obj)})
	}
}

// deliver calls the handlers of every informer of obj's kind (of forms
// only, when given) with obj, in their forms: a delete event when deleted,
// an update event otherwise.
func (r *rig) deliver(obj client.Object, deleted bool, forms ...string) {
	r.mu.Lock()
	hs := append([]informerHandler(nil), r.events...)
	r.mu.Unlock()
	gvk := r.gk(obj)
	for _, h := range hs {
		if h.gvk.GroupKind() != gvk.GroupKind() || len(forms) > 0 && !slices.Contains(forms, h.form) {
			continue
		}
		o := r.convert(obj, h.form, gvk)
		if deleted {
			h.h.OnDelete(o)
		} else {
			h.h.OnUpdate(o, o)
		}
	}
}

// convert returns typed obj of kind gvk in form f.
func (r *rig) convert(obj client.Object, f string, gvk schema.GroupVersionKind) client.Object {
	switch f {
	case unstructForm:
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			r.t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetGroupVersionKind(gvk)
		return u
	case metaForm:
		om, ok := reflect.ValueOf(obj).Elem().FieldByName("ObjectMeta").Interface().(metav1.ObjectMeta)
		if !ok {
			r.t.Fatalf("%T has no ObjectMeta", obj)
		}
		p := &metav1.PartialObjectMetadata{}
		om.DeepCopyInto(&p.ObjectMeta)
		p.SetGroupVersionKind(gvk)
		return p
	}
	cp := obj.DeepCopyObject().(client.Object)
	cp.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return cp
}

func (r *rig) get(key client.ObjectKey, out client.Object) error {
	gvk := r.gk(out)
	r.mu.Lock()
	obj, found := r.snap[snapKey{form: rigFormName(out), gk: gvk.GroupKind(), key: key}]
	r.mu.Unlock()
	if !found {
		return apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: strings.ToLower(gvk.Kind) + "s"}, key.Name)
	}
	reflect.ValueOf(out).Elem().Set(reflect.ValueOf(r.convert(obj, rigFormName(out), gvk)).Elem())
	return nil
}

func (r *rig) list(list client.ObjectList, opts ...client.ListOption) error {
	gvk := r.gk(list)
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	sel := lo.LabelSelector
	if sel == nil {
		sel = labels.Everything()
	}
	f := rigFormName(list)
	r.mu.Lock()
	var items []runtime.Object
	for k, obj := range r.snap {
		if k.form == f && k.gk == gvk.GroupKind() && (lo.Namespace == "" || lo.Namespace == k.key.Namespace) && sel.Matches(labels.Set(obj.GetLabels())) {
			items = append(items, r.convert(obj, f, gvk))
		}
	}
	r.mu.Unlock()
	return meta.SetList(list, items)
}

// rigInformers is the cache's informers as ClientOptions.Cache reads them.
type rigInformers struct{ r *rig }

func (i rigInformers) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	return &rigInformer{r: i.r, form: rigFormName(obj), gvk: i.r.gk(obj)}, nil
}

// rigInformer keeps the handlers added to it; embedding cache.Informer
// leaves its other methods nil (the Client calls none of them).
type rigInformer struct {
	cache.Informer
	r    *rig
	form string
	gvk  schema.GroupVersionKind
}

func (i *rigInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	i.r.mu.Lock()
	defer i.r.mu.Unlock()
	i.r.events = append(i.r.events, informerHandler{form: i.form, gvk: i.gvk, h: h})
	return nil, nil
}

// isStale reports whether err is the Client's refusal.
func isStale(err error) bool { return err != nil && errors.Is(err, expectations.ErrStale) }
