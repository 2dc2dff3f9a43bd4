#!/usr/bin/env bash
# Micro-benchmarks of every package, -benchmem, several counts, in one run so
# each baseline sits beside what it is compared with; summarised by benchstat.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
count=${COUNT:-6}
mkdir -p out
go test -run '^$' -bench . -benchmem -count "$count" ./expectations/ ./statusupdate/ | tee out/bench.txt
go tool benchstat out/bench.txt
