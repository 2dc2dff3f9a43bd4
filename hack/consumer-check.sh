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
