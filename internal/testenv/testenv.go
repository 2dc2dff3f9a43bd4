// Package testenv starts a real kube-apiserver and etcd for the integration
// tests of racesafe, through controller-runtime's envtest, and what every
// integration test starts on it: [Start] the control plane, [Client] a
// direct client, [Namespace] a test's own namespace, [ManagerOptions] a
// manager's, [Run] a cache or manager until the test ends, [RunCache] and
// [SyncInformers] a synced cache.
//
// The binaries are built by `make envtest` into bin/k8s/<version>-<os>-<arch>/
// at the top of the checkout; KUBEBUILDER_ASSETS, when set, wins. Without them a
// test is skipped with a message naming `make envtest`, except when CI=true, where
// a missing control plane fails the test: CI must never pass by skipping.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/racesafe/racesafe/racetest"
)

// ErrNoAssets means no folder holds both kube-apiserver and etcd.
var ErrNoAssets = errors.New("no envtest binaries (kube-apiserver, etcd) found: run `make envtest`")

// AssetsDir returns the folder holding kube-apiserver and etcd:
// KUBEBUILDER_ASSETS if set, else the newest bin/k8s/*-<os>-<arch> folder of the
// checkout that contains the working directory.
func AssetsDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		if hasBinaries(dir) {
			return dir, nil
		}
		return "", fmt.Errorf("KUBEBUILDER_ASSETS=%s: %w", dir, ErrNoAssets)
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	matches, _ := filepath.Glob(filepath.Join(root, "bin", "k8s", "*-"+runtime.GOOS+"-"+runtime.GOARCH))
	for i := len(matches) - 1; i >= 0; i-- {
		if hasBinaries(matches[i]) {
			return matches[i], nil
		}
	}
	return "", ErrNoAssets
}

func hasBinaries(dir string) bool {
	for _, name := range []string{"kube-apiserver", "etcd"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// moduleRoot walks up from the working directory to the racesafe go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(data), "module github.com/racesafe/racesafe\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("racesafe checkout not found above the working directory: %w", ErrNoAssets)
		}
		dir = parent
	}
}

// Options configure the control plane a test starts.
type Options struct {
	// CRDDirectoryPaths are folders or files of CRD manifests to install.
	CRDDirectoryPaths []string
	// CRDs are CRD objects to install.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// AdmissionPlugins are admission plugins kube-apiserver enables beyond
	// its defaults (--enable-admission-plugins), such as
	// OwnerReferencesPermissionEnforcement. None when empty.
	AdmissionPlugins []string
}

// NewEnvironment returns an envtest.Environment on the binaries in dir. Its
// etcd skips fsync: the data is thrown away with the control plane, and
// fsync on a shared VM disk would otherwise set the pace of every write.
func NewEnvironment(dir string, opts Options) *envtest.Environment {
	env := &envtest.Environment{
		BinaryAssetsDirectory: dir,
		CRDDirectoryPaths:     opts.CRDDirectoryPaths,
		CRDs:                  opts.CRDs,
		ErrorIfCRDPathMissing: len(opts.CRDDirectoryPaths) > 0,
	}
	env.ControlPlane.Etcd = &envtest.Etcd{}
	env.ControlPlane.Etcd.Configure().Append("unsafe-no-fsync", "true")
	if len(opts.AdmissionPlugins) > 0 {
		env.ControlPlane.APIServer = &envtest.APIServer{}
		env.ControlPlane.APIServer.Configure().Append("enable-admission-plugins", strings.Join(opts.AdmissionPlugins, ","))
	}
	return env
}

// Env is a running control plane.
type Env struct {
	// Config reaches the API server as an administrator.
	Config      *rest.Config
	Environment *envtest.Environment
}

// Start starts a control plane for t and stops it when t ends. It skips t when
// the binaries are missing, or fails t when CI=true. It returns once every
// CRD it installed is served.
func Start(tb testing.TB, opts Options) *Env {
	tb.Helper()
	env := NewEnvironment(assets(tb), opts)
	return start(tb, env, env.Stop)
}

// StartRestartable starts a control plane as Start does, whose kube-apiserver
// the returned restarter stops and starts again on the same etcd, with the
// same address and certificates (racetest.NewAPIServerRestarter), kept in a
// folder of tb's. It is stopped when tb ends through the restarter, to which a
// process killed after its short stop timeout is stopped all the same.
func StartRestartable(tb testing.TB, opts Options) (*Env, *racetest.APIServerRestarter) {
	tb.Helper()
	env := NewEnvironment(assets(tb), opts)
	restarter, err := racetest.NewAPIServerRestarter(env, racetest.APIServerRestartOptions{CertDir: tb.TempDir()})
	if err != nil {
		tb.Fatalf("restartable envtest: %v", err)
	}
	return start(tb, env, restarter.Stop), restarter
}

// assets returns the folder of the binaries, or skips tb (fails it when
// CI=true).
func assets(tb testing.TB) string {
	tb.Helper()
	dir, err := AssetsDir()
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("integration test needs a control plane under CI=true: %v", err)
		}
		tb.Skipf("skipping integration test: %v", err)
	}
	return dir
}

func start(tb testing.TB, env *envtest.Environment, stop func() error) *Env {
	tb.Helper()
	cfg, err := env.Start()
	if err != nil {
		tb.Fatalf("start envtest from %s: %v", env.BinaryAssetsDirectory, err)
	}
	tb.Cleanup(func() {
		if err := stop(); err != nil {
			tb.Errorf("stop envtest: %v", err)
		}
	})
	waitServed(tb, cfg, env.CRDs)
	return &Env{Config: cfg, Environment: env}
}

// waitServed waits until a List of each served version of crds succeeds:
// envtest returns once discovery shows a CRD, and a List of it can still
// fail for a moment after. Its connections are closed when it returns, so
// no goroutine of theirs outlives the test.
func waitServed(tb testing.TB, cfg *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition) {
	tb.Helper()
	if len(crds) == 0 {
		return
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		tb.Fatalf("http client: %v", err)
	}
	defer utilnet.CloseIdleConnectionsFor(hc.Transport)
	c, err := client.New(cfg, client.Options{HTTPClient: hc})
	if err != nil {
		tb.Fatalf("client: %v", err)
	}
	for _, crd := range crds {
		listKind := crd.Spec.Names.ListKind
		if listKind == "" {
			listKind = crd.Spec.Names.Kind + "List"
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: listKind})
			err := wait.PollUntilContextTimeout(tb.Context(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				return c.List(ctx, list) == nil, nil
			})
			if err != nil {
				tb.Fatalf("%s not served: %v", list.GroupVersionKind(), err)
			}
		}
	}
}
