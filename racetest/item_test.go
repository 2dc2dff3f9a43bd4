package racetest_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

func stringAt(u item, fields ...string) string {
	s, _, _ := unstructured.NestedString(u.Object, fields...)
	return s
}

func int64At(u item, fields ...string) int64 {
	n, _, _ := unstructured.NestedInt64(u.Object, fields...)
	return n
}
