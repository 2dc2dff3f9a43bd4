package racetest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
)

// itemGVK is a custom resource with a status subresource, the shape of the
// incident's WorkItem, served as JSON (built-in kinds are served to
// controller-runtime as protobuf).
var itemGVK = schema.GroupVersionKind{Group: "racetest.racesafe.io", Version: "v1", Kind: "Item"}

type item = *unstructured.Unstructured

func newItem(name string) item {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(itemGVK)
	u.SetNamespace(metav1.NamespaceDefault)
	u.SetName(name)
	return u
}

func itemName(t *testing.T) string {
	return strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
}

// waitForItems waits until the Item kind is served: envtest installs the CRD
// before it is.
func waitForItems(t *testing.T, cfg *rest.Config) {
	t.Helper()
	c := directClient(t, cfg)
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(itemGVK.GroupVersion().WithKind("ItemList"))
		return c.List(ctx, list) == nil, nil
	})
	if err != nil {
		t.Fatalf("Item kind not served: %v", err)
	}
}

func stringAt(u item, fields ...string) string {
	s, _, _ := unstructured.NestedString(u.Object, fields...)
	return s
}

func int64At(u item, fields ...string) int64 {
	n, _, _ := unstructured.NestedInt64(u.Object, fields...)
	return n
}
