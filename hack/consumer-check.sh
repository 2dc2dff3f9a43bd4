#!/usr/bin/env bash
# Proves racesafe works as a dependency: a fresh module outside the checkout
# requires github.com/racesafe/racesafe (replaced by this checkout), imports every
# public package, and builds.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

pkgs=$(cd "$root" && go list ./... | grep -v -e '/internal/' -e '/examples/' -e '/hack/')
{
	echo '// Command consumer imports every public racesafe package.'
	echo 'package main'
	echo
	echo 'import ('
	for p in $pkgs; do echo "	_ \"$p\""; done
	echo ')'
	echo
	echo 'func main() {}'
} >"$tmp/main.go"

cd "$tmp"
go mod init example.com/consumer >/dev/null 2>&1
go mod edit -require=github.com/racesafe/racesafe@v0.0.0 -replace=github.com/racesafe/racesafe="$root"
cp "$root/go.sum" go.sum
go mod tidy >/dev/null
go build -o /dev/null .
echo "consumer-check: a fresh module imported $(echo "$pkgs" | wc -l) packages and built"

# The module graph a dependency costs: a consumer that imports only
# expectations must select nothing beyond what a consumer of
# controller-runtime alone (its root package, which every operator imports)
# selects: the same modules, at the same versions, apart from racesafe
# itself. Tools live in hack/tools/go.mod for this.
graph() { # $1: import path; prints the selected modules, one "path version" a line
	local dir
	dir=$(mktemp -d "$tmp/graph.XXXX")
	printf 'package main\n\nimport _ "%s"\n\nfunc main() {}\n' "$1" >"$dir/main.go"
	(
		cd "$dir"
		go mod init example.com/graph >/dev/null 2>&1
		go mod edit -require=github.com/racesafe/racesafe@v0.0.0 -replace=github.com/racesafe/racesafe="$root"
		cp "$root/go.sum" go.sum
		cr=$(cd "$root" && go list -m -f '{{.Version}}' sigs.k8s.io/controller-runtime)
		go mod edit -require=sigs.k8s.io/controller-runtime@"$cr"
		go mod tidy >/dev/null 2>&1
		go list -m all | grep -v '^example.com/graph$'
	)
}
graph sigs.k8s.io/controller-runtime | sort >"$tmp/cr.txt"
graph github.com/racesafe/racesafe/expectations | grep -v '^github.com/racesafe/racesafe ' | sort >"$tmp/racesafe.txt"
# A module absent from controller-runtime's graph, or at a higher version, is
# extra; a lower one (graph pruning leaves some of controller-runtime's own
# test dependencies at an older version) is not.
extra=$(while read -r mod ver; do
	crver=$(awk -v m="$mod" '$1 == m { print $2 }' "$tmp/cr.txt")
	if [ -z "$crver" ]; then
		echo "$mod $ver (not in controller-runtime's graph)"
	elif [ "$crver" != "$ver" ] && [ "$(printf '%s\n%s\n' "$crver" "$ver" | sort -V | tail -n 1)" = "$ver" ]; then
		echo "$mod $ver (controller-runtime alone selects $crver)"
	fi
done <"$tmp/racesafe.txt")
if [ -n "$extra" ]; then
	echo "consumer-check: importing expectations selects modules (or versions) that controller-runtime alone does not:" >&2
	echo "$extra" >&2
	exit 1
fi
echo "consumer-check: importing expectations adds no module and raises no version beyond controller-runtime's graph ($(wc -l <"$tmp/cr.txt") modules)"

# The oldest controller-runtime minor racesafe claims: a consumer on v0.23
# that adds racesafe stays on v0.23 and builds.
dir=$(mktemp -d "$tmp/old.XXXX")
printf 'package main\n\nimport (\n\t_ "github.com/racesafe/racesafe/expectations"\n\t_ "github.com/racesafe/racesafe/wire"\n\t_ "sigs.k8s.io/controller-runtime"\n)\n\nfunc main() {}\n' >"$dir/main.go"
(
	cd "$dir"
	go mod init example.com/old >/dev/null 2>&1
	go mod edit -require=sigs.k8s.io/controller-runtime@v0.23.2
	go mod edit -require=github.com/racesafe/racesafe@v0.0.0 -replace=github.com/racesafe/racesafe="$root"
	go mod tidy >/dev/null 2>&1
	got=$(go list -m -f '{{.Version}}' sigs.k8s.io/controller-runtime)
	case "$got" in
	v0.23.*) ;;
	*)
		echo "consumer-check: a consumer on controller-runtime v0.23.2 was moved to $got by racesafe" >&2
		exit 1
		;;
	esac
	go build -o /dev/null .
	echo "consumer-check: a consumer on controller-runtime v0.23.2 adds racesafe, stays on $got and builds"
)
