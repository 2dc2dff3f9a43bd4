package expectations_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/racesafe/racesafe/expectations"
	"github.com/racesafe/racesafe/internal/testenv"
)

// TestIntegrationClientSession runs the drop-in Client's session guarantees
// on a real API server, each case in its own namespace, with the cache's
// watches held so that the cache lags the client's writes for certain.
func TestIntegrationClientSession(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	direct := testenv.Client(t, env.Config, client.Options{})
	for name, test := range map[string]func(t *testing.T, s *sessionEnv){
		"GetServesOwnWriteInEveryForm":           testGetServesOwnWriteInEveryForm,
		"ListMergesOwnCreatesUpdatesAndDeletes":  testListMergesOwnWrites,
		"ListRefusesWhatItCannotMerge":           testListRefusesWhatItCannotMerge,
		"AnotherWritersNewerVersionWins":         testAnotherWritersNewerVersionWins,
		"RecreatedObjectWinsOverOldIncarnation":  testRecreatedObjectWins,
		"FinalizerRemovalThatDeletesIsNotServed": testFinalizerRemovalThatDeletes,
		"SubResourceWriteWithBodyIsNotOlder":     testSubResourceWithBody,
		"AmbiguousCreateIsReadBack":              testAmbiguousCreate,
		"FailedReadBackIsRetried":                testFailedReadBackIsRetried,
		"FailoverClientServesCache":              testFailoverClientServesCache,
		"PrimedClientServesPredecessorsWrites":   testPrimedClientServesPredecessorsWrites,
	} {
		t.Run(name, func(t *testing.T) {
			test(t, newSessionEnv(t, env.Config, direct))
		})
	}
}

type sessionEnv struct {
	ns      string
	direct  client.Client
	cached  client.Client
	cache   cache.Cache
	gate    *watchGate
	c       *expectations.Client
	name    string
	cfg     *rest.Config
	nextKey int
}

var sessionNamespaces = map[string]int{}

func newSessionEnv(t *testing.T, cfg *rest.Config, direct client.Client) *sessionEnv {
	t.Helper()
	ns := fmt.Sprintf("session-%d", len(sessionNamespaces))
	sessionNamespaces[ns]++
	testenv.Namespace(t, direct, ns)
	informers, gate := gatedCache(t, cfg, ns, false)
	cached := testenv.Client(t, cfg, client.Options{Cache: &client.CacheOptions{Reader: informers, Unstructured: true}})
	ctx := t.Context()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	testenv.SyncInformers(ctx, t, informers, &corev1.ConfigMap{}, u, meta, &appsv1.Deployment{})
	name := "session-" + ns
	c, err := expectations.NewClient(cached, expectations.ClientOptions{Name: name, APIReader: direct})
	if err != nil {
		t.Fatal(err)
	}
	return &sessionEnv{ns: ns, direct: direct, cached: cached, cache: informers, gate: gate, c: c, name: name, cfg: cfg}
}

// seed creates a ConfigMap directly and waits until every form of the
// cache shows it.
func (s *sessionEnv) seed(t *testing.T, name string, labels map[string]string, finalizers ...string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name, Labels: labels, Finalizers: finalizers},
		Data: map[string]string{"phase": "Failed"}}
	if err := s.direct.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	s.waitCached(t, cm)
	return cm
}

// waitCached waits until the cache's typed, unstructured and metadata
// forms all show obj's key at obj's resourceVersion or later.
func (s *sessionEnv) waitCached(t *testing.T, cm *corev1.ConfigMap) {
	t.Helper()
	key := client.ObjectKeyFromObject(cm)
	waitFor(t, "the cache to show "+key.String()+" at "+cm.ResourceVersion, func(ctx context.Context) (bool, error) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		meta := &metav1.PartialObjectMetadata{}
		meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		for _, obj := range []client.Object{&corev1.ConfigMap{}, u, meta} {
			if err := s.cache.Get(ctx, key, obj); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			if cmp, _ := resourceversion.CompareResourceVersion(obj.GetResourceVersion(), cm.ResourceVersion); cmp < 0 {
				return false, nil
			}
		}
		return true, nil
	})
}

func (s *sessionEnv) key(name string) client.ObjectKey {
	return client.ObjectKey{Namespace: s.ns, Name: name}
}

