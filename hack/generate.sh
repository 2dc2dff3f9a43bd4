#!/usr/bin/env bash
# Regenerates deep-copy code, CRD manifests and the controller's RBAC role
# (from the +kubebuilder:rbac markers of the packages the deployable binary
# runs) with controller-gen (a Go tool declared in hack/tools/go.mod). With --verify,
# fails when the committed files differ from what generation writes, and
# leaves the tree as it was.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
api=examples/workitem/api/v1alpha1
crds=examples/workitem/config/crd
rbac=examples/workitem/config/rbac
# The packages whose +kubebuilder:rbac markers make the role: the two
# controllers the deployable binary runs, and the binary (leader election).
rbac_paths="{./examples/workitem/reconciler,./examples/workitem/ported,./examples/workitem/cmd/workitem-controller}"

if [ ! -d "$api" ]; then
	echo "generate: no API types yet ($api)"
	exit 0
fi

run() {
	go tool -modfile=hack/tools/go.mod controller-gen object paths="./$api/..."
	go tool -modfile=hack/tools/go.mod controller-gen crd paths="./$api/..." output:crd:artifacts:config="$1"
	go tool -modfile=hack/tools/go.mod controller-gen rbac:roleName=manager-role paths="$rbac_paths" output:rbac:artifacts:config="$2"
}

if [ "${1:-}" = "--verify" ]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	cp "$api/zz_generated.deepcopy.go" "$tmp/deepcopy.go" 2>/dev/null || true
	run "$tmp/crd" "$tmp/rbac"
	status=0
	if ! git diff --quiet -- "$api/zz_generated.deepcopy.go"; then
		echo "generate: $api/zz_generated.deepcopy.go is out of date: run make generate" >&2
		git --no-pager diff --stat -- "$api/zz_generated.deepcopy.go" >&2
		cp "$tmp/deepcopy.go" "$api/zz_generated.deepcopy.go" 2>/dev/null || true
		status=1
	fi
	if ! diff -r "$tmp/crd" "$crds" >&2; then
		echo "generate: $crds is out of date: run make generate" >&2
		status=1
	fi
	# config/rbac also holds hand-written manifests: compare the generated file only.
	if ! diff "$tmp/rbac/role.yaml" "$rbac/role.yaml" >&2; then
		echo "generate: $rbac/role.yaml is out of date: run make generate" >&2
		status=1
	fi
	[ $status -eq 0 ] && echo "generate: generated files are up to date"
	exit $status
fi

run "$crds" "$rbac"
echo "generate: wrote $api/zz_generated.deepcopy.go, $crds and $rbac/role.yaml"
