package expectations_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/racesafe/racesafe/expectations"
)

// cachedConfigMap builds a fake "cache" holding default/a and returns the
// object as stored, with the resourceVersion the fake assigned.
func cachedConfigMap(t *testing.T, funcs *interceptor.Funcs) (client.Client, *corev1.ConfigMap) {
	t.Helper()
	c := fake.NewClientBuilder().WithObjects(configMap("a", "u1", "")).Build()
	var stored corev1.ConfigMap
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "a"}, &stored); err != nil {
		t.Fatal(err)
	}
	if funcs != nil {
		return interceptor.NewClient(c, *funcs), &stored
	}
	return c, &stored
}

// TestReaderStaleLeavesObjectUntouched is step 2 of the incident: the
// caller's object, as the server returned it, must survive a stale Get.
func TestReaderStaleLeavesObjectUntouched(t *testing.T) {
	c, stored := cachedConfigMap(t, nil)
	tr := expectations.New(expectations.Options{Name: "reader-stale"})
	written := stored.DeepCopy()
	written.ResourceVersion = bump(t, stored.ResourceVersion)
	written.Data = map[string]string{"phase": "Deleting"}
	if err := tr.ExpectWrite(written); err != nil {
		t.Fatal(err)
	}
	r := expectations.NewReader(c, tr)

	obj := written.DeepCopy()
	err := r.Get(t.Context(), client.ObjectKeyFromObject(obj), obj)

	var stale *expectations.StaleError
	if !errors.As(err, &stale) {
		t.Fatalf("Get = %v, want *StaleError", err)
	}
	if stale.Want != written.ResourceVersion || stale.Seen != stored.ResourceVersion {
		t.Errorf("StaleError want=%s seen=%s, want want=%s seen=%s", stale.Want, stale.Seen, written.ResourceVersion, stored.ResourceVersion)
	}
	if diff := cmp.Diff(written, obj); diff != "" {
		t.Errorf("stale Get changed the caller's object (-want +got):\n%s", diff)
	}
}

func TestReaderFreshReplacesObject(t *testing.T) {
	c, stored := cachedConfigMap(t, nil)
	tr := expectations.New(expectations.Options{Name: "reader-fresh"})
	if err := tr.ExpectWrite(stored); err != nil {
		t.Fatal(err)
	}
	r := expectations.NewReader(c, tr)
	obj := configMap("leftover", "u9", "1")
	obj.Labels = map[string]string{"from": "caller"}
	if err := r.Get(t.Context(), client.ObjectKeyFromObject(stored), obj); err != nil {
		t.Fatalf("Get = %v", err)
	}
	if diff := cmp.Diff(stored, obj); diff != "" {
		t.Errorf("Get did not replace the object with the cached one (-want +got):\n%s", diff)
	}
	if got := tr.Pending(); got != 0 {
		t.Errorf("Pending() = %d, want 0", got)
	}
}

func TestReaderNotFoundSettlesDeletion(t *testing.T) {
	c, stored := cachedConfigMap(t, nil)
	tr := expectations.New(expectations.Options{Name: "reader-notfound"})
	gone := configMap("gone", "u7", "3")
	if err := tr.ExpectDeletion(gone); err != nil {
		t.Fatal(err)
	}
	r := expectations.NewReader(c, tr)
	err := r.Get(t.Context(), client.ObjectKeyFromObject(gone), &corev1.ConfigMap{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("Get = %v, want NotFound", err)
	}
	if got := tr.Pending(); got != 0 {
		t.Errorf("Pending() = %d, want 0", got)
	}
	if err := r.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "a"}, nil); !errors.Is(err, expectations.ErrNilObject) {
		t.Errorf("Get into nil = %v, want ErrNilObject", err)
	}
	if err := r.Get(t.Context(), client.ObjectKeyFromObject(stored), &corev1.ConfigMap{}); err != nil {
		t.Errorf("Get of a present object with nothing expected = %v", err)
	}
}