// testGetServesOwnWriteInEveryForm: after an Update through the Client, a
// typed, an unstructured and a metadata-only Get each serve the update's
// answer while the cache lags, and the cache's copy once it has caught up.
func testGetServesOwnWriteInEveryForm(t *testing.T, s *sessionEnv) {
	ctx := t.Context()
	cm := s.seed(t, "forms", nil)
	before := metricCounter(t, "racesafe_client_reads_total", map[string]string{"controller": s.name, "served": "own_write"})
	s.gate.hold()
	cm.Data["phase"] = "Deleting"
	if err := s.c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		typed := &corev1.ConfigMap{}
		if err := s.c.Get(ctx, s.key("forms"), typed); err != nil || typed.ResourceVersion != cm.ResourceVersion || typed.Data["phase"] != "Deleting" {
			t.Fatalf("%s: typed Get = %v, rv %s phase %q, want rv %s phase Deleting", when, err, typed.ResourceVersion, typed.Data["phase"], cm.ResourceVersion)
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		if err := s.c.Get(ctx, s.key("forms"), u); err != nil || u.GetResourceVersion() != cm.ResourceVersion {
			t.Fatalf("%s: unstructured Get = %v, rv %s, want %s", when, err, u.GetResourceVersion(), cm.ResourceVersion)
		}
		if phase, _, _ := unstructured.NestedString(u.Object, "data", "phase"); phase != "Deleting" {
			t.Fatalf("%s: unstructured Get phase %q, want Deleting", when, phase)
		}
		meta := &metav1.PartialObjectMetadata{}
		meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		if err := s.c.Get(ctx, s.key("forms"), meta); err != nil || meta.ResourceVersion != cm.ResourceVersion {
			t.Fatalf("%s: metadata Get = %v, rv %s, want %s", when, err, meta.ResourceVersion, cm.ResourceVersion)
		}
	}
	check("watch held")
	if got := metricCounter(t, "racesafe_client_reads_total", map[string]string{"controller": s.name, "served": "own_write"}) - before; got != 3 {
		t.Errorf("reads served from own writes = %v, want 3", got)
	}
	s.gate.release()
	s.waitCached(t, cm)
	check("after the cache caught up")
	if n := s.c.Pending(); n != 0 {
		t.Errorf("Pending() after every form caught up = %d, want 0", n)
	}
}

// testListMergesOwnWrites: with the watch held, a List shows the object the
// client created (within the label selector only), the update it made, and
// not the object it deleted.
func testListMergesOwnWrites(t *testing.T, s *sessionEnv) {
	ctx := t.Context()
	app := map[string]string{"app": "x"}
	updated := s.seed(t, "b-updated", app)
	deleted := s.seed(t, "c-deleted", app)
	s.seed(t, "d-other", map[string]string{"app": "y"})
	s.gate.hold()
	created := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "a-created", Labels: app}}
	if err := s.c.Create(ctx, created); err != nil {
		t.Fatal(err)
	}
	updated.Data["phase"] = "Deleting"
	if err := s.c.Update(ctx, updated); err != nil {
		t.Fatal(err)
	}
	if err := s.c.Delete(ctx, deleted); err != nil {
		t.Fatal(err)
	}
	if err := s.c.Get(ctx, s.key("c-deleted"), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get of the deleted object while the cache shows it = %v, want NotFound", err)
	}
	var list corev1.ConfigMapList
	if err := s.c.List(ctx, &list, client.InNamespace(s.ns), client.MatchingLabels(app)); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	var order []string
	for _, item := range list.Items {
		got[item.Name] = item.ResourceVersion
		order = append(order, item.Name)
	}
	want := map[string]string{"b-updated": updated.ResourceVersion, "a-created": created.ResourceVersion}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("List with app=x = %v, want %v", got, want)
	}
	if fmt.Sprint(order) != "[b-updated a-created]" {
		t.Errorf("List order = %v, want the cache's items, then created ones", order)
	}
	var other corev1.ConfigMapList
	if err := s.c.List(ctx, &other, client.InNamespace(s.ns), client.MatchingLabels{"app": "y"}); err != nil || len(other.Items) != 1 || other.Items[0].Name != "d-other" {
		t.Errorf("List with app=y = %v, %d items, want d-other only", err, len(other.Items))
	}
	var elsewhere corev1.ConfigMapList
	if err := s.c.List(ctx, &elsewhere, client.InNamespace("default"), client.MatchingLabels(app)); err != nil || len(elsewhere.Items) != 0 {
		t.Errorf("List in another namespace = %v, %d items, want none", err, len(elsewhere.Items))
	}
	s.gate.release()
	waitFor(t, "the cache to show the deletion", func(ctx context.Context) (bool, error) {
		err := s.cache.Get(ctx, s.key("c-deleted"), &corev1.ConfigMap{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	s.waitCached(t, created)
	s.waitCached(t, updated)
	var after corev1.ConfigMapList
	if err := s.c.List(ctx, &after, client.InNamespace(s.ns), client.MatchingLabels(app)); err != nil || len(after.Items) != 2 {
		t.Errorf("List after the cache caught up = %v, %d items, want 2", err, len(after.Items))
	}
}

// testListRefusesWhatItCannotMerge: with this client's writes pending, a
// field selector or a paginated List is refused, never served stale; a List
// of another kind is served.
func testListRefusesWhatItCannotMerge(t *testing.T, s *sessionEnv) {
	ctx := t.Context()
	s.gate.hold()
	if err := s.c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "pending"}}); err != nil {
		t.Fatal(err)
	}
	for what, opts := range map[string][]client.ListOption{
		"field selector": {client.InNamespace(s.ns), client.MatchingFields{"metadata.name": "pending"}},
		"limit":          {client.InNamespace(s.ns), client.Limit(1)},
	} {
		err := s.c.List(ctx, &corev1.ConfigMapList{}, opts...)
		var stale *expectations.ListStaleError
		if !errors.Is(err, expectations.ErrStale) || !errors.As(err, &stale) {
			t.Errorf("List with a %s = %v, want a *ListStaleError", what, err)
		}
	}
	if err := s.c.List(ctx, &appsv1.DeploymentList{}, client.InNamespace(s.ns), client.Limit(1)); err != nil {
		t.Errorf("List of a kind without pending writes = %v", err)
	}
}

