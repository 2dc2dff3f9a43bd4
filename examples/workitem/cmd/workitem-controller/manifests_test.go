package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// configDir holds the manifests that deploy this binary.
const configDir = "../../config"

// kustomization is the part of kustomization.yaml the manifests use; strict
// decoding refuses any other field, so a field this test does not know
// cannot slip in unchecked.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
	} `json:"images"`
}

// manifestScheme knows every kind the manifests may hold.
func manifestScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// readManifests decodes every document of the YAML file at path, strictly
// (an unknown or duplicated field is an error), into typed objects.
func readManifests(t *testing.T, path string) []client.Object {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := manifestScheme(t)
	codec := json.NewSerializerWithOptions(json.DefaultMetaFactory, s, s, json.SerializerOptions{Yaml: true, Strict: true})
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []client.Object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj, _, err := codec.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		cobj, ok := obj.(client.Object)
		if !ok {
			t.Fatalf("%s: %T is not an object", path, obj)
		}
		objs = append(objs, cobj)
	}
	if len(objs) == 0 {
		t.Fatalf("%s holds no object", path)
	}
	return objs
}

func stripComments(doc []byte) []byte {
	var out []byte
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' && !bytes.Equal(t, []byte("---")) {
			out = append(out, l...)
			out = append(out, '\n')
		}
	}
	return out
}

func readKustomization(t *testing.T) kustomization {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(configDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	return k
}

// TestManifestsParse decodes every YAML under config/ strictly, checks
// that the kustomization lists each of them (and nothing missing), and
// that every namespaced object is in the kustomization's namespace, so the
// manifests read the same applied with or without kustomize.
func TestManifestsParse(t *testing.T) {
	k := readKustomization(t)
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" || k.Namespace == "" {
		t.Fatalf("kustomization.yaml: apiVersion %q kind %q namespace %q", k.APIVersion, k.Kind, k.Namespace)
	}
	var files []string
	err := filepath.WalkDir(configDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if ext := filepath.Ext(path); (ext == ".yaml" || ext == ".yml") && d.Name() != "kustomization.yaml" {
			rel, err := filepath.Rel(configDir, path)
			files = append(files, filepath.ToSlash(rel))
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	listed := slices.Sorted(slices.Values(k.Resources))
	if !slices.Equal(files, listed) {
		t.Errorf("kustomization.yaml resources %v, want every manifest under config/: %v", listed, files)
	}
	kinds := map[string]int{}
	for _, f := range files {
		for _, obj := range readManifests(t, filepath.Join(configDir, f)) {
			kind := obj.GetObjectKind().GroupVersionKind().Kind
			kinds[kind]++
			switch obj.(type) {
			case *corev1.Namespace, *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *apiextensionsv1.CustomResourceDefinition:
				if obj.GetNamespace() != "" {
					t.Errorf("%s: cluster-scoped %s %s has namespace %q", f, kind, obj.GetName(), obj.GetNamespace())
				}
			default:
				if obj.GetNamespace() != k.Namespace {
					t.Errorf("%s: %s %s is in namespace %q, want %q", f, kind, obj.GetName(), obj.GetNamespace(), k.Namespace)
				}
			}
		}
	}
	for _, want := range []string{"Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding", "Deployment"} {
		if kinds[want] == 0 {
			t.Errorf("no %s under config/", want)
		}
	}
}

// manifest returns the only object of type T in the file.
func manifest[T client.Object](t *testing.T, file string) T {
	t.Helper()
	var found []T
	for _, obj := range readManifests(t, filepath.Join(configDir, file)) {
		if o, ok := obj.(T); ok {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		var zero T
		t.Fatalf("%s holds %d %T, want 1", file, len(found), zero)
	}
	return found[0]
}

// TestDeploymentMatchesBinary checks the Deployment against the binary and
// the Dockerfile: the command is the image's entrypoint, the args parse
// with the binary's own flags, the ports are those the flags bind, the
// probes name the checks newManager registers, and the pod runs as the
// ServiceAccount the bindings grant the role to.
func TestDeploymentMatchesBinary(t *testing.T) {
	dep := manifest[*appsv1.Deployment](t, "manager/manager.yaml")
	pod := dep.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]

	entrypoint, buildPkg := readDockerfile(t)
	if !slices.Equal(c.Command, entrypoint) {
		t.Errorf("command %q, want the Dockerfile's ENTRYPOINT %q", c.Command, entrypoint)
	}
	if buildPkg != "./examples/workitem/cmd/workitem-controller" {
		t.Errorf("the Dockerfile builds %q, not this binary", buildPkg)
	}

	o, err := parseFlags(c.Args, io.Discard)
	if err != nil {
		t.Fatalf("args %q do not parse with the binary's flags: %v", c.Args, err)
	}
	if !o.leaderElect {
		t.Errorf("leader election is off with args %q; two replicas would both reconcile", c.Args)
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas < 1 {
		t.Errorf("replicas %v", dep.Spec.Replicas)
	}

	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if got, want := ports["metrics"], addrPort(t, o.metricsAddr); got != want {
		t.Errorf("metrics containerPort %d, want %d (--metrics-bind-address=%s)", got, want, o.metricsAddr)
	}
	probePort := addrPort(t, o.probeAddr)
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{
		{"liveness", c.LivenessProbe, "/" + livenessCheck},
		{"readiness", c.ReadinessProbe, "/" + readinessCheck},
	} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("no HTTP %s probe", p.name)
			continue
		}
		if p.probe.HTTPGet.Path != p.path {
			t.Errorf("%s probe path %q, want %q", p.name, p.probe.HTTPGet.Path, p.path)
		}
		port := p.probe.HTTPGet.Port.IntVal
		if name := p.probe.HTTPGet.Port.StrVal; name != "" {
			port = ports[name]
		}
		if port != probePort {
			t.Errorf("%s probe port %s (%d), want %d (--health-probe-bind-address=%s)", p.name, p.probe.HTTPGet.Port.String(), port, probePort, o.probeAddr)
		}
	}

	sa := manifest[*corev1.ServiceAccount](t, "rbac/service_account.yaml")
	if pod.ServiceAccountName != sa.Name {
		t.Errorf("serviceAccountName %q, want %q", pod.ServiceAccountName, sa.Name)
	}
	bound := map[string]bool{}
	for _, obj := range readManifests(t, filepath.Join(configDir, "rbac/role_binding.yaml")) {
		var subjects []rbacv1.Subject
		var ref rbacv1.RoleRef
		switch b := obj.(type) {
		case *rbacv1.ClusterRoleBinding:
			subjects, ref = b.Subjects, b.RoleRef
		case *rbacv1.RoleBinding:
			subjects, ref = b.Subjects, b.RoleRef
		}
		for _, s := range subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Name == sa.Name && s.Namespace == sa.Namespace {
				bound[ref.Kind+"/"+ref.Name] = true
			}
		}
	}
	for _, obj := range readManifests(t, filepath.Join(configDir, "rbac/role.yaml")) {
		kind := obj.GetObjectKind().GroupVersionKind().Kind
		if !bound[kind+"/"+obj.GetName()] {
			t.Errorf("generated %s %s is not bound to ServiceAccount %s/%s", kind, obj.GetName(), sa.Namespace, sa.Name)
		}
	}

	// What the Deployment promises about the container's privileges.
	psc, sc := pod.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Error("pod does not set runAsNonRoot")
	}
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("container does not set readOnlyRootFilesystem and allowPrivilegeEscalation: false")
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("resource requests %v, want cpu and memory", c.Resources.Requests)
	}
}

