package objcopy

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestDeepCopyTurnsPanicIntoError(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a"},
		"data":     map[string]any{"n": 1}, // a Go int: DeepCopyJSONValue panics
	}}
	_, err := DeepCopy(u)
	if err == nil || !strings.Contains(err.Error(), "deep copy") {
		t.Fatalf("DeepCopy = %v, want a deep copy error", err)
	}
}

func TestDeepCopyRefusesNil(t *testing.T) {
	var p *corev1.Pod
	if _, err := DeepCopy(p); err == nil {
		t.Fatal("DeepCopy(nil pod) returned no error")
	}
	if _, err := EmptyLike(p); err == nil {
		t.Fatal("EmptyLike(nil pod) returned no error")
	}
}

func TestDeepCopyIsIndependent(t *testing.T) {
	in := &corev1.Pod{}
	in.Name = "a"
	in.Labels = map[string]string{"k": "v"}
	out, err := DeepCopy(in)
	if err != nil {
		t.Fatal(err)
	}
	out.Labels["k"] = "changed"
	if in.Labels["k"] != "v" {
		t.Fatal("the copy shares a map with the original")
	}
}

func TestEmptyLikeKeepsAddressOnly(t *testing.T) {
	in := &unstructured.Unstructured{}
	in.SetAPIVersion("v1")
	in.SetKind("ConfigMap")
	in.SetNamespace("ns")
	in.SetName("a")
	in.SetResourceVersion("7")
	out, err := EmptyLike(in)
	if err != nil {
		t.Fatal(err)
	}
	if out.GetName() != "a" || out.GetNamespace() != "ns" || out.GetKind() != "ConfigMap" || out.GetResourceVersion() != "" {
		t.Fatalf("EmptyLike = %v", out.Object)
	}
}
