package objcopy

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

func TestEmptyListKeepsTheProtosForm(t *testing.T) {
	gvk := corev1.SchemeGroupVersion.WithKind("Secret")
	listGVK := corev1.SchemeGroupVersion.WithKind("SecretList")
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		proto client.Object
		check func(client.ObjectList) bool
	}{
		"typed":        {&corev1.Secret{}, func(l client.ObjectList) bool { _, ok := l.(*corev1.SecretList); return ok }},
		"unstructured": {&unstructured.Unstructured{}, func(l client.ObjectList) bool { _, ok := l.(*unstructured.UnstructuredList); return ok }},
		"metadata":     {&metav1.PartialObjectMetadata{}, func(l client.ObjectList) bool { _, ok := l.(*metav1.PartialObjectMetadataList); return ok }},
	} {
		l, err := EmptyList(tc.proto, gvk, scheme)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !tc.check(l) {
			t.Errorf("%s: EmptyList = %T, not the proto's form", name, l)
		}
		if name != "typed" && l.GetObjectKind().GroupVersionKind() != listGVK {
			t.Errorf("%s: list kind %v, want %v: an untyped List without it cannot be sent", name, l.GetObjectKind().GroupVersionKind(), listGVK)
		}
	}
	if _, err := EmptyList(&corev1.Secret{}, corev1.SchemeGroupVersion.WithKind("Nothing"), scheme); err == nil {
		t.Error("EmptyList of a kind the scheme does not know returned no error")
	}
}
