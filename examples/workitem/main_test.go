package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/racesafe/racesafe/internal/testenv"
)

// TestDemo runs the demo end to end, as `make demo` does, on a few items.
func TestDemo(t *testing.T) {
	if _, err := testenv.AssetsDir(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("demo needs a control plane under CI=true: %v", err)
		}
		t.Skipf("skipping the demo: %v", err)
	}
	// The demo must never read KUBECONFIG: point it, and the in-cluster
	// variables, at a loopback port where nothing listens. A demo that used
	// them would fail to reach its API server.
	t.Setenv("KUBECONFIG", unreachableKubeconfig(t))
	t.Setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "1")
	var stdout bytes.Buffer
	var stderr lockedBuffer // controller logs are written from every worker
	code := run([]string{"--items", "12", "--timeout", "4s"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit code %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "starting an embedded control plane") {
		t.Errorf("the demo did not start its embedded control plane:\n%s", stderr.String())
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(stdout.String(), "\n") {
		if f := strings.Fields(line); len(f) >= 4 {
			rows[f[0]] = f
		}
	}
	// columns: controller items deleted stuck dup-children left-children dup-uninstalls ...
	if r := rows["naive"]; r == nil || r[3] == "0" || r[4] == "0" {
		t.Errorf("naive row %v: want items stuck and duplicate children\n%s", r, stdout.String())
	}
	if r := rows["racesafe"]; r == nil || r[2] != "12" || r[3] != "0" || r[4] != "0" || r[5] != "0" || r[6] != "0" {
		t.Errorf("racesafe row %v: want 12 deleted, 0 stuck, no duplicate or left child, no duplicate uninstall\n%s", r, stdout.String())
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestDemoRejectsUnknownController(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--controller", "other"}, &stdout, &stderr); code != 2 {
		t.Fatalf("exit code %d, want 2", code)
	}
	if !strings.Contains(stderr.String(), "--controller must be") {
		t.Fatalf("stderr %q does not say what --controller takes", stderr.String())
	}
}

// unreachableKubeconfig writes a kubeconfig whose only cluster is a loopback
// port where nothing listens.
func unreachableKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	const cfg = `apiVersion: v1
kind: Config
clusters:
- name: nowhere
  cluster:
    server: https://127.0.0.1:1
contexts:
- name: nowhere
  context:
    cluster: nowhere
    user: nobody
current-context: nowhere
users:
- name: nobody
  user:
    token: not-a-token
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestClusterModeOnlyOnTheFlag: --cluster, and nothing else, leaves the
// demo for a real cluster, and says which cluster before it writes.
func TestClusterModeOnlyOnTheFlag(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "missing"))
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--cluster"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "--cluster: no cluster config") {
		t.Fatalf("--cluster with a missing kubeconfig: exit %d, stderr %q; want 1 and the config error", code, stderr.String())
	}
}
