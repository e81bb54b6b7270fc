# cdclake — build, run, test.
GO        ?= go
PYTHON    ?= python3
VENV      := .venv
VPY       := $(VENV)/bin/python
FUZZTIME  ?= 10s
LAKE      ?= ./lake

.PHONY: all build run test unit e2e fuzz bench vet fmt pyenv clean

all: build

build:
	$(GO) build -o bin/cdclake ./cmd/cdclake

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
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1)

# The test command: static checks, unit and golden tests, and the end-to-end
# test that runs the binary and reads the lake back with DuckDB.
test: vet pyenv
	CDCLAKE_PYTHON=$(CURDIR)/$(VPY) CDCLAKE_REQUIRE_DUCKDB=1 $(GO) test -count=1 ./...

# Each decoder's fuzz target for FUZZTIME.
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDataStreams$$' -fuzztime $(FUZZTIME) ./handlers/decode/goldengate/
	$(GO) test -run '^$$' -fuzz '^FuzzBigData$$' -fuzztime $(FUZZTIME) ./handlers/decode/goldengate/
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./handlers/decode/debezium/
	$(GO) test -run '^$$' -fuzz '^FuzzUnwrap$$' -fuzztime $(FUZZTIME) ./handlers/unwrap/

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf bin $(LAKE) $(VENV)
