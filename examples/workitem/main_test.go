package main

import (
	"bytes"
	"os"
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
	// Never reach a real cluster from a test.
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	var stdout bytes.Buffer
	var stderr lockedBuffer // controller logs are written from every worker
	code := run([]string{"--items", "12", "--timeout", "4s"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit code %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
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
