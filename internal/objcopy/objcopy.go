// Package objcopy copies and re-creates Kubernetes objects without panicking.
//
// DeepCopyObject panics on content it cannot copy (an unstructured object
// holding a Go int, say). Library code that copies a caller's object turns
// that panic into an error the caller can handle.
package objcopy

import (
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// IsNil reports whether obj is nil or a typed nil pointer, on which any
// method call could panic.
func IsNil(obj any) bool {
	if obj == nil {
		return true
	}
	v := reflect.ValueOf(obj)
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface, reflect.Func, reflect.Chan:
		return v.IsNil()
	}
	return false
}

// DeepCopy returns a deep copy of obj, or an error when obj is nil, when its
// DeepCopyObject panics, or when it returns something other than a T.
func DeepCopy[T client.Object](obj T) (out T, err error) {
	var zero T
	if IsNil(obj) {
		return zero, fmt.Errorf("nil %T", obj)
	}
	defer func() {
		if r := recover(); r != nil {
			out, err = zero, fmt.Errorf("deep copy of %T: %v", obj, r)
		}
	}()
	c, ok := obj.DeepCopyObject().(T)
	if !ok || IsNil(c) {
		return zero, fmt.Errorf("DeepCopyObject of %T did not return a %T", obj, zero)
	}
	return c, nil
}

// EmptyLike returns a new, empty object of obj's type that carries only what
// a request needs to address it: kind (required for unstructured objects),
// name and namespace.
func EmptyLike[T client.Object](obj T) (T, error) {
	var zero T
	if IsNil(obj) {
		return zero, fmt.Errorf("nil %T", obj)
	}
	t := reflect.TypeOf(obj)
	if t.Kind() != reflect.Pointer {
		return zero, fmt.Errorf("%T is not a pointer", obj)
	}
	out, ok := reflect.New(t.Elem()).Interface().(T)
	if !ok {
		return zero, fmt.Errorf("cannot make an empty %T", obj)
	}
	out.GetObjectKind().SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
	out.SetNamespace(obj.GetNamespace())
	out.SetName(obj.GetName())
	return out, nil
}

// EmptyList returns an empty list of kind gvk in proto's form: a
// metadata-only list for a *metav1.PartialObjectMetadata, an unstructured
// one for an *unstructured.Unstructured, else the typed list scheme knows
// as gvk's List kind. Its kind is set, as a List of the first two forms
// needs. An error names a List kind scheme does not know, or one that is
// not a list.
func EmptyList(proto client.Object, gvk schema.GroupVersionKind, scheme *runtime.Scheme) (client.ObjectList, error) {
	listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
	switch proto.(type) {
	case *metav1.PartialObjectMetadata:
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(listGVK)
		return l, nil
	case *unstructured.Unstructured:
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(listGVK)
		return l, nil
	}
	obj, err := scheme.New(listGVK)
	if err != nil {
		return nil, err
	}
	l, ok := obj.(client.ObjectList)
	if !ok {
		return nil, fmt.Errorf("%T is not a list", obj)
	}
	return l, nil
}
