package expectations_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/racesafe/racesafe/expectations"
)

// laggingCache is a fake API server whose Gets answer from a snapshot taken
// when hold was called, as an informer that has not seen the later writes.
type laggingCache struct {
	mu       sync.Mutex
	snapshot map[client.ObjectKey]*corev1.ConfigMap
}

func (l *laggingCache) hold(t *testing.T, c client.Client, key client.ObjectKey) {
	t.Helper()
	var cm corev1.ConfigMap
	if err := c.Get(t.Context(), key, &cm); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.snapshot == nil {
		l.snapshot = map[client.ObjectKey]*corev1.ConfigMap{}
	}
	l.snapshot[key] = &cm
}

func (l *laggingCache) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.snapshot = nil
}

func (l *laggingCache) funcs() interceptor.Funcs {
	return interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		l.mu.Lock()
		old, ok := l.snapshot[key]
		l.mu.Unlock()
		if cm, isCM := obj.(*corev1.ConfigMap); ok && isCM {
			old.DeepCopyInto(cm)
			return nil
		}
		return c.Get(ctx, key, obj, opts...)
	}}
}

func newLaggingClient(t *testing.T, name string) (*expectations.Client, *laggingCache, client.ObjectKey) {
	t.Helper()
	base := fake.NewClientBuilder().WithObjects(configMap("a", "u1", "")).WithStatusSubresource(&corev1.ConfigMap{}).Build()
	lag := &laggingCache{}
	key := client.ObjectKey{Namespace: "default", Name: "a"}
	lag.hold(t, base, key)
	c, err := expectations.NewClient(interceptor.NewClient(base, lag.funcs()),
		expectations.ClientOptions{Tracker: expectations.New(expectations.Options{Name: name}), APIReader: base})
	if err != nil {
		t.Fatal(err)
	}
	return c, lag, key
}

// TestClientGetNeverGoesBackInTime: after a write through the Client, a Get
// from a cache that has not seen it serves the server's answer to the write,
// not the cache's older copy; once the cache catches up, Get reads it.
func TestClientGetNeverGoesBackInTime(t *testing.T) {
	writes := map[string]func(ctx context.Context, c client.Client, cm *corev1.ConfigMap) error{
		"Update": func(ctx context.Context, c client.Client, cm *corev1.ConfigMap) error {
			cm.Data = map[string]string{"phase": "Deleting"}
			return c.Update(ctx, cm)
		},
		"Patch": func(ctx context.Context, c client.Client, cm *corev1.ConfigMap) error {
			before := cm.DeepCopy()
			cm.Data = map[string]string{"phase": "Deleting"}
			return c.Patch(ctx, cm, client.MergeFrom(before))
		},
		"Status().Patch": func(ctx context.Context, c client.Client, cm *corev1.ConfigMap) error {
			before := cm.DeepCopy()
			cm.Labels = map[string]string{"phase": "Deleting"}
			return c.Status().Patch(ctx, cm, client.MergeFrom(before))
		},
		"SubResource(status).Update": func(ctx context.Context, c client.Client, cm *corev1.ConfigMap) error {
			cm.Labels = map[string]string{"phase": "Deleting"}
			return c.SubResource("status").Update(ctx, cm)
		},
	}
	for name, write := range writes {
		t.Run(name, func(t *testing.T) {
			c, lag, key := newLaggingClient(t, "client-"+t.Name())
			item := &corev1.ConfigMap{}
			if err := c.Get(t.Context(), key, item); err != nil {
				t.Fatalf("Get before any write = %v", err)
			}
			if err := write(t.Context(), c, item); err != nil {
				t.Fatalf("write: %v", err)
			}
			answered := item.DeepCopy()

			got := &corev1.ConfigMap{}
			if err := c.Get(t.Context(), key, got); err != nil {
				t.Fatalf("Get from the lagging cache = %v, want this client's write", err)
			}
			if diff := cmp.Diff(answered, got); diff != "" {
				t.Errorf("Get from the lagging cache is not the write's answer (-want +got):\n%s", diff)
			}
			got.Labels = map[string]string{"mutated": "by the caller"}
			if err := c.Get(t.Context(), key, item); err != nil || item.Labels["mutated"] != "" {
				t.Fatalf("a second Get = %v, %v: the caller's copy is not its own", err, item.Labels)
			}

			lag.release()
			if err := c.Get(t.Context(), key, item); err != nil {
				t.Fatalf("Get after the cache caught up = %v", err)
			}
			if item.ResourceVersion != answered.ResourceVersion {
				t.Errorf("Get after catch-up read resourceVersion %s, want %s", item.ResourceVersion, answered.ResourceVersion)
			}
		})
	}
}