// testAnotherWritersNewerVersionWins: the client's write is served until
// the cache shows another writer's later version, which then wins; no read
// goes back in time.
func testAnotherWritersNewerVersionWins(t *testing.T, s *sessionEnv) {
	ctx := t.Context()
	cm := s.seed(t, "shared", nil)
	s.gate.hold()
	mine := cm.DeepCopy()
	mine.Data["phase"] = "Mine"
	if err := s.c.Update(ctx, mine); err != nil {
		t.Fatal(err)
	}
	theirs := mine.DeepCopy()
	theirs.Data["phase"] = "Theirs"
	if err := s.direct.Update(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	last := "0"
	read := func() *corev1.ConfigMap {
		t.Helper()
		got := &corev1.ConfigMap{}
		if err := s.c.Get(ctx, s.key("shared"), got); err != nil {
			t.Fatal(err)
		}
		if last != "0" {
			if cmp, _ := resourceversion.CompareResourceVersion(got.ResourceVersion, last); cmp < 0 {
				t.Fatalf("read went back in time: %s after %s", got.ResourceVersion, last)
			}
		}
		last = got.ResourceVersion
		return got
	}
	if got := read(); got.Data["phase"] != "Mine" {
		t.Errorf("Get while held = %q, want Mine", got.Data["phase"])
	}
	s.gate.release()
	s.waitCached(t, theirs)
	if got := read(); got.Data["phase"] != "Theirs" || got.ResourceVersion != theirs.ResourceVersion {
		t.Errorf("Get after the cache caught up = %q at %s, want Theirs at %s", got.Data["phase"], got.ResourceVersion, theirs.ResourceVersion)
	}
}

// testRecreatedObjectWins: an object this client wrote, then deleted and
// recreated by someone else (a new UID), is served as the new incarnation
// once the cache shows it; before, the client's write, never the cache's
// older copy.
func testRecreatedObjectWins(t *testing.T, s *sessionEnv) {
	ctx := t.Context()
	cm := s.seed(t, "reborn", nil)
	s.gate.hold()
	cm.Data["phase"] = "Mine"
	if err := s.c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := s.direct.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	again := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "reborn"}, Data: map[string]string{"phase": "New"}}
	if err := s.direct.Create(ctx, again); err != nil {
		t.Fatal(err)
	}
	got := &corev1.ConfigMap{}
	if err := s.c.Get(ctx, s.key("reborn"), got); err != nil || got.ResourceVersion != cm.ResourceVersion {
		t.Fatalf("Get while held = %v at %s, want this client's write at %s", err, got.ResourceVersion, cm.ResourceVersion)
	}
	s.gate.release()
	s.waitCached(t, again)
	if err := s.c.Get(ctx, s.key("reborn"), got); err != nil || got.UID != again.UID {
		t.Fatalf("Get after the cache shows the new incarnation = %v, uid %s, want %s", err, got.UID, again.UID)
	}
}

