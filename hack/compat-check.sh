#!/usr/bin/env bash
# The two ends of what racesafe supports. go.mod requires the oldest
# (controller-runtime v0.23, k8s.io v0.35), so that an operator on any
# supported minor adopts racesafe without changing minor; hack/newest.mod is
# the same module raised to the newest (controller-runtime v0.25.3, k8s.io
# v0.37), which `make test` runs the race suite on.
#
#   hack/compat-check.sh            build, vet and unit-test on the oldest, and
#                                   with KUBEBUILDER_ASSETS the integration
#                                   tests of expectations and wire there
#                                   (client-go v0.35 has no store version:
#                                   the owner check takes another path)
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
# The owner check reads the store's resourceVersion where client-go has it
# (v0.36+) and its handler's per-namespace versions where not (v0.35): the
# race suite runs on the newest, so the second path gets its real API
# server here. Without binaries they skip, as everywhere.
if [ -n "${KUBEBUILDER_ASSETS:-}" ] && [ -x "$KUBEBUILDER_ASSETS/kube-apiserver" ]; then
	echo "compat-check: oldest: integration tests of expectations and wire on envtest"
	go test -count=1 ./expectations/ ./wire/
fi
