#!/usr/bin/env bash
# Micro-benchmarks of every package, -benchmem, several counts, in one run so
# each baseline sits beside what it is compared with; summarised by benchstat.
# First the 0-allocation guarantees (Tracker.Check and OwnerTracker.Check, as
# AllocsPerRun tests): a benchmark figure of 0 allocs is only reported, these fail.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
count=${COUNT:-6}
mkdir -p out
go test -count=1 -run 'DoesNotAllocate$' -v ./expectations/ | grep -E '^(=== RUN|--- |ok|FAIL)'
go test -run '^$' -bench . -benchmem -count "$count" ./expectations/ ./statusupdate/ | tee out/bench.txt
go tool -modfile=hack/tools/go.mod benchstat out/bench.txt
