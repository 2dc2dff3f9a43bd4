# Sourced by hack/bench.sh and hack/bench-check.sh, first: strict mode, the
# repository's root as the working directory, out/ for the results, and the
# 0-allocation guarantees (Tracker.Check and OwnerTracker.Check, as
# AllocsPerRun tests), which fail where a benchmark's 0 allocs is only
# reported. No figures are taken if they fail.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p out
go test -count=1 -run 'DoesNotAllocate$' -v ./expectations/ | grep -E '^(=== RUN|--- |ok|FAIL)'