// TestClientDryRunIsNotRecorded: a dry-run write changes nothing on the
// server, so it must not make the cache's (current) copy look stale.
func TestClientDryRunIsNotRecorded(t *testing.T) {
	c, _, key := newLaggingClient(t, "client-dry-run")
	item := &corev1.ConfigMap{}
	if err := c.Get(t.Context(), key, item); err != nil {
		t.Fatal(err)
	}
	item.Data = map[string]string{"phase": "Deleting"}
	if err := c.Update(t.Context(), item.DeepCopy(), client.DryRunAll); err != nil {
		t.Fatalf("dry-run Update: %v", err)
	}
	before := item.DeepCopy()
	if err := c.Patch(t.Context(), item, client.MergeFrom(before), client.DryRunAll); err != nil {
		t.Fatalf("dry-run Patch: %v", err)
	}
	if err := c.Get(t.Context(), key, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("Get after dry-run writes = %v, want the cached object", err)
	}
}

// TestClientFailedWriteIsNotRecorded: a write the server refused leaves no
// expectation behind.
func TestClientFailedWriteIsNotRecorded(t *testing.T) {
	c, _, key := newLaggingClient(t, "client-failed")
	item := &corev1.ConfigMap{}
	if err := c.Get(t.Context(), key, item); err != nil {
		t.Fatal(err)
	}
	stale := item.DeepCopy()
	stale.ResourceVersion = "1" // older than the stored object: a conflict
	stale.Data = map[string]string{"phase": "Deleting"}
	if err := c.Update(t.Context(), stale); err == nil {
		t.Fatal("Update with an old resourceVersion succeeded on the fake")
	}
	if err := c.Get(t.Context(), key, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("Get after a refused write = %v, want the cached object", err)
	}
}

// TestNewClientRefusesBadOptions: no client is a typed error.
func TestNewClientRefusesBadOptions(t *testing.T) {
	var typedNil *fakeWithWatch
	for name, c := range map[string]client.Client{"nil client": nil, "typed nil client": typedNil} {
		t.Run(name, func(t *testing.T) {
			got, err := expectations.NewClient(c, expectations.ClientOptions{})
			if !errors.Is(err, expectations.ErrClientOptions) || got != nil {
				t.Fatalf("NewClient = %v, %v; want nil, ErrClientOptions", got, err)
			}
		})
	}
}

type fakeWithWatch struct{ client.WithWatch }

// TestNewClientRequiresAnAPIReader: a Client reads the server where a
// write's answer does not say what it has; without a reader it would fail
// at run time, so it is refused at construction, typed nil included.
func TestNewClientRequiresAnAPIReader(t *testing.T) {
	base := fake.NewClientBuilder().Build()
	var typedNil *fakeWithWatch
	for name, r := range map[string]client.Reader{"none": nil, "typed nil": typedNil} {
		t.Run(name, func(t *testing.T) {
			got, err := expectations.NewClient(base, expectations.ClientOptions{APIReader: r})
			if !errors.Is(err, expectations.ErrClientOptions) || got != nil {
				t.Fatalf("NewClient = %v, %v; want nil, ErrClientOptions", got, err)
			}
		})
	}
	if _, err := expectations.NewClient(base, expectations.ClientOptions{APIReader: base}); err != nil {
		t.Fatalf("NewClient with an APIReader = %v", err)
	}
}

// TestClientWriteNotRecordedIsAnError: a write the server took but the
// tracker cannot record (a kind its scheme does not know) says so with a
// typed error; without a Tracker, the Client's own tracker knows every kind
// of the wrapped client's scheme.
func TestClientWriteNotRecordedIsAnError(t *testing.T) {
	base := fake.NewClientBuilder().Build()
	blind := expectations.New(expectations.Options{Name: "client-blind", Scheme: runtime.NewScheme()})
	c, err := clientOver(base, expectations.ClientOptions{Tracker: blind})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Create(t.Context(), configMap("new", "", ""))
	var nr *expectations.NotRecordedError
	if !errors.As(err, &nr) || !errors.Is(err, expectations.ErrNotRecorded) || !errors.Is(err, expectations.ErrUnknownKind) {
		t.Fatalf("Create of a kind the tracker cannot tell = %v, want a *NotRecordedError wrapping ErrUnknownKind", err)
	}
	if nr.Verb != "create" || nr.Key.Name != "new" {
		t.Errorf("NotRecordedError = %+v, want verb create of default/new", nr)
	}
	if err := base.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "new"}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("the write itself did not happen: %v", err)
	}

	own, err := clientOver(base, expectations.ClientOptions{Name: "client-own-tracker"})
	if err != nil {
		t.Fatal(err)
	}
	if err := own.Create(t.Context(), configMap("other", "", "")); err != nil {
		t.Errorf("Create through a Client with its own tracker = %v", err)
	}
}

// TestClientCheckOwnerNeedsOwners: without an OwnerTracker there is no owner
// kind to guard, which is an error, not a pass.
func TestClientCheckOwnerNeedsOwners(t *testing.T) {
	c, _, key := newLaggingClient(t, "client-no-owners")
	if err := c.CheckOwner(t.Context(), key); !errors.Is(err, expectations.ErrClientOptions) {
		t.Fatalf("CheckOwner without Owners = %v, want ErrClientOptions", err)
	}
}
