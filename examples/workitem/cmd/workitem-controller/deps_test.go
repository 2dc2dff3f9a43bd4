package main

import (
	"os/exec"
	"strings"
	"testing"
)

// testOnly are import paths, or prefixes ending in "/", that only tests
// should link: the binary that is deployed must not carry an API server
// harness, fault injection or the testing package (issue 24: the demo's
// binary links them and weighs 40% more than a minimal operator).
// k8s.io/client-go/testing is not listed: client-go's own gentype links it
// into every typed client, so every operator carries it.
var testOnly = []string{
	"testing",
	"testing/",
	"net/http/httptest",
	"sigs.k8s.io/controller-runtime/pkg/envtest",
	"sigs.k8s.io/controller-runtime/pkg/envtest/",
	"sigs.k8s.io/controller-runtime/pkg/client/fake",
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor",
	"k8s.io/utils/clock/testing",
	"go.uber.org/goleak",
	"github.com/google/go-cmp/",
	"github.com/onsi/",
	"github.com/stretchr/testify/",
	"github.com/racesafe/racesafe/racetest",
	"github.com/racesafe/racesafe/racetest/",
	"github.com/racesafe/racesafe/internal/testenv",
	"github.com/racesafe/racesafe/examples/workitem/scenario",
	"github.com/racesafe/racesafe/examples/workitem/bench",
}

// TestBinaryLinksNoTestCode lists what the binary links (go list -deps, as
// go build sees it: no _test.go files) and fails on any test-only package.
func TestBinaryLinksNoTestCode(t *testing.T) {
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list -deps: %v\n%s", err, stderr)
	}
	deps := strings.Fields(string(out))
	// A broken listing would pass vacuously: the binary links
	// controller-runtime and the racesafe reconciler.
	for _, want := range []string{"sigs.k8s.io/controller-runtime", "github.com/racesafe/racesafe/examples/workitem/reconciler"} {
		if !contains(deps, want) {
			t.Fatalf("go list -deps does not show %s; the listing is broken:\n%s", want, out)
		}
	}
	for _, dep := range deps {
		if bad := testOnlyMatch(dep); bad != "" {
			t.Errorf("the binary links %s (test-only: %s)", dep, bad)
		}
	}
}

func testOnlyMatch(pkg string) string {
	for _, p := range testOnly {
		if pkg == p || (strings.HasSuffix(p, "/") && strings.HasPrefix(pkg, p)) {
			return p
		}
	}
	return ""
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
