#!/usr/bin/env bash
# Runs racesafe's whole test suite against the newest controller-runtime it
# supports. go.mod requires the oldest (v0.23, k8s.io v0.35) so that an
# operator on any supported minor can adopt racesafe without being moved;
# `make test` runs the suite on those, and this script on a copy of the
# checkout whose go.mod is raised to the newest (COMPAT_CR, v0.25.3 by
# default, and the k8s.io modules it selects).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cr=${COMPAT_CR:-v0.25.3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$root"
git ls-files -z --cached --others --exclude-standard | grep -zv '^bin/' | xargs -0 cp --parents -t "$tmp" 2>/dev/null || true
cd "$tmp"
go get "sigs.k8s.io/controller-runtime@$cr" >/dev/null 2>&1
go mod tidy >/dev/null 2>&1
echo "compat-check: controller-runtime $(go list -m -f '{{.Version}}' sigs.k8s.io/controller-runtime), client-go $(go list -m -f '{{.Version}}' k8s.io/client-go)"
go build ./...
go vet ./...
# The control plane of the checkout; the copy has no bin/.
export KUBEBUILDER_ASSETS=${KUBEBUILDER_ASSETS:-$("$root/hack/envtest.sh" | tail -n 1)}
go test -count=1 ./...
