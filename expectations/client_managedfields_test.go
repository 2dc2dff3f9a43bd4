package expectations_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/racesafe/racesafe/expectations"
)

// TestClientServesOwnWritesInTheCacheFormOfManagedFields: the server
// answers every write with the object's managedFields. A cache that strips
// them (cache.TransformStripManagedFields, as many operators configure)
// hands none out, so a Get or List served from the client's own write must
// not either; a cache that keeps them gets them from the write too.
func TestClientServesOwnWritesInTheCacheFormOfManagedFields(t *testing.T) {
	for _, strips := range []bool{true, false} {
		name := map[bool]string{true: "cache strips managedFields", false: "cache keeps managedFields"}[strips]
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			managed := []metav1.ManagedFieldsEntry{{Manager: "server", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
				FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{}}`)}}}
			cm := configMap("item", "u1", "")
			cm.Data = map[string]string{"phase": "Failed"}
			server := fake.NewClientBuilder().WithObjects(cm).Build()
			key := client.ObjectKeyFromObject(cm)
			seen := &corev1.ConfigMap{}
			if err := server.Get(ctx, key, seen); err != nil {
				t.Fatal(err)
			}
			if !strips {
				seen.ManagedFields = managed
			}
			cb := fake.NewClientBuilder().WithObjects(seen)
			if !strips {
				cb = cb.WithReturnManagedFields() // the fake hands none out otherwise
			}
			cache := cb.Build()
			funcs := cacheReads(&cache)
			funcs.Update = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				if err := c.Update(ctx, obj, opts...); err != nil {
					return err
				}
				obj.SetManagedFields(managed) // as the API server answers
				return nil
			}
			wrapped := interceptor.NewClient(server, funcs)
			c, err := clientOver(wrapped, expectations.ClientOptions{Name: "client-managedfields-" + name})
			if err != nil {
				t.Fatal(err)
			}
			check := func(when string, got client.Object) {
				t.Helper()
				if has := len(got.GetManagedFields()) > 0; has == strips {
					t.Errorf("%s: managedFields %v, want them only if the cache keeps them (%s)", when, got.GetManagedFields(), name)
				}
			}
			for i, phase := range []string{"Deleting", "Deleted"} {
				item := &corev1.ConfigMap{}
				if err := c.Get(ctx, key, item); err != nil {
					t.Fatal(err)
				}
				item.Data["phase"] = phase
				if err := c.Update(ctx, item); err != nil {
					t.Fatal(err)
				}
				got := &corev1.ConfigMap{}
				if err := c.Get(ctx, key, got); err != nil || got.Data["phase"] != phase {
					t.Fatalf("write %d: Get = %v, phase %q; want the own write, %s", i, err, got.Data["phase"], phase)
				}
				check("typed Get after write "+phase, got)
				u := &unstructured.Unstructured{}
				u.SetAPIVersion("v1")
				u.SetKind("ConfigMap")
				if err := c.Get(ctx, key, u); err != nil {
					t.Fatal(err)
				}
				check("unstructured Get after write "+phase, u)
				var list corev1.ConfigMapList
				if err := c.List(ctx, &list); err != nil || len(list.Items) != 1 || list.Items[0].Data["phase"] != phase {
					t.Fatalf("List after write %s = %v, %d items; want the own write", phase, err, len(list.Items))
				}
				check("List after write "+phase, &list.Items[0])
			}
		})
	}
}
