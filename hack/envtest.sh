#!/usr/bin/env bash
# Builds the etcd and kube-apiserver binaries that controller-runtime's envtest
# starts, from the Go module proxy, into bin/k8s/<version>-<os>-<arch>/.
# Prebuilt envtest binaries cannot be downloaded on this project's machines.
#
# Prints the folder to export as KUBEBUILDER_ASSETS on its last line of stdout;
# progress goes to stderr. A KUBEBUILDER_ASSETS that already holds both
# binaries wins, and a second run with the binaries in place builds nothing.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
k8s_version=1.37.2
etcd_version=3.6.16

if [ -n "${KUBEBUILDER_ASSETS:-}" ] &&
	[ -x "$KUBEBUILDER_ASSETS/kube-apiserver" ] && [ -x "$KUBEBUILDER_ASSETS/etcd" ]; then
	echo "envtest: using KUBEBUILDER_ASSETS from the environment" >&2
	echo "$KUBEBUILDER_ASSETS"
	exit 0
fi

out="$root/bin/k8s/$k8s_version-$(go env GOOS)-$(go env GOARCH)"
mkdir -p "$out"

# Build into a temporary name and rename, so an interrupted build never leaves
# a half-written binary that a later run would take as done.
if [ ! -x "$out/etcd" ]; then
	echo "envtest: building etcd v$etcd_version (about 1 minute)" >&2
	(cd "$root/hack/envtest/etcd" && go build -trimpath -o "$out/etcd.tmp" .)
	mv "$out/etcd.tmp" "$out/etcd"
fi

if [ ! -x "$out/kube-apiserver" ]; then
	echo "envtest: building kube-apiserver v$k8s_version (about 5 minutes on 2 cores)" >&2
	v=k8s.io/component-base/version
	ldflags="-s -w -X $v.gitVersion=v$k8s_version -X $v.gitMajor=${k8s_version%%.*}"
	minor=${k8s_version#*.}
	ldflags="$ldflags -X $v.gitMinor=${minor%%.*} -X $v.gitTreeState=clean"
	(cd "$root/hack/envtest/kube-apiserver" &&
		go build -trimpath -ldflags "$ldflags" -o "$out/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver)
	mv "$out/kube-apiserver.tmp" "$out/kube-apiserver"
fi

echo "envtest: binaries in $out" >&2
echo "$out"
