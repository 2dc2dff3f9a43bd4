#!/usr/bin/env bash
# Tracker.Check against the kube-controller-manager-style cache.Store
# baseline, in one run, for typed, unstructured and metadata-only objects
# (expectations/check_forms_bench_test.go), then benchstat with the
# implementation as the column: each row is a form and a case, the baseline
# beside the Tracker with its confidence interval, so whether the two overlap
# is read off the table ("~" in the vs column: no significant difference).
# First the 0-allocation guarantees (hack/bench-prelude.sh).
#
#   COUNT=10 hack/bench-check.sh     # the default; the figures for docs
#   COUNT=3 hack/bench-check.sh      # a quick proof that it runs
#
# benchstat is a tool of hack/tools/go.mod, kept out of the library's module.
source "$(dirname "$0")/bench-prelude.sh"
count=${COUNT:-10}
go test -run '^$' -bench 'Check' -benchmem -count "$count" ./expectations/ | tee out/bench-check.txt
# Only the side-by-side benchmark has an impl key; the others (BenchmarkCheck,
# BenchmarkCheckParallel, the OwnerTracker's) stay in the file for the record.
grep -E '^(goos|goarch|pkg|cpu|BenchmarkCheckVsBaseline)' out/bench-check.txt > out/bench-check-vs.txt
go tool -modfile=hack/tools/go.mod benchstat -col /impl -row /form,/case out/bench-check-vs.txt
