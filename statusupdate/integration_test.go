package statusupdate_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/google/go-cmp/cmp"

	"github.com/racesafe/racesafe/internal/testenv"
	"github.com/racesafe/racesafe/statusupdate"
)

// requestCounter counts requests by verb, and 409 responses, of every
// transport built from one rest.Config: what a client really sends.
type requestCounter struct {
	mu        sync.Mutex
	verbs     map[string]int
	conflicts int
}

func countRequests(cfg *rest.Config) (*rest.Config, *requestCounter) {
	rc := &requestCounter{verbs: map[string]int{}}
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return countingTransport{next: rt, counter: rc}
	}
	return cfg, rc
}

type countingTransport struct {
	next    http.RoundTripper
	counter *requestCounter
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	rc := t.counter
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.verbs[req.Method]++
	if err == nil && resp.StatusCode == http.StatusConflict {
		rc.conflicts++
	}
	return resp, err
}

// take returns the counts so far and starts again from zero.
func (rc *requestCounter) take() (verbs map[string]int, conflicts int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	verbs, conflicts = rc.verbs, rc.conflicts
	rc.verbs, rc.conflicts = map[string]int{}, 0
	return verbs, conflicts
}

func newClient(t testing.TB, cfg *rest.Config) client.Client {
	t.Helper()
	c := testenv.Client(t, cfg, client.Options{Scheme: scheme.Scheme})
	return c
}

// createPod creates a Pod with one container. No scheduler or kubelet runs in
// envtest, so nothing but the test writes its status.
func createPod(t testing.TB, c client.Client, name string, finalizers ...string) *corev1.Pod {
	t.Helper()
	pod := testPod(name)
	pod.Status = corev1.PodStatus{}
	pod.Finalizers = finalizers
	if err := c.Create(t.Context(), pod); err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	return pod
}

func compareRV(t *testing.T, a, b string) int {
	t.Helper()
	n, err := resourceversion.CompareResourceVersion(a, b)
	if err != nil {
		t.Fatalf("compare resourceVersions %q and %q: %v", a, b, err)
	}
	return n
}

// testGroup holds the custom resources of the integration tests.
const testGroup = "test.racesafe.io"

// createCR creates a custom resource of kind in namespace default.
func createCR(t testing.TB, c client.Client, kind, name string, finalizers ...string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: testGroup, Version: "v1", Kind: kind})
	u.SetNamespace("default")
	u.SetName(name)
	u.SetFinalizers(finalizers)
	if err := unstructured.SetNestedField(u.Object, "one", "spec", "payload"); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(t.Context(), u); err != nil {
		t.Fatalf("create %s %s: %v", kind, name, err)
	}
	return u
}

// deleting deletes obj, which must hold a finalizer, and returns it as the
// server then holds it: with a deletionTimestamp.
func deleting[T client.Object](t *testing.T, c client.Client, obj T) T {
	t.Helper()
	if err := c.Delete(t.Context(), obj); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatalf("get: %v", err)
	}
	if obj.GetDeletionTimestamp() == nil {
		t.Fatalf("%s not marked for deletion", client.ObjectKeyFromObject(obj))
	}
	return obj
}

func removeFinalizers[T client.Object](obj T) error {
	obj.SetFinalizers(nil)
	return nil
}

