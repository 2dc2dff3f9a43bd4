package fence_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/racesafe/racesafe/fence"
	"github.com/racesafe/racesafe/internal/testenv"
)

var gvk = schema.GroupVersionKind{Group: "fence.test.racesafe.io", Version: "v1", Kind: "Item"}

// fenced is a control plane with the policy bound to one lease, an admin
// client and a fenced client.
type fenced struct {
	admin  client.Client
	plain  client.WithWatch // the fenced client's user, without the fence
	client client.WithWatch
	fence  *fence.Fence
	lease  types.NamespacedName
	ns     string
}

func startFenced(tb testing.TB, withPolicy bool) *fenced {
	tb.Helper()
	ctx := tb.Context()
	env := testenv.Start(tb, testenv.Options{CRDs: []*apiextensionsv1.CustomResourceDefinition{testenv.OpenCRD(gvk, "items", true)}})
	admin := testenv.Client(tb, env.Config, client.Options{})
	ns := "fence"
	testenv.Namespace(tb, admin, ns)
	lease := types.NamespacedName{Namespace: ns, Name: "controller"}
	setLease(tb, admin, lease, "a", 1)
	if withPolicy {
		policy, err := fence.Policy(fence.PolicyOptions{Name: "fence.test", Resources: []schema.GroupResource{{Group: gvk.Group, Resource: "items"}}})
		if err != nil {
			tb.Fatal(err)
		}
		if err := admin.Create(ctx, policy); err != nil {
			tb.Fatal(err)
		}
		if err := admin.Create(ctx, fence.Binding(policy.Name, lease)); err != nil {
			tb.Fatal(err)
		}
	}
	id, err := fence.WhoAmI(ctx, env.Config)
	if err != nil {
		tb.Fatal(err)
	}
	cfg := fence.Config(env.Config, id)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return gatedTransport{rt} })
	plain, err := client.NewWithWatch(cfg, client.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	f := &fence.Fence{}
	fx := &fenced{admin: admin, plain: plain, client: fence.NewClient(plain, f), fence: f, lease: lease, ns: ns}
	if withPolicy {
		// The policy takes effect once the API server's informers have
		// it: poll until a write of a made-up epoch is refused.
		fx.waitRefused(tb, fence.Epoch{Lease: lease, Holder: "nobody", Transitions: 1})
	}
	return fx
}

func setLease(tb testing.TB, c client.Client, key types.NamespacedName, holder string, transitions int32) {
	tb.Helper()
	l := &coordinationv1.Lease{}
	err := c.Get(tb.Context(), key, l)
	l.Name, l.Namespace = key.Name, key.Namespace
	l.Spec.HolderIdentity = ptr.To(holder)
	l.Spec.LeaseTransitions = ptr.To(transitions)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(15))
	switch {
	case err == nil:
		err = c.Update(tb.Context(), l)
	case client.IgnoreNotFound(err) == nil:
		err = c.Create(tb.Context(), l)
	}
	if err != nil {
		tb.Fatalf("lease: %v", err)
	}
}

func item(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// probe writes under e, through the plain client with e in the context,
// and returns the error: nil or the fence's refusal.
func (fx *fenced) probe(ctx context.Context, e fence.Epoch) error {
	u := item(fx.ns, "probe")
	u.Object["spec"] = map[string]any{"at": time.Now().UnixNano()}
	err := fx.plain.Patch(fence.WithEpoch(ctx, e), u, client.Apply, client.FieldOwner("probe"), client.ForceOwnership)
	return err
}

func (fx *fenced) waitRefused(tb testing.TB, e fence.Epoch) {
	tb.Helper()
	err := wait.PollUntilContextTimeout(tb.Context(), 5*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := fx.probe(ctx, e)
		if err != nil && !fence.IsFenced(err) {
			return false, err
		}
		return fence.IsFenced(err), nil
	})
	if err != nil {
		tb.Fatalf("epoch %s never refused: %v", e, err)
	}
}