func TestReaderPassesOtherErrors(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "a", errors.New("rbac"))
	c, stored := cachedConfigMap(t, &interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return forbidden
		},
	})
	tr := expectations.New(expectations.Options{Name: "reader-errors"})
	if err := tr.ExpectWrite(stored); err != nil {
		t.Fatal(err)
	}
	err := expectations.NewReader(c, tr).Get(t.Context(), client.ObjectKeyFromObject(stored), &corev1.ConfigMap{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("Get = %v, want the cache's Forbidden", err)
	}
	if got := tr.Pending(); got != 1 {
		t.Errorf("an error settled the expectation: Pending() = %d", got)
	}
}

func TestReaderUnstructured(t *testing.T) {
	c, stored := cachedConfigMap(t, nil)
	tr := expectations.New(expectations.Options{Name: "reader-unstructured"})
	if err := tr.ExpectWrite(stored); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
	if err := expectations.NewReader(c, tr).Get(t.Context(), client.ObjectKeyFromObject(stored), u); err != nil {
		t.Fatalf("Get = %v", err)
	}
	if u.GetUID() != stored.UID || u.GetResourceVersion() != stored.ResourceVersion {
		t.Errorf("got %s@%s, want %s@%s", u.GetUID(), u.GetResourceVersion(), stored.UID, stored.ResourceVersion)
	}
}

// TestReaderListPassesThrough documents that List is not checked.
func TestReaderListPassesThrough(t *testing.T) {
	c, stored := cachedConfigMap(t, nil)
	tr := expectations.New(expectations.Options{Name: "reader-list"})
	newer := stored.DeepCopy()
	newer.ResourceVersion = bump(t, stored.ResourceVersion)
	if err := tr.ExpectWrite(newer); err != nil {
		t.Fatal(err)
	}
	var list corev1.ConfigMapList
	if err := expectations.NewReader(c, tr).List(t.Context(), &list); err != nil {
		t.Fatalf("List = %v", err)
	}
	if len(list.Items) != 1 || list.Items[0].ResourceVersion != stored.ResourceVersion {
		t.Errorf("List = %+v, want the cached item as is", list.Items)
	}
	if got := tr.Pending(); got != 1 {
		t.Errorf("List touched the expectation: Pending() = %d", got)
	}
}

// bump returns a resourceVersion one higher than rv.
func bump(t *testing.T, rv string) string {
	t.Helper()
	b := []byte(rv)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < '9' {
			b[i]++
			return string(b)
		}
		b[i] = '0'
	}
	return "1" + string(b)
}

// TestReaderKeysIncludeKind: a ConfigMap read through the Reader, found or
// not, leaves a Pod of the same name alone, and is not judged by it.
func TestReaderKeysIncludeKind(t *testing.T) {
	tests := []struct {
		name      string
		configMap *corev1.ConfigMap // in the cache, if not nil
	}{
		{name: "ConfigMap NotFound"},
		{name: "ConfigMap found at a higher rv", configMap: configMap("a", "c1", "12")},
		{name: "ConfigMap found at a lower rv", configMap: configMap("a", "c1", "4")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithObjects(pod("a", "p1", "9"))
			if tc.configMap != nil {
				b = b.WithObjects(tc.configMap)
			}
			tr := expectations.New(expectations.Options{Name: "reader-kinds-" + tc.name})
			if err := tr.ExpectWrite(pod("a", "p1", "10")); err != nil {
				t.Fatal(err)
			}
			r := expectations.NewReader(b.Build(), tr)
			key := client.ObjectKey{Namespace: "default", Name: "a"}

			err := r.Get(t.Context(), key, &corev1.ConfigMap{})
			if tc.configMap == nil && !apierrors.IsNotFound(err) {
				t.Fatalf("Get ConfigMap = %v, want NotFound", err)
			}
			if tc.configMap != nil && err != nil {
				t.Fatalf("Get ConfigMap at rv %s = %v, want nil: a Pod's write does not make it stale", tc.configMap.ResourceVersion, err)
			}
			var stale *expectations.StaleError
			if err := r.Get(t.Context(), key, &corev1.Pod{}); !errors.As(err, &stale) || stale.Want != "10" || stale.Seen != "9" {
				t.Errorf("Get Pod at rv9 after the ConfigMap read = %v, want stale against 10", err)
			}
		})
	}
}
