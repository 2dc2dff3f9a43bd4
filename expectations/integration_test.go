package expectations_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/racesafe/racesafe/expectations"
	"github.com/racesafe/racesafe/internal/testenv"
)

// TestIntegrationStaleUntilWatchDelivers runs the incident's window on a real
// API server. The cache's watch stream is held, so after a write the cache is
// behind for certain, not by luck: the Reader must refuse the old snapshot,
// and accept the object once the held events are let through.
func TestIntegrationStaleUntilWatchDelivers(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := t.Context()
	direct := testenv.Client(t, env.Config, client.Options{})

	gate := &watchGate{}
	cacheConfig := rest.CopyConfig(env.Config)
	cacheConfig.Wrap(gate.wrap)
	informers, err := cache.New(cacheConfig, cache.Options{
		DefaultNamespaces: map[string]cache.Config{metav1.NamespaceDefault: {}},
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Run(ctx, t, informers)
	t.Cleanup(gate.release) // before the cache stops: a held watch would keep it from returning

	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "stale-read"},
		Data:       map[string]string{"phase": "Failed"},
	}
	if err := direct.Create(ctx, cm); err != nil {
		t.Fatalf("create: %v", err)
	}
	key := client.ObjectKeyFromObject(cm)
	testenv.SyncInformers(ctx, t, informers, &corev1.ConfigMap{})
	waitFor(t, "the cache to hold the created object", func(ctx context.Context) (bool, error) {
		var got corev1.ConfigMap
		err := informers.Get(ctx, key, &got)
		return err == nil && got.ResourceVersion == cm.ResourceVersion, client.IgnoreNotFound(err)
	})

	name := "integration"
	tr := expectations.New(expectations.Options{Name: name})
	metrics := readDeltas(t, name)
	reader := expectations.NewReader(informers, tr)

	// The write: the server answers with a new resourceVersion, the watch
	// event carrying it is held.
	gate.hold()
	written := cm.DeepCopy()
	written.Data["phase"] = "Deleting"
	if err := direct.Update(ctx, written); err != nil {
		t.Fatalf("update: %v", err)
	}
	if err := tr.ExpectWrite(written); err != nil {
		t.Fatal(err)
	}

	got := written.DeepCopy()
	err = reader.Get(ctx, key, got)
	var stale *expectations.StaleError
	if !errors.As(err, &stale) {
		t.Fatalf("Get while the watch is held = %v, want *StaleError", err)
	}
	want := expectations.StaleError{Kind: schema.GroupKind{Kind: "ConfigMap"}, Key: key, Want: written.ResourceVersion, Seen: cm.ResourceVersion}
	if diff := cmp.Diff(want, *stale); diff != "" {
		t.Errorf("StaleError (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(written, got); diff != "" {
		t.Errorf("stale Get changed the caller's object (-want +got):\n%s", diff)
	}

	gate.release()
	waitFor(t, "the cache to catch up with the write", func(ctx context.Context) (bool, error) {
		err := reader.Get(ctx, key, got)
		if errors.Is(err, expectations.ErrStale) {
			return false, nil
		}
		return err == nil, err
	})
	if got.ResourceVersion != written.ResourceVersion || got.Data["phase"] != "Deleting" {
		t.Errorf("after catching up: rv %s phase %q, want rv %s phase Deleting", got.ResourceVersion, got.Data["phase"], written.ResourceVersion)
	}
	if n := tr.Pending(); n != 0 {
		t.Errorf("Pending() = %d, want 0", n)
	}

	// The deletion: the cache keeps showing the deleted incarnation while
	// the watch is held.
	gate.hold()
	if err := direct.Delete(ctx, got); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if err := tr.ExpectDeletion(got); err != nil {
		t.Fatal(err)
	}
	err = reader.Get(ctx, key, &corev1.ConfigMap{})
	if !errors.As(err, &stale) || !stale.Deletion || stale.Seen != written.ResourceVersion {
		t.Fatalf("Get of the deleted object while the watch is held = %v, want a deletion *StaleError seen at %s", err, written.ResourceVersion)
	}
	gate.release()
	waitFor(t, "the cache to see the deletion", func(ctx context.Context) (bool, error) {
		err := reader.Get(ctx, key, &corev1.ConfigMap{})
		if errors.Is(err, expectations.ErrStale) {
			return false, nil
		}
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if n := tr.Pending(); n != 0 {
		t.Errorf("Pending() after the deletion = %d, want 0", n)
	}

	if got := metrics.delta("racesafe_expectations_stale_reads_total"); got < 2 {
		t.Errorf("stale_reads_total = %v, want at least 2", got)
	}
	if count, _ := metrics.histogram("racesafe_expectations_catch_up_seconds"); count != 2 {
		t.Errorf("catch_up_seconds has %d samples, want 2 (the write and the deletion)", count)
	}
}

func waitFor(t *testing.T, what string, cond wait.ConditionWithContextFunc) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// watchGate holds the bytes of watch responses while it is held. It holds
// after the underlying read returns, so an event that arrives while the gate
// is held cannot slip through a read that began before.
type watchGate struct {
	mu   sync.Mutex
	held chan struct{} // nil while open
	// only, when set, picks the watches the gate holds; others pass.
	only func(*http.Request) bool
}

// holdOnly makes the gate hold only the watches match picks.
func (g *watchGate) holdOnly(match func(*http.Request) bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.only = match
}

func (g *watchGate) picks(req *http.Request) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.only == nil || g.only(req)
}

func (g *watchGate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held == nil {
		g.held = make(chan struct{})
	}
}

func (g *watchGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held != nil {
		close(g.held)
		g.held = nil
	}
}

// pass waits while the gate is held; false if closed first.
func (g *watchGate) pass(closed <-chan struct{}) bool {
	g.mu.Lock()
	held := g.held
	g.mu.Unlock()
	if held == nil {
		return true
	}
	select {
	case <-held:
		return true
	case <-closed:
		return false
	}
}

func (g *watchGate) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return resp, err
		}
		if w := req.URL.Query().Get("watch"); (w == "true" || w == "1") && g.picks(req) {
			resp.Body = &gatedBody{ReadCloser: resp.Body, gate: g, closed: make(chan struct{})}
		}
		return resp, nil
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

type gatedBody struct {
	io.ReadCloser
	gate      *watchGate
	closed    chan struct{}
	closeOnce sync.Once
}

func (b *gatedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if !b.gate.pass(b.closed) {
		return 0, io.ErrClosedPipe
	}
	return n, err
}

// Close unblocks a held Read: the watcher closes the body from another
// goroutine when the cache stops.
func (b *gatedBody) Close() error {
	b.closeOnce.Do(func() { close(b.closed) })
	return b.ReadCloser.Close()
}

// TestIntegrationKindsOfOneName: a Pod and a ConfigMap of one name, read
// through the manager's cache while the watches are held. The Pod's write
// neither makes the ConfigMap stale nor is settled by it, nor by a Secret of
// that name that does not exist; the Pod stays stale in both of its forms
// (typed and metadata-only informers) until the watches deliver.
func TestIntegrationKindsOfOneName(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := t.Context()
	direct := testenv.Client(t, env.Config, client.Options{})

	gate := &watchGate{}
	mgrConfig := rest.CopyConfig(env.Config)
	mgrConfig.Wrap(gate.wrap)
	opts := testenv.ManagerOptions()
	opts.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{metav1.NamespaceDefault: {}}}
	mgr, err := manager.New(mgrConfig, opts)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Run(ctx, t, mgr)
	t.Cleanup(gate.release) // before the manager stops: a held watch would keep it from returning

	const name = "same-name"
	key := client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: name}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: name}}
	if err := direct.Create(ctx, cm); err != nil {
		t.Fatalf("create ConfigMap: %v", err)
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.com/c"}}},
	}
	if err := direct.Create(ctx, p); err != nil {
		t.Fatalf("create Pod: %v", err)
	}
	podMeta := func() *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}}
	}
	c := mgr.GetClient()
	waitFor(t, "the cache to hold both objects in every form", func(ctx context.Context) (bool, error) {
		var gotCM corev1.ConfigMap
		var gotPod corev1.Pod
		gotMeta := podMeta()
		for _, get := range []struct {
			obj client.Object
			rv  string
		}{{&gotCM, cm.ResourceVersion}, {&gotPod, p.ResourceVersion}, {gotMeta, p.ResourceVersion}} {
			err := c.Get(ctx, key, get.obj)
			if err != nil || get.obj.GetResourceVersion() != get.rv {
				return false, client.IgnoreNotFound(err)
			}
		}
		var secret corev1.Secret
		err := c.Get(ctx, key, &secret) // starts the Secret informer
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})

	tr := expectations.New(expectations.Options{Name: "integration-kinds"})
	reader := expectations.NewReader(c, tr)

	gate.hold()
	written := p.DeepCopy()
	written.Labels = map[string]string{"phase": "Deleting"}
	if err := direct.Update(ctx, written); err != nil {
		t.Fatalf("update Pod: %v", err)
	}
	if err := tr.ExpectWrite(written); err != nil {
		t.Fatal(err)
	}

	var gotCM corev1.ConfigMap
	if err := reader.Get(ctx, key, &gotCM); err != nil {
		t.Errorf("Get ConfigMap at rv %s after the Pod's write at %s = %v, want nil", cm.ResourceVersion, written.ResourceVersion, err)
	}
	if err := reader.Get(ctx, key, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get Secret = %v, want NotFound", err)
	}
	var stale *expectations.StaleError
	if err := reader.Get(ctx, key, &corev1.Pod{}); !errors.As(err, &stale) || stale.Kind.Kind != "Pod" || stale.Seen != p.ResourceVersion {
		t.Errorf("Get Pod while the watch is held = %v, want a Pod *StaleError seen at %s", err, p.ResourceVersion)
	}
	if err := reader.Get(ctx, key, podMeta()); !errors.Is(err, expectations.ErrStale) {
		t.Errorf("Get Pod metadata while the watch is held = %v, want stale", err)
	}

	gate.release()
	for _, obj := range []client.Object{&corev1.Pod{}, podMeta()} {
		waitFor(t, fmt.Sprintf("the %T cache to catch up with the write", obj), func(ctx context.Context) (bool, error) {
			err := reader.Get(ctx, key, obj)
			if errors.Is(err, expectations.ErrStale) {
				return false, nil
			}
			return err == nil, err
		})
		if obj.GetResourceVersion() != written.ResourceVersion {
			t.Errorf("%T after catching up at rv %s, want %s", obj, obj.GetResourceVersion(), written.ResourceVersion)
		}
	}
}
