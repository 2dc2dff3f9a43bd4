#!/usr/bin/env bash
# Micro-benchmarks of every package, -benchmem, several counts, in one run so
# each baseline sits beside what it is compared with; summarised by benchstat.
# First the 0-allocation guarantees (hack/bench-prelude.sh).
source "$(dirname "$0")/bench-prelude.sh"
count=${COUNT:-6}
go test -run '^$' -bench . -benchmem -count "$count" ./expectations/ ./statusupdate/ | tee out/bench.txt
go tool -modfile=hack/tools/go.mod benchstat out/bench.txt