func TestIntegration(t *testing.T) {
	env := testenv.Start(t, testenv.Options{CRDs: []*apiextensionsv1.CustomResourceDefinition{
		testenv.OpenCRD(schema.GroupVersionKind{Group: testGroup, Version: "v1", Kind: "Widget"}, "widgets", true),
		testenv.OpenCRD(schema.GroupVersionKind{Group: testGroup, Version: "v1", Kind: "Gadget"}, "gadgets", false),
	}})
	cfg, counter := countRequests(env.Config)
	c := newClient(t, cfg)

	// Two writers race on one Pod's status, each adding a condition of its own
	// per round. A merge patch replaces the whole status.conditions list, so
	// every patch carries the writer's view of the other's conditions: only the
	// resourceVersion precondition stops a writer holding an older view from
	// erasing what the other just added. On conflict the Patcher re-reads the
	// live Pod and re-applies the one condition.
	t.Run("RacingWritersLoseNothing", func(t *testing.T) {
		const rounds = 25
		pod := createPod(t, c, "race")
		counter.take()
		p := statusupdate.New[*corev1.Pod](c, c, statusupdate.Options{
			// Under this much contention the default budget can run out; the
			// test is about lost updates, not about the budget.
			Backoff: wait.Backoff{Steps: 50, Duration: 2 * time.Millisecond, Factor: 1, Jitter: 1},
		})
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, writer := range []string{"a", "b"} {
			wg.Go(func() {
				<-start
				held := pod.DeepCopy()
				for i := range rounds {
					written, err := p.PatchStatus(t.Context(), held, setCondition(fmt.Sprintf("racesafe.io/%s-%d", writer, i), "round"))
					if err != nil {
						t.Errorf("writer %s round %d: %v", writer, i, err)
						return
					}
					var live corev1.Pod
					if err := c.Get(t.Context(), client.ObjectKeyFromObject(pod), &live); err != nil {
						t.Errorf("writer %s round %d: live get: %v", writer, i, err)
						return
					}
					// The returned object is what the server wrote: newer than
					// what the writer held, and not newer than what the server
					// holds right after (the other writer may have written since).
					if compareRV(t, written.ResourceVersion, held.ResourceVersion) <= 0 ||
						compareRV(t, written.ResourceVersion, live.ResourceVersion) > 0 {
						t.Errorf("writer %s round %d: held rv %s, returned %s, live %s",
							writer, i, held.ResourceVersion, written.ResourceVersion, live.ResourceVersion)
					}
					for j := 0; j <= i; j++ {
						if _, ok := condition(written, fmt.Sprintf("racesafe.io/%s-%d", writer, j)); !ok {
							t.Errorf("writer %s round %d: returned object lacks its own condition %d", writer, i, j)
						}
					}
					held = written
				}
			})
		}
		close(start)
		wg.Wait()

		var final corev1.Pod
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(pod), &final); err != nil {
			t.Fatal(err)
		}
		var lost []string
		for _, writer := range []string{"a", "b"} {
			for i := range rounds {
				if _, ok := condition(&final, fmt.Sprintf("racesafe.io/%s-%d", writer, i)); !ok {
					lost = append(lost, fmt.Sprintf("%s-%d", writer, i))
				}
			}
		}
		if len(lost) > 0 {
			t.Errorf("lost %d of %d conditions: %v", len(lost), 2*rounds, lost)
		}
		verbs, conflicts := counter.take()
		t.Logf("%d writes by 2 writers: %d conflicts resolved, requests %v (PATCH includes retries, GET includes 1 check per round)",
			2*rounds, conflicts, verbs)
	})

	// pods/status ignores spec. The result must say so: it is decoded from the
	// server's answer into an empty Pod, not into the mutated copy, where the
	// decoder would leave the dropped field in place.
	t.Run("StatusPatchReturnsOnlyWhatWasWritten", func(t *testing.T) {
		pod := createPod(t, c, "dropped")
		p := statusupdate.New[*corev1.Pod](c, c, statusupdate.Options{})
		deadline := int64(60)
		written, err := p.PatchStatus(t.Context(), pod, func(p *corev1.Pod) error {
			p.Spec.ActiveDeadlineSeconds = &deadline
			p.Status.Message = "written"
			return nil
		})
		if err != nil {
			t.Fatalf("Patch: %v", err)
		}
		if written.Status.Message != "written" || written.Spec.ActiveDeadlineSeconds != nil {
			t.Errorf("returned message %q, activeDeadlineSeconds %v: want the message and no deadline",
				written.Status.Message, written.Spec.ActiveDeadlineSeconds)
		}
	})

	t.Run("PatchObjectRemovesLastFinalizer", func(t *testing.T) {
		pod := createPod(t, c, "finalized", "example.com/hold")
		if err := c.Delete(t.Context(), pod); err != nil {
			t.Fatalf("delete: %v", err)
		}
		var deleting corev1.Pod
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(pod), &deleting); err != nil {
			t.Fatalf("get: %v", err)
		}
		if deleting.DeletionTimestamp == nil {
			t.Fatalf("pod not marked for deletion: %+v", deleting.ObjectMeta)
		}
		held := deleting.DeepCopy()
		rec := &recorder{}
		p := statusupdate.New[*corev1.Pod](c, c, statusupdate.Options{Expectations: rec})
		written, err := p.PatchObject(t.Context(), held, func(p *corev1.Pod) error {
			p.Finalizers = nil
			return nil
		})
		if err != nil {
			t.Fatalf("PatchObject: %v", err)
		}
		// The update deleted the object, so the server answers with the object
		// as sent: no new resourceVersion exists for it.
		if len(written.Finalizers) != 0 || written.DeletionTimestamp == nil ||
			compareRV(t, written.ResourceVersion, deleting.ResourceVersion) != 0 {
			t.Errorf("returned finalizers %v, deletionTimestamp %v, rv %s (held %s)",
				written.Finalizers, written.DeletionTimestamp, written.ResourceVersion, deleting.ResourceVersion)
		}
		if want := []string{"ExpectDeletion " + written.ResourceVersion}; strings.Join(rec.calls, ";") != strings.Join(want, ";") {
			t.Errorf("recorder calls %v, want %v", rec.calls, want)
		}
		if len(held.Finalizers) != 1 {
			t.Errorf("caller's object changed: finalizers %v", held.Finalizers)
		}
		err = wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			err := c.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		})
		if err != nil {
			t.Errorf("pod not deleted after its last finalizer was removed: %v", err)
		}
	})

	// A scheduled Pod deleted with a grace period is not removed when its last
	// finalizer goes: the kubelet deletes it when its containers have stopped,
	// and envtest has no kubelet. Observed: the answer has the deletionTimestamp,
	// no finalizers and a new resourceVersion, and the Pod lives on at it.
	t.Run("GracefulPodOutlivesLastFinalizer", func(t *testing.T) {
		for _, noLock := range []bool{false, true} {
			t.Run(fmt.Sprintf("DisableOptimisticLock=%v", noLock), func(t *testing.T) {
				pod := testPod(fmt.Sprintf("graceful-%v", noLock))
				pod.Status = corev1.PodStatus{}
				pod.Spec.NodeName = "node-a" // scheduled: deletion waits for the kubelet
				pod.Finalizers = []string{"example.com/hold"}
				if err := c.Create(t.Context(), pod); err != nil {
					t.Fatal(err)
				}
				held := deleting(t, c, pod)
				if g := held.DeletionGracePeriodSeconds; g == nil || *g == 0 {
					t.Fatalf("deletion grace period %v, want one", g)
				}
				rec := &recorder{}
				p := statusupdate.New[*corev1.Pod](c, c, statusupdate.Options{Expectations: rec, DisableOptimisticLock: noLock})
				counter.take()
				written, err := p.PatchObject(t.Context(), held, removeFinalizers)
				if err != nil {
					t.Fatalf("PatchObject: %v", err)
				}
				// A new resourceVersion: one live GET tells the Pod is alive.
				if verbs, _ := counter.take(); verbs["GET"] != 1 || verbs["PATCH"] != 1 {
					t.Errorf("requests %v, want 1 GET and 1 PATCH", verbs)
				}
				t.Logf("sent at rv %s; answer: deletionTimestamp %v, finalizers %v, rv %s",
					held.ResourceVersion, written.DeletionTimestamp, written.Finalizers, written.ResourceVersion)
				if written.DeletionTimestamp == nil || len(written.Finalizers) != 0 ||
					compareRV(t, written.ResourceVersion, held.ResourceVersion) <= 0 {
					t.Errorf("answer: deletionTimestamp %v, finalizers %v, rv %s (sent %s)",
						written.DeletionTimestamp, written.Finalizers, written.ResourceVersion, held.ResourceVersion)
				}
				if diff := cmp.Diff([]string{"ExpectWrite " + written.ResourceVersion}, rec.calls); diff != "" {
					t.Errorf("recorder calls (-want +got):\n%s", diff)
				}
				var live corev1.Pod
				if err := c.Get(t.Context(), client.ObjectKeyFromObject(pod), &live); err != nil || live.ResourceVersion != written.ResourceVersion {
					t.Errorf("live pod rv %q (Get: %v), want it alive at %s", live.ResourceVersion, err, written.ResourceVersion)
				}
			})
		}
	})

	// A custom resource has no graceful deletion: removing its last finalizer
	// removes it. Observed: the answer is the object as sent, deletionTimestamp
	// and no finalizers, at the resourceVersion the patch was sent with.
	t.Run("CustomResourceRemovedWithLastFinalizer", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			noLock bool
			ahead  bool // someone writes after the caller's read
			gets   int  // live GETs the Patcher needs to tell
		}{
			{name: "lock"},
			{name: "no lock", noLock: true},
			{name: "no lock, server ahead", noLock: true, ahead: true, gets: 1},
		} {
			t.Run(tc.name, func(t *testing.T) {
				name := strings.ReplaceAll(tc.name, " ", "")
				name = strings.ReplaceAll(name, ",", "-")
				held := deleting(t, c, createCR(t, c, "Widget", name, "example.com/hold"))
				if tc.ahead {
					other := held.DeepCopy()
					other.SetLabels(map[string]string{"moved": "on"})
					if err := c.Update(t.Context(), other); err != nil {
						t.Fatal(err)
					}
				}
				rec := &recorder{}
				p := statusupdate.New[*unstructured.Unstructured](c, c, statusupdate.Options{Expectations: rec, DisableOptimisticLock: tc.noLock})
				counter.take()
				written, err := p.PatchObject(t.Context(), held, removeFinalizers)
				if err != nil {
					t.Fatalf("PatchObject: %v", err)
				}
				verbs, _ := counter.take()
				t.Logf("sent at rv %s; answer: deletionTimestamp %v, finalizers %v, rv %s",
					held.GetResourceVersion(), written.GetDeletionTimestamp(), written.GetFinalizers(), written.GetResourceVersion())
				if written.GetDeletionTimestamp() == nil || len(written.GetFinalizers()) != 0 {
					t.Errorf("answer: deletionTimestamp %v, finalizers %v", written.GetDeletionTimestamp(), written.GetFinalizers())
				}
				if !tc.ahead && written.GetResourceVersion() != held.GetResourceVersion() {
					t.Errorf("answer rv %s, want the rv sent, %s", written.GetResourceVersion(), held.GetResourceVersion())
				}
				if diff := cmp.Diff([]string{"ExpectDeletion " + written.GetResourceVersion()}, rec.calls); diff != "" {
					t.Errorf("recorder calls (-want +got):\n%s", diff)
				}
				if verbs["GET"] != tc.gets || verbs["PATCH"] != 1 {
					t.Errorf("requests %v, want %d GET and 1 PATCH", verbs, tc.gets)
				}
				err = c.Get(t.Context(), client.ObjectKeyFromObject(held), written.DeepCopy())
				if !apierrors.IsNotFound(err) {
					t.Errorf("Get after the write: %v, want NotFound", err)
				}
			})
		}
	})

	// A kind without a status subresource answers a status patch with
	// NotFound although the object exists.
	t.Run("StatusPatchOnKindWithoutStatusSubresource", func(t *testing.T) {
		held := createCR(t, c, "Gadget", "no-status")
		p := statusupdate.New[*unstructured.Unstructured](c, c, statusupdate.Options{})
		setStatus := func(u *unstructured.Unstructured) error {
			return unstructured.SetNestedField(u.Object, "Running", "status", "phase")
		}
		_, err := p.PatchStatus(t.Context(), held, setStatus)
		wantSubresourceError(t, err, statusupdate.SubresourceError{
			Key:              client.ObjectKeyFromObject(held),
			GroupVersionKind: schema.GroupVersionKind{Group: testGroup, Version: "v1", Kind: "Gadget"},
			Subresource:      "status",
		})
		t.Log(err)

		// The object really gone: NotFound, for either kind.
		for _, kind := range []string{"Gadget", "Widget"} {
			gone := createCR(t, c, kind, "gone")
			if err := c.Delete(t.Context(), gone); err != nil {
				t.Fatal(err)
			}
			_, err := p.PatchStatus(t.Context(), gone, setStatus)
			if !apierrors.IsNotFound(err) || errors.Is(err, statusupdate.ErrNoStatusSubresource) {
				t.Errorf("%s: error %v, want NotFound", kind, err)
			}
		}
	})

	// After a conflict, what the live re-read showed is recorded before the
	// retry.
	t.Run("LiveReadRecordedAfterConflict", func(t *testing.T) {
		pod := createPod(t, c, "reread")
		var live corev1.Pod
		other := pod.DeepCopy()
		other.Status.Message = "theirs"
		if err := c.Status().Update(t.Context(), other); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(pod), &live); err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		p := statusupdate.New[*corev1.Pod](c, c, statusupdate.Options{Expectations: rec})
		written, err := p.PatchStatus(t.Context(), pod, setPhase(corev1.PodRunning)) // pod is stale
		if err != nil {
			t.Fatalf("Patch: %v", err)
		}
		want := []string{"ExpectWrite " + live.ResourceVersion, "ExpectWrite " + written.ResourceVersion}
		if diff := cmp.Diff(want, rec.calls); diff != "" {
			t.Errorf("recorder calls (-want +got):\n%s", diff)
		}
	})
}
