package phase_test

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/racesafe/racesafe/phase"
)

type uWriter struct{}

func (uWriter) Patch(context.Context, *unstructured.Unstructured, func(*unstructured.Unstructured) error) (*unstructured.Unstructured, error) {
	return nil, errors.New("not called")
}

func (uWriter) PatchObject(context.Context, *unstructured.Unstructured, func(*unstructured.Unstructured) error) (*unstructured.Unstructured, error) {
	return nil, errors.New("not called")
}

// TestUncopyableObject: an object the machine cannot copy is an
// ErrObjectCopy, not a panic.
func TestUncopyableObject(t *testing.T) {
	get := func(u *unstructured.Unstructured) string {
		p, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		return p
	}
	m, err := phase.New(phase.Options[*unstructured.Unstructured, string]{
		Name: "uncopyable",
		Get:  get,
		Set: func(u *unstructured.Unstructured, p string) {
			_ = unstructured.SetNestedField(u.Object, p, "status", "phase")
		},
		Writer: uWriter{},
		Handlers: map[string]phase.Handler[*unstructured.Unstructured, string]{
			"Running": func(context.Context, *phase.Step[*unstructured.Unstructured, string]) (phase.Decision, error) {
				t.Error("the handler ran on an object the machine could not copy")
				return phase.Done(), nil
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "item", "namespace": "default"},
		"status":   map[string]any{"phase": "Running", "replicas": 3}, // a Go int: DeepCopyJSON panics
	}}
	if _, err := m.Reconcile(t.Context(), u); !errors.Is(err, phase.ErrObjectCopy) {
		t.Errorf("Reconcile = %v, want ErrObjectCopy", err)
	}
}
