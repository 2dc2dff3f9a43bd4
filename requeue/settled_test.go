package requeue

import (
	"context"
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/racesafe/racesafe/expectations"
)

// TestSettledWhen: the object is read and judged; gone is settled, a stale
// read is unsettled, another read error is returned, never "settled".
func TestSettledWhen(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "running"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	errBroken := errors.New("cache broken")
	c := interceptor.NewClient(fake.NewClientBuilder().WithObjects(pod).Build(), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			switch key.Name {
			case "stale":
				return fmt.Errorf("get: %w", &expectations.StaleError{Key: key, Want: "9", Seen: "8"})
			case "broken":
				return errBroken
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	done := func(p *corev1.Pod) (bool, string) {
		return p.Status.Phase == corev1.PodSucceeded, string(p.Status.Phase)
	}
	settled := SettledWhen(c, done)
	for _, tt := range []struct {
		name       string
		wantOK     bool
		wantReason string
		wantErr    error
	}{
		{name: "running", wantOK: false, wantReason: "Running"},
		{name: "gone", wantOK: true},
		{name: "stale", wantOK: false, wantReason: ReasonStale},
		{name: "broken", wantErr: errBroken},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ok, reason, err := settled(t.Context(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: tt.name}})
			if ok != tt.wantOK || reason != tt.wantReason || !errors.Is(err, tt.wantErr) {
				t.Fatalf("Settled = %v, %q, %v; want %v, %q, %v", ok, reason, err, tt.wantOK, tt.wantReason, tt.wantErr)
			}
		})
	}
}

// TestSettledWhenNeedsAStructPointer: a T that cannot be made is an error
// from every call.
func TestSettledWhenNeedsAStructPointer(t *testing.T) {
	settled := SettledWhen(fake.NewClientBuilder().Build(), func(client.Object) (bool, string) { return true, "" })
	ok, _, err := settled(t.Context(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "a"}})
	if err == nil || ok {
		t.Fatalf("Settled with T = client.Object = %v, %v; want an error", ok, err)
	}
}