// addrPort is the port of a bind address such as ":8080".
func addrPort(t *testing.T, addr string) int32 {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("bind address %q: %v", addr, err)
	}
	n, err := strconv.ParseInt(port, 10, 32)
	if err != nil || n == 0 {
		t.Fatalf("bind address %q has no fixed port", addr)
	}
	return int32(n)
}

var (
	entrypointRE = regexp.MustCompile(`(?m)^ENTRYPOINT\s+(\[.*\])\s*$`)
	buildRE      = regexp.MustCompile(`(?m)^RUN .*go build .* (\./\S+)\s*$`)
)

// readDockerfile returns the image's ENTRYPOINT (exec form) and the package
// its go build builds.
func readDockerfile(t *testing.T) (entrypoint []string, pkg string) {
	t.Helper()
	data, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	m := entrypointRE.FindSubmatch(data)
	if m == nil {
		t.Fatal("Dockerfile has no exec-form ENTRYPOINT")
	}
	if err := yaml.Unmarshal(m[1], &entrypoint); err != nil {
		t.Fatalf("Dockerfile ENTRYPOINT %s: %v", m[1], err)
	}
	b := buildRE.FindSubmatch(data)
	if b == nil {
		t.Fatal("Dockerfile has no go build")
	}
	return entrypoint, strings.TrimSpace(string(b[1]))
}
