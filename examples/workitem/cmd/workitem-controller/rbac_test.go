package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/racesafe/racesafe/examples/workitem/api/v1alpha1"
	"github.com/racesafe/racesafe/internal/testenv"
)

// TestRBACSuffices runs each controller the binary offers on a real API
// server as the ServiceAccount the manifests bind, holding only the
// generated role, and drives one WorkItem from create to deletion. The
// ServiceAccount, the role and the bindings are the files under
// config/rbac, applied as they are. The API server enforces
// OwnerReferencesPermissionEnforcement, as some clusters do, so the
// workitems/finalizers rule is exercised too. Any request the server
// refuses with 403 fails the test, as does an item that does not finish.
func TestRBACSuffices(t *testing.T) {
	cfg := startControlPlane(t)
	ctx := t.Context()
	scheme, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	var sa *corev1.ServiceAccount
	for _, f := range []string{"manager/namespace.yaml", "rbac/service_account.yaml", "rbac/role.yaml", "rbac/role_binding.yaml"} {
		for _, obj := range readManifests(t, filepath.Join(configDir, f)) {
			if err := admin.Create(ctx, obj); err != nil {
				t.Fatalf("apply %s %s from %s: %v", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), f, err)
			}
			if s, ok := obj.(*corev1.ServiceAccount); ok {
				sa = s
			}
		}
	}
	if sa == nil {
		t.Fatal("no ServiceAccount in rbac/service_account.yaml")
	}
	items := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "items"}}
	if err := admin.Create(ctx, items); err != nil {
		t.Fatal(err)
	}
	dep := manifest[*appsv1.Deployment](t, "manager/manager.yaml")
	for _, name := range []string{controllerRacesafe, controllerPorted} {
		t.Run(name, func(t *testing.T) {
			runAs(t, cfg, admin, sa, dep.Spec.Template.Spec.Containers[0].Args, name)
		})
	}
}

// runAs runs the named controller as sa, with the Deployment's args, and
// drives one WorkItem through.
func runAs(t *testing.T, adminCfg *rest.Config, admin client.Client, sa *corev1.ServiceAccount, deployArgs []string, name string) {
	ctx := t.Context()
	probe := freeAddr(t)
	args := append(slices.Clone(deployArgs),
		"--controller="+name,
		"--metrics-bind-address=0", // tests run in parallel: no fixed port
		"--health-probe-bind-address="+probe,
		"--leader-election-namespace="+sa.Namespace, // what the pod's namespace gives in a cluster
		"--sync-status-check-interval=200ms",
	)
	o, err := parseFlags(args, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	o.skipNameValidation = true // each subtest runs a manager in this process
	cfg := rest.CopyConfig(adminCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + sa.Namespace + ":" + sa.Name}
	var forbidden refusals
	cfg.Wrap(forbidden.wrap)
	mgr, err := newManager(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	stop := testenv.Run(ctx, t, mgr)

	// The probes the Deployment names answer on the probe address.
	for _, path := range []string{"/" + livenessCheck, "/" + readinessCheck} {
		poll(t, &forbidden, "GET "+path+" answers 200", func(ctx context.Context) (bool, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+probe+path, nil)
			if err != nil {
				return false, err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false, nil
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK, nil
		})
	}

	item := &v1.WorkItem{
		ObjectMeta: metav1.ObjectMeta{Namespace: "items", Name: "rbac-" + name},
		Spec:       v1.WorkItemSpec{Payload: "nginx"},
	}
	if err := admin.Create(ctx, item); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(item)
	poll(t, &forbidden, "the item is Ready with its finalizer and one child", func(ctx context.Context) (bool, error) {
		if err := admin.Get(ctx, key, item); err != nil {
			return false, err
		}
		n, err := children(ctx, admin, item)
		return item.Status.Phase == v1.PhaseReady && slices.Contains(item.Finalizers, v1.Finalizer) && n == 1, err
	})
	if err := admin.Delete(ctx, item); err != nil {
		t.Fatal(err)
	}
	poll(t, &forbidden, "the item is gone and so is its child", func(ctx context.Context) (bool, error) {
		err := admin.Get(ctx, key, &v1.WorkItem{})
		if !apierrors.IsNotFound(err) {
			return false, client.IgnoreNotFound(err)
		}
		n, err := children(ctx, admin, item)
		return n == 0, err
	})
	// The Lease is released on stop (an update) as part of the identity's
	// work: stop before reading the refusals.
	stop()
	if got := forbidden.list(); len(got) > 0 {
		t.Errorf("the API server refused %d requests of %s:\n%v", len(got), cfg.Impersonate.UserName, got)
	}
}

func children(ctx context.Context, c client.Client, item *v1.WorkItem) (int, error) {
	var list corev1.ConfigMapList
	err := c.List(ctx, &list, client.InNamespace(item.Namespace), client.MatchingLabels{v1.ChildLabel: string(item.UID)})
	return len(list.Items), err
}

// poll waits up to 15s for cond. A request the API server refused ends
// the wait at once and fails the test with what was refused: a missing
// rule makes the controller retry, not stop, and would otherwise show only
// as a timeout.
func poll(t *testing.T, forbidden *refusals, what string, cond wait.ConditionWithContextFunc) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		if got := forbidden.list(); len(got) > 0 {
			return false, fmt.Errorf("%w: %d requests: %v", errRefused, len(got), got)
		}
		return cond(ctx)
	})
	if err != nil {
		t.Fatalf("waiting until %s: %v", what, err)
	}
}

// errRefused is a request of the controller that the API server refused.
var errRefused = errors.New("the API server refused the controller's requests (403 Forbidden)")

// refusals records the requests the API server answered 403 Forbidden.
type refusals struct {
	mu  sync.Mutex
	got []string
}

func (r *refusals) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && resp.StatusCode == http.StatusForbidden {
			r.mu.Lock()
			r.got = append(r.got, req.Method+" "+req.URL.Path)
			r.mu.Unlock()
		}
		return resp, err
	})
}

func (r *refusals) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// freeAddr returns a loopback address with a port nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().(*net.TCPAddr)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort(addr.IP.String(), strconv.Itoa(addr.Port))
}

// startControlPlane starts envtest (testenv.Start: skipped, or failed
// under CI=true, without the binaries) with the WorkItem CRD and the
// OwnerReferencesPermissionEnforcement admission plugin.
func startControlPlane(t *testing.T) *rest.Config {
	t.Helper()
	return testenv.Start(t, testenv.Options{
		CRDDirectoryPaths: []string{filepath.Join(configDir, "crd")},
		AdmissionPlugins:  []string{"OwnerReferencesPermissionEnforcement"},
	}).Config
}