func TestPolicyRefusesOldEpoch(t *testing.T) {
	fx := startFenced(t, true)
	ctx := t.Context()
	old := fence.Epoch{Lease: fx.lease, Holder: "a", Transitions: 1}

	if err := fx.client.Create(ctx, item(fx.ns, "x")); !errors.Is(err, fence.ErrNoEpoch) {
		t.Fatalf("write without an epoch: got %v, want ErrNoEpoch", err)
	}
	fx.fence.Set(old)
	u := item(fx.ns, "x")
	if err := fx.client.Create(ctx, u); err != nil {
		t.Fatalf("create with the current epoch: %v", err)
	}
	u.Object["status"] = map[string]any{"phase": "Running"}
	if err := fx.client.Status().Update(ctx, u); err != nil {
		t.Fatalf("status update with the current epoch: %v", err)
	}
	if err := fx.client.Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"n":1}}`))); err != nil {
		t.Fatalf("patch with the current epoch: %v", err)
	}

	// Another replica takes the lease.
	setLease(t, fx.admin, fx.lease, "b", 2)
	fx.waitRefused(t, old)

	writes := map[string]func() error{
		"create": func() error { return fx.client.Create(ctx, item(fx.ns, "y")) },
		"update": func() error { return fx.client.Update(ctx, u.DeepCopy()) },
		"patch": func() error {
			return fx.client.Patch(ctx, u.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"n":2}}`)))
		},
		"status update": func() error {
			v := u.DeepCopy()
			v.Object["status"] = map[string]any{"phase": "Zombie"}
			return fx.client.Status().Update(ctx, v)
		},
		"status patch": func() error {
			return fx.client.Status().Patch(ctx, u.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"status":{"phase":"Zombie"}}`)))
		},
		"delete": func() error { return fx.client.Delete(ctx, u.DeepCopy()) },
	}
	for name, write := range writes {
		if err := write(); !fence.IsFenced(err) {
			t.Errorf("%s with the old epoch %s: got %v, want the fence's refusal", name, old, err)
		}
	}
	got := item(fx.ns, "x")
	if err := fx.admin.Get(ctx, client.ObjectKeyFromObject(got), got); err != nil {
		t.Fatal(err)
	}
	if phase, _, _ := unstructured.NestedString(got.Object, "status", "phase"); phase != "Running" {
		t.Errorf("status.phase = %q after the zombie's writes, want Running", phase)
	}

	// The new holder writes, status included.
	fx.fence.Set(fence.Epoch{Lease: fx.lease, Holder: "b", Transitions: 2})
	got.Object["status"] = map[string]any{"phase": "Done"}
	if err := fx.client.Status().Update(ctx, got); err != nil {
		t.Fatalf("status update with the new epoch: %v", err)
	}
	if err := fx.client.Delete(ctx, got); err != nil {
		t.Fatalf("delete with the new epoch: %v", err)
	}
	// The checked-in manifest is accepted by the API server (its CEL
	// compiles); dry run, since its binding's Lease does not exist here.
	data, err := os.ReadFile("config/workitem.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(data), "\n---\n")[1:] {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if err := fx.admin.Create(ctx, u, client.DryRunAll); err != nil {
			t.Errorf("config/workitem.yaml: %s: %v", u.GetKind(), err)
		}
	}
	// Writes that carry no epoch, such as another user's, are not the
	// fence's business.
	if err := fx.admin.Create(ctx, item(fx.ns, "admin")); err != nil {
		t.Fatalf("unfenced write: %v", err)
	}
}

// gatedTransport holds a request whose context carries a gate
// ([gatedContext]) until the gate closes.
type gatedTransport struct{ next http.RoundTripper }

func (g gatedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if gate, ok := req.Context().Value(gateKey{}).(<-chan struct{}); ok {
		select {
		case <-gate:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	return g.next.RoundTrip(req)
}