// testFinalizerRemovalThatDeletes (issue 19, 6): a Patch that removes the
// last finalizer of an object being deleted deletes it; the server answers
// at the resourceVersion sent, and the lagging cache's copy (finalizer
// included) must not be served.
func testFinalizerRemovalThatDeletes(t *testing.T, s *sessionEnv) {
	// The caller's object, as controller-runtime's helpers patch it; a raw
	// merge patch sent into an empty object with its precondition in the
	// body, as statusupdate's Patcher sends it; and the same without a
	// precondition, which only a live read can tell. The cache shows the
	// object being deleted, finalizer included, at the very version the
	// removal is answered at.
	for i, send := range []func(ctx context.Context, cm *corev1.ConfigMap) error{
		func(ctx context.Context, cm *corev1.ConfigMap) error {
			before := cm.DeepCopy()
			cm.Finalizers = nil
			return s.c.Patch(ctx, cm, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
		},
		func(ctx context.Context, cm *corev1.ConfigMap) error {
			body := fmt.Sprintf(`{"metadata":{"finalizers":null,"resourceVersion":%q}}`, cm.ResourceVersion)
			into := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name}}
			return s.c.Patch(ctx, into, client.RawPatch(types.MergePatchType, []byte(body)))
		},
		func(ctx context.Context, cm *corev1.ConfigMap) error {
			into := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name}}
			return s.c.Patch(ctx, into, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
		},
	} {
		ctx := t.Context()
		name := fmt.Sprintf("finalized-%d", i)
		cm := s.seed(t, name, nil, "racesafe.test/cleanup")
		if err := s.direct.Delete(ctx, cm); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the cache to show the deletionTimestamp", func(ctx context.Context) (bool, error) {
			err := s.cache.Get(ctx, s.key(name), cm)
			return err == nil && cm.DeletionTimestamp != nil, err
		})
		s.gate.hold()
		if err := send(ctx, cm); err != nil {
			t.Fatal(err)
		}
		got := &corev1.ConfigMap{}
		if err := s.c.Get(ctx, s.key(name), got); !apierrors.IsNotFound(err) {
			t.Errorf("%s: Get after the finalizer removal deleted it = %v, finalizers %v; want NotFound", name, err, got.Finalizers)
		}
		s.gate.release()
	}
}

// testSubResourceWithBody (issue 19, 5): a scale Update with a body decodes
// the answer into the body; the Deployment is kept at the body's
// resourceVersion, so the pre-scale cached copy is refused, and the write
// is never reported as not recorded.
func testSubResourceWithBody(t *testing.T, s *sessionEnv) {
	ctx := t.Context()
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "scaled"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "scaled"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "scaled"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}},
			},
		},
	}
	if err := s.direct.Create(ctx, dep); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the cache to show the Deployment", func(ctx context.Context) (bool, error) {
		err := s.cache.Get(ctx, client.ObjectKeyFromObject(dep), &appsv1.Deployment{})
		return err == nil, client.IgnoreNotFound(err)
	})
	s.gate.hold()
	scale := &autoscalingv1.Scale{}
	if err := s.c.SubResource("scale").Get(ctx, dep, scale); err != nil {
		t.Fatal(err)
	}
	scale.Spec.Replicas = 3
	keyOnly := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "scaled"}}
	if err := s.c.SubResource("scale").Update(ctx, keyOnly, client.WithSubResourceBody(scale)); err != nil {
		t.Fatalf("scale Update of a key-only Deployment = %v, want nil", err)
	}
	got := &appsv1.Deployment{}
	err := s.c.Get(ctx, client.ObjectKeyFromObject(dep), got)
	if err == nil && *got.Spec.Replicas != 3 {
		t.Fatalf("Get after the scale, watch held = %d replicas at %s (scale answered at %s), want refused or 3", *got.Spec.Replicas, got.ResourceVersion, scale.ResourceVersion)
	}
	if err != nil && !errors.Is(err, expectations.ErrStale) {
		t.Fatal(err)
	}
	s.gate.release()
	waitFor(t, "the Get to serve the scaled Deployment", func(ctx context.Context) (bool, error) {
		err := s.c.Get(ctx, client.ObjectKeyFromObject(dep), got)
		if errors.Is(err, expectations.ErrStale) {
			return false, nil
		}
		return err == nil && *got.Spec.Replicas == 3, err
	})
}

