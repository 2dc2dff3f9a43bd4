# racesafe: `make demo` runs the incident demo, `make test` runs every check CI runs.
SHELL := /usr/bin/env bash
GO ?= go
# The folder holding kube-apiserver and etcd; built on first use.
ASSETS = $(shell hack/envtest.sh | tail -n 1)

.PHONY: all test demo bench bench-e2e soak envtest generate verify-generated vet fmt-check consumer-check unit

all: test

## envtest: build kube-apiserver and etcd from the Go module proxy (once) and print their folder.
envtest:
	@hack/envtest.sh

## test: everything CI runs: generated files, vet, gofmt, the consumer check, the unit tests on
## the oldest versions go.mod requires, then go test -race on the newest (hack/newest.mod), each
## test twice in shuffled order, so no test depends on process-wide totals or order; racesafe
## vet's own tests.
test: envtest verify-generated vet fmt-check consumer-check compat-check
	$(GO) vet -modfile=hack/newest.mod ./...
	KUBEBUILDER_ASSETS="$(ASSETS)" $(GO) test -modfile=hack/newest.mod -race -count=2 -shuffle=on ./...
	cd vet && $(GO) vet ./... && $(GO) test -race -count=1 ./...

## compat-check: build, vet and unit-test on the oldest versions go.mod requires (controller-runtime v0.23), and the integration tests of expectations and wire there.
.PHONY: compat-check
compat-check:
	KUBEBUILDER_ASSETS="$(ASSETS)" hack/compat-check.sh

## unit: go test without a control plane (integration tests skip).
unit:
	$(GO) test -race -count=2 -shuffle=on ./...

## demo: the incident, naive controller then racesafe, on an embedded control plane.
demo: envtest
	KUBEBUILDER_ASSETS="$(ASSETS)" $(GO) run ./examples/workitem $(ARGS)

## bench: micro-benchmarks of every package, summarised by benchstat.
bench:
	hack/bench.sh

## bench-scale: the expectations stores at 1,000-100,000 pending and 10,000 owners x 10 children, beside kcm- and KEP-5647-style stores: time, bytes held, the sweep; one table.
.PHONY: bench-scale
bench-scale:
	mkdir -p out
	$(GO) test -run '^$$' -bench 'Scale' -benchmem -count $${COUNT:-6} ./expectations/ | tee out/bench-scale.txt
	$(GO) tool -modfile=hack/tools/go.mod benchstat -col /impl -row .name,/pending,/owners,/op out/bench-scale.txt

## bench-e2e: API capacity calibration, then the delete burst through every controller on one control plane.
## On the newest versions (hack/newest.mod): the naive+ryw peer needs controller-runtime v0.25.
bench-e2e: envtest
	KUBEBUILDER_ASSETS="$(ASSETS)" $(GO) run -modfile=hack/newest.mod ./examples/workitem/bench $(ARGS)

## soak: churn under every fault at once: lag jitter, client faults, ambiguous writes, broken watches, leader failovers, API server restarts (default 5 minutes).
soak: envtest
	KUBEBUILDER_ASSETS="$(ASSETS)" $(GO) run ./examples/workitem/bench --soak $(ARGS)

## check-histories: the history checker's long run (racetest.CheckHistories): HISTORIES histories (default 10000), PARALLEL at a time (default 3), per subject
## of SUBJECTS (comma-separated; default all: cache, racesafe, controller-runtime-ryw[-multi-namespace|-label-selected]),
## on the newest versions; a table per subject and rule, a shrunk reproducer per rule broken.
.PHONY: check-histories
check-histories: envtest
	cd racetest && KUBEBUILDER_ASSETS="$(ASSETS)" RACESAFE_CHECK_HISTORIES=$${HISTORIES:-10000} RACESAFE_CHECK_PARALLEL=$${PARALLEL:-3} RACESAFE_CHECK_SUBJECTS=$${SUBJECTS:-} \
		$(GO) test -modfile=../hack/newest.mod -run '^TestCheckHistoriesLong$$' -v -timeout 0 -count=1 .

## generate: deep-copy code and CRD manifests through controller-gen.
generate:
	hack/generate.sh

## verify-generated: fail when generated files differ from what `make generate` writes.
verify-generated:
	hack/generate.sh --verify

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

## consumer-check: a fresh module that requires racesafe imports every public package and builds.
consumer-check:
	hack/consumer-check.sh
