# cdclake — build, run, test.
GO        ?= go
PYTHON    ?= python3
VENV      := .venv
VPY       := $(VENV)/bin/python
FUZZTIME  ?= 10s
LAKE      ?= ./lake

# The real-services harness (infra/README.md): infra-up, infra-down,
# e2e-real, verify-capture, ... Included after `all`, which stays the default.
.DEFAULT_GOAL := all
include Makefile.infra

.PHONY: all build run test fuzz bench bench-go bench-land bench-claim bench-metrics vet pyenv clean e2e docs image image-test \
	k8s-validate k8s-e2e k8s-down

all: build

# The version and commit the binary reports (cdclake version, the
# cdclake_build_info metric).
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/cdclake ./cmd/cdclake
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/cdclake-lakehouse ./cmd/cdclake-lakehouse

# Lands the bundled sample streams into ./lake and prints the summary.
run: build
	rm -rf $(LAKE)
	./bin/cdclake run --source testdata/samples --sink $(LAKE) --config config/example.yaml

# Python with DuckDB, used by the tests to read the lake back.
pyenv: $(VENV)/.ok
$(VENV)/.ok: testdata/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q --disable-pip-version-check -r testdata/requirements.txt
	touch $@

vet:
	$(GO) vet ./...
	cd bench/writers && $(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1)

# The test command: static checks, unit and golden tests under the race
# detector, and the end-to-end tests that run the binary and read the lake
# back with DuckDB.
test: vet pyenv
	CDCLAKE_PYTHON=$(CURDIR)/$(VPY) CDCLAKE_REQUIRE_DUCKDB=1 $(GO) test -race -count=1 ./...

# Every fuzz target in the tree (each decoder's, the unwrap stage's, the
# decimal converters'), each for FUZZTIME. A failure fails the run, except
# Go 1.26's coordinator race at the end of -fuzztime (go.dev/issue/75804,
# fixed in Go 1.27): a bare "context deadline exceeded" with no failing
# input written is run once more, and reported as a warning if it recurs.
fuzz:
	@set -e; for dir in $$(grep -l '^func Fuzz' $$(git ls-files '*_test.go') | xargs -n1 dirname | sort -u); do \
		for target in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go | cut -c6-); do \
			for attempt in 1 2; do \
				echo "fuzz $$target ./$$dir"; \
				if out=$$($(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) ./$$dir 2>&1); then echo "$$out" | tail -n 1; break; fi; \
				echo "$$out" | tail -n 20; \
				if echo "$$out" | grep -q 'Failing input written' || ! echo "$$out" | grep -q 'context deadline exceeded'; then exit 1; fi; \
				if [ $$attempt = 2 ]; then echo "WARNING: $$target: the fuzz engine's deadline race again (go.dev/issue/75804), no failing input"; fi; \
			done; \
		done; \
	done

# End to end on real services (CI runs it after test and fuzz): installs and
# starts Kafka, Connect + Debezium, PostgreSQL and versitygw from nothing
# (downloads cached in $CDCLAKE_CACHE), lands a real capture with cdclake into
# S3, verifies it with DuckDB and Spark, and stops every service.
e2e: pyenv e2e-real

# The landing benchmark (bench/bench.py): deterministic streams from
# cmd/cdcgen (Debezium with and without schemas, GoldenGate Data Streams;
# BENCH_EVENTS changes over BENCH_TABLES tables each) landed by the real
# binary under GOMAXPROCS=1 and 2 and by DuckDB (one thread) on the same
# files. Prints one table and writes it to bench/RESULTS.md.
BENCH_EVENTS ?= 100000
BENCH_TABLES ?= 24
BENCH_RUNS   ?= 1
bench: build pyenv
	$(GO) build -o bin/cdcgen ./cmd/cdcgen
	$(VPY) bench/bench.py --cdclake bin/cdclake --cdcgen bin/cdcgen --events $(BENCH_EVENTS) \
		--tables $(BENCH_TABLES) --runs $(BENCH_RUNS)

# What the metrics endpoint costs the landing, in instructions (valgrind's
# callgrind, which counts the same from run to run): a generated stream of
# 100,000 changes (the streams of make bench) landed with the metrics off
# and on, Debezium and GoldenGate.
# The claim of a partition whose state names 10,000 files, on the S3 server.
bench-claim:
	infra/bench-claim.sh

bench-metrics: build
	$(GO) build -o bin/cdcgen ./cmd/cdcgen
	bench/metrics-cost.sh bin/cdclake bin/cdcgen 100000 debezium
	bench/metrics-cost.sh bin/cdclake bin/cdcgen 100000 goldengate

# The Go micro-benchmarks of every stage; the Parquet writer comparison
# (pqarrow against parquet-go) checks its outputs first.
bench-go:
	cd bench/writers && CDCLAKE_COMPARE=1 $(GO) test -run 'TestCompareWriters' . && $(GO) test -run '^$$' -bench . -benchmem .
	$(GO) test -run '^$$' -bench . -benchmem ./...

# Lands a generated stream of 200,000 mixed changes over 50 tables, prints
# events/s and peak RSS, and checks the lake with DuckDB.
LAND_EVENTS ?= 200000
LAND_TABLES ?= 50
bench-land: build pyenv
	$(GO) build -o bin/cdcgen ./cmd/cdcgen
	rm -rf /tmp/cdclake-bench && ./bin/cdcgen --out /tmp/cdclake-bench --events $(LAND_EVENTS) --tables $(LAND_TABLES)
	/usr/bin/time -f 'peak RSS %M KiB, %e s wall, %U s user' ./bin/cdclake run --source /tmp/cdclake-bench/stream.ndjson \
		--sink /tmp/cdclake-bench/lake --config testdata/bench/config.yaml
	$(VPY) testdata/e2e/verify.py /tmp/cdclake-bench/lake /tmp/cdclake-bench/expected.json | tail -1

# The OCI image, built without a container engine (infra/image/build.sh):
# bin/cdclake.oci.tar, named $(IMAGE_NAME) (docker.io/cdclake/cdclake:$(VERSION)
# unless given); the same
# digest every time from the same commit. image-test builds it twice and
# checks both.
IMAGE      ?= bin/cdclake.oci.tar
IMAGE_NAME ?= docker.io/cdclake/cdclake:$(VERSION)
image:
	VERSION=$(VERSION) COMMIT=$(COMMIT) infra/image/build.sh $(IMAGE) $(IMAGE_NAME)

image-test:
	infra/image/test.sh

# Kubernetes (infra/k8s, docs/kubernetes.md). k8s-validate applies every
# manifest of deploy/kubernetes to a real API server (built from the Go
# module proxy, cached) with --dry-run=server --validate=strict, and checks
# that the broken ones are refused; k8s-e2e runs cdclake as pods on a real
# single-node cluster against Kafka and the S3 server of infra/. Both tear
# down what they start; k8s-down cleans up after an interrupted run.
k8s-validate:
	infra/k8s/validate.sh

k8s-e2e:
	infra/k8s/e2e.sh

k8s-down:
	infra/k8s/down.sh

# docs/configuration.md from the code's key list (config.Keys); a test
# fails when they differ.
docs:
	$(GO) test ./config -run TestConfigurationDoc -update

clean:
	rm -rf bin $(LAKE) $(VENV)