// testAmbiguousCreate (issue 19, 10): a Create applied by the server but
// answered with a timeout is read back through the APIReader, so the
// client's Get and List serve it.
func testAmbiguousCreate(t *testing.T, s *sessionEnv) {
	ctx := t.Context()
	timeout := interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if err := c.Create(ctx, obj, opts...); err != nil {
			return err
		}
		return apierrors.NewTimeoutError("the answer was lost", 1)
	}}
	withWatch, err := client.NewWithWatch(s.cfg, client.Options{Cache: &client.CacheOptions{Reader: s.cache, Unstructured: true}})
	if err != nil {
		t.Fatal(err)
	}
	lossy := interceptor.NewClient(withWatch, timeout)
	{
		c, err := expectations.NewClient(lossy, expectations.ClientOptions{Name: s.name, APIReader: s.direct})
		if err != nil {
			t.Fatal(err)
		}
		s.gate.hold()
		name := "ambiguous"
		if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name}}); !apierrors.IsTimeout(err) {
			t.Fatalf("Create = %v, want the timeout", err)
		}
		var list corev1.ConfigMapList
		err = c.List(ctx, &list, client.InNamespace(s.ns))
		gk := schema.GroupKind{Kind: "ConfigMap"}
		found := false
		for _, item := range list.Items {
			found = found || item.Name == name
		}
		if err != nil || !found {
			t.Errorf("List after an ambiguous Create read back = %v, found %t; want it listed", err, found)
		}
		if c.AmbiguousWrites(gk, s.ns) {
			t.Error("AmbiguousWrites after a read back = true")
		}
		s.gate.release()
	}
}

// testFailoverClientServesCache: a new Client (a new leader) has nothing
// pending and serves the cache as it is, Gets and Lists alike.
func testFailoverClientServesCache(t *testing.T, s *sessionEnv) {
	ctx := t.Context()
	cm := s.seed(t, "failover", nil)
	fresh, err := expectations.NewClient(s.cached, expectations.ClientOptions{APIReader: s.direct})
	if err != nil {
		t.Fatal(err)
	}
	got := &corev1.ConfigMap{}
	if err := fresh.Get(ctx, s.key("failover"), got); err != nil || got.ResourceVersion != cm.ResourceVersion {
		t.Fatalf("Get = %v at %s, want the cache's %s", err, got.ResourceVersion, cm.ResourceVersion)
	}
	var list corev1.ConfigMapList
	if err := fresh.List(ctx, &list, client.InNamespace(s.ns)); err != nil || len(list.Items) != 1 {
		t.Fatalf("List = %v, %d items, want 1", err, len(list.Items))
	}
}

