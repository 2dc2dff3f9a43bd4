package testenv

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
)

func TestOlder(t *testing.T) {
	for _, c := range []struct {
		v, w string
		want bool
	}{
		{"v0.23.3", "v0.25.3", true},
		{"v0.25.2", "v0.25.3", true},
		{"v0.24.9", "v0.25.0", true},
		{"v0.25.3", "v0.25.3", false},
		{"v0.25.4", "v0.25.3", false},
		{"v1.0.0", "v0.25.3", false},
		{"v0.25.3-rc.1", "v0.25.3", false},
		{"v0.23.3+incompatible", "v0.25.3", true},
		{"", "v0.25.3", false},
		{"(devel)", "v0.25.3", false},
		{"v0.25", "v0.25.3", false},
		{"v0.x.1", "v0.25.3", false},
	} {
		if got := older(c.v, c.w); got != c.want {
			t.Errorf("older(%q, %q) = %v, want %v", c.v, c.w, got, c.want)
		}
	}
}

func TestLeakOptionsIgnoreThePriorityQueueOnlyBeforeTheFix(t *testing.T) {
	base := len(leakOptions(PriorityQueueFixed))
	if base != 1 {
		t.Errorf("with the fix: %d options, want 1 (the filtered watch only)", base)
	}
	if got := len(leakOptions("v0.23.3")); got != base+len(priorityQueueGoroutines) {
		t.Errorf("before the fix: %d options, want %d", got, base+len(priorityQueueGoroutines))
	}
	if got := len(leakOptions("")); got != base {
		t.Errorf("an unknown version: %d options, want %d (strict)", got, base)
	}
}

func TestVersionInPath(t *testing.T) {
	const prefix = "sigs.k8s.io/controller-runtime@"
	for file, want := range map[string]string{
		"/root/go/pkg/mod/sigs.k8s.io/controller-runtime@v0.23.3/pkg/manager/manager.go": "v0.23.3",
		"sigs.k8s.io/controller-runtime@v0.25.3/pkg/manager/manager.go":                  "v0.25.3",
		"/src/vendor/sigs.k8s.io/controller-runtime/pkg/manager/manager.go":              "",
		"": "",
	} {
		if got := versionInPath(file, prefix); got != want {
			t.Errorf("versionInPath(%q) = %q, want %q", file, got, want)
		}
	}
}

func TestControllerRuntimeVersionReadsTheTestBinary(t *testing.T) {
	// From the module cache, as go test builds this package: a release.
	v := controllerRuntimeVersion()
	if _, err := version.ParseSemantic(v); err != nil {
		t.Fatalf("controller-runtime version %q is not a release", v)
	}
	t.Logf("linked controller-runtime %s", v)
}
