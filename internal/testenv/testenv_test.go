package testenv_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/racesafe/racesafe/internal/testenv"
)

// TestStartServesCreate proves the control plane is a real API server: the
// created object comes back with a UID and a resourceVersion that only a
// server assigns.
func TestStartServesCreate(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"},
		Data:       map[string]string{"k": "v"},
	}
	if err := c.Create(t.Context(), cm); err != nil {
		t.Fatalf("create: %v", err)
	}
	if cm.UID == "" || cm.ResourceVersion == "" {
		t.Fatalf("server did not assign UID/resourceVersion: %+v", cm.ObjectMeta)
	}
	var got corev1.ConfigMap
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(cm), &got); err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.Data["k"] != "v" || got.UID != cm.UID {
		t.Fatalf("read back %+v, want the created object", got)
	}
}

// TestStartReturnsWithItsCRDsServed: a test may List a kind Start
// installed as soon as Start returns, with no wait of its own.
func TestStartReturnsWithItsCRDsServed(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "testenv.racesafe.io", Version: "v1", Kind: "Thing"}
	env := testenv.Start(t, testenv.Options{CRDs: []*apiextensionsv1.CustomResourceDefinition{testenv.OpenCRD(gvk, "things", false)}})
	c := testenv.Client(t, env.Config, client.Options{})
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind("ThingList"))
	if err := c.List(t.Context(), list); err != nil {
		t.Fatalf("List of a CRD Start installed: %v", err)
	}
}

// TestNewEnvironmentEnablesAdmissionPlugins: the plugins reach
// kube-apiserver's command line, and without any the flag is left to
// kube-apiserver's defaults.
func TestNewEnvironmentEnablesAdmissionPlugins(t *testing.T) {
	env := testenv.NewEnvironment(t.TempDir(), testenv.Options{AdmissionPlugins: []string{"OwnerReferencesPermissionEnforcement", "AlwaysPullImages"}})
	args := env.ControlPlane.APIServer.Configure().AsStrings(nil)
	want := "--enable-admission-plugins=OwnerReferencesPermissionEnforcement,AlwaysPullImages"
	if !slices.Contains(args, want) {
		t.Errorf("kube-apiserver arguments %q lack %q", args, want)
	}
	if env := testenv.NewEnvironment(t.TempDir(), testenv.Options{}); env.ControlPlane.APIServer != nil {
		t.Errorf("without AdmissionPlugins the API server is configured: %q", env.ControlPlane.APIServer.Configure().AsStrings(nil))
	}
}

// TestStartRestartableRestartsTheSameServer restarts the API server of a
// restartable control plane: a request fails while it is down, and the
// client built before the restart reads what was written before it, so the
// server came back with the same certificates on the same etcd.
func TestStartRestartableRestartsTheSameServer(t *testing.T) {
	env, restarter := testenv.StartRestartable(t, testenv.Options{})
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before", Namespace: "default"}}
	if err := c.Create(t.Context(), cm); err != nil {
		t.Fatalf("create: %v", err)
	}
	restart, err := restarter.Restart(t.Context())
	if err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if restart.DownErr == nil {
		t.Fatal("no request failed while the API server was down")
	}
	var got corev1.ConfigMap
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(cm), &got); err != nil {
		t.Fatalf("get through the config of before the restart: %v", err)
	}
	if got.UID != cm.UID {
		t.Fatalf("read back UID %s, want %s", got.UID, cm.UID)
	}
}