// testPrimedClientServesPredecessorsWrites: a new leader's Client, empty,
// over a cache that missed its predecessor's last writes (the watch held):
// one updated to Deleting, one deleted, one unchanged. Without Prime it
// serves the cache's Failed and the deleted object; after Prime, Get and
// List serve the server's versions, and Prime kept only the two the cache
// lags, which go once the cache shows them.
func testPrimedClientServesPredecessorsWrites(t *testing.T, s *sessionEnv) {
	ctx := t.Context()
	moved := s.seed(t, "moved", nil)
	gone := s.seed(t, "gone", nil)
	s.seed(t, "same", nil)
	s.gate.hold()
	moved.Data = map[string]string{"phase": "Deleting"}
	if err := s.direct.Update(ctx, moved); err != nil {
		t.Fatal(err)
	}
	if err := s.direct.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	leader, err := expectations.NewClient(s.cached, expectations.ClientOptions{Name: s.name + "-leader", APIReader: s.direct})
	if err != nil {
		t.Fatal(err)
	}
	got := &corev1.ConfigMap{}
	if err := leader.Get(ctx, s.key("moved"), got); err != nil || got.Data["phase"] != "Failed" {
		t.Fatalf("unprimed Get = %v, phase %q; the test needs the cache to lag (Failed)", err, got.Data["phase"])
	}
	res, err := leader.Prime(ctx, s.direct, &corev1.ConfigMapList{}, client.InNamespace(s.ns))
	if err != nil {
		t.Fatal(err)
	}
	if res.Listed != 2 || res.Behind != 1 || res.Gone != 1 || leader.Pending() != 2 {
		t.Errorf("Prime = %+v, %d pending; want 2 listed, 1 behind, 1 gone, 2 kept", res, leader.Pending())
	}
	if err := leader.Get(ctx, s.key("moved"), got); err != nil || got.Data["phase"] != "Deleting" || got.ResourceVersion != moved.ResourceVersion {
		t.Errorf("primed Get = %v, phase %q at %s; want Deleting at %s", err, got.Data["phase"], got.ResourceVersion, moved.ResourceVersion)
	}
	if err := leader.Get(ctx, s.key("gone"), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("primed Get of the deleted object = %v, want NotFound", err)
	}
	var list corev1.ConfigMapList
	if err := leader.List(ctx, &list, client.InNamespace(s.ns)); err != nil {
		t.Fatal(err)
	}
	phases := map[string]string{}
	for _, it := range list.Items {
		phases[it.Name] = it.Data["phase"]
	}
	if len(phases) != 2 || phases["moved"] != "Deleting" || phases["same"] != "Failed" {
		t.Errorf("primed List = %v, want moved Deleting and same Failed, nothing else", phases)
	}
	s.gate.release()
	// An entry goes once every form of the cache has shown it: read each.
	waitFor(t, "the primed entries to go as the cache catches up", func(ctx context.Context) (bool, error) {
		for _, name := range []string{"moved", "gone"} {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
			meta := &metav1.PartialObjectMetadata{}
			meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
			for _, obj := range []client.Object{&corev1.ConfigMap{}, u, meta} {
				_ = leader.Get(ctx, s.key(name), obj)
			}
		}
		return leader.Pending() == 0, nil
	})
	if _, err := leader.Prime(ctx, s.direct, nil); !errors.Is(err, expectations.ErrNilObject) {
		t.Errorf("Prime of a nil list = %v, want ErrNilObject", err)
	}
}

// testFailedReadBackIsRetried: an Update applied by the server and answered
// with a timeout, while the API server is unreachable for reads too (the
// read back fails with a connection error): the object's Get and its
// kind's List are refused. Once the server answers again, a refused read
// retries the read back and they are served, with the server's version,
// long before the TTL (the kube-apiserver restart left a wired controller
// refusing every item for the TTL).
func testFailedReadBackIsRetried(t *testing.T, s *sessionEnv) {
	ctx := t.Context()
	cm := s.seed(t, "unreachable", nil)
	var down atomic.Bool
	unreachable := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	flaky := interceptor.NewClient(s.directWatch(t), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if down.Load() {
				return unreachable
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	withWatch, err := client.NewWithWatch(s.cfg, client.Options{Cache: &client.CacheOptions{Reader: s.cache, Unstructured: true}})
	if err != nil {
		t.Fatal(err)
	}
	lossy := interceptor.NewClient(withWatch, interceptor.Funcs{Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
		if err := c.Update(ctx, obj, opts...); err != nil {
			return err
		}
		return apierrors.NewTimeoutError("the answer was lost", 1)
	}})
	c, err := expectations.NewClient(lossy, expectations.ClientOptions{Name: s.name + "-readback", APIReader: flaky})
	if err != nil {
		t.Fatal(err)
	}
	s.gate.hold()
	down.Store(true)
	cm.Data = map[string]string{"phase": "Deleting"}
	if err := c.Update(ctx, cm.DeepCopy()); !apierrors.IsTimeout(err) {
		t.Fatalf("Update = %v, want the timeout", err)
	}
	if err := c.Get(ctx, s.key("unreachable"), &corev1.ConfigMap{}); !errors.Is(err, expectations.ErrStale) {
		t.Fatalf("Get while the read back fails = %v, want ErrStale (the cache still shows Failed)", err)
	}
	if err := c.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(s.ns)); !errors.Is(err, expectations.ErrStale) {
		t.Fatalf("List while the read back fails = %v, want ErrStale", err)
	}
	down.Store(false)
	got := &corev1.ConfigMap{}
	waitFor(t, "a refused Get to read back and serve the update", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, s.key("unreachable"), got)
		return err == nil, ignoreStale(err)
	})
	if got.Data["phase"] != "Deleting" {
		t.Errorf("Get after the read back = phase %q, want the applied update's Deleting", got.Data["phase"])
	}
	if err := c.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(s.ns)); err != nil {
		t.Errorf("List after the read back = %v, want it served", err)
	}
	s.gate.release()
}

func (s *sessionEnv) directWatch(t *testing.T) client.WithWatch {
	t.Helper()
	c, err := client.NewWithWatch(s.cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
