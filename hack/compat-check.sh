#!/usr/bin/env bash
# The two ends of what racesafe supports. go.mod requires the oldest
# (controller-runtime v0.23, k8s.io v0.35), so that an operator on any
# supported minor adopts racesafe without changing minor; hack/newest.mod is
# the same module raised to the newest (controller-runtime v0.25.3, k8s.io
# v0.37), which `make test` runs the race suite on.
#
#   hack/compat-check.sh            build, vet and unit-test on the oldest
#   hack/compat-check.sh --update   regenerate hack/newest.mod and its sum
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cr=${COMPAT_CR:-v0.25.3}
if [ "${1:-}" = "--update" ]; then
	cp go.mod hack/newest.mod
	cp go.sum hack/newest.sum
	go get -modfile=hack/newest.mod "sigs.k8s.io/controller-runtime@$cr" >/dev/null
	go mod tidy -modfile=hack/newest.mod
	echo "compat-check: hack/newest.mod now requires controller-runtime $cr"
	exit 0
fi
echo "compat-check: oldest: controller-runtime $(go list -m -f '{{.Version}}' sigs.k8s.io/controller-runtime), client-go $(go list -m -f '{{.Version}}' k8s.io/client-go)"
go build ./...
go vet ./...
# Unit tests only: no control plane (integration tests skip on a folder
# without binaries), whatever CI says.
CI= KUBEBUILDER_ASSETS="$root/hack/no-control-plane" go test -count=1 ./...
