# Quick start: `make serve`, `make test`, `make bench`. Every target installs missing Debian packages first.
# Extra SwiftPM flags go in SWIFTPM_FLAGS, e.g. `make test SWIFTPM_FLAGS="--scratch-path /tmp/build"`.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

SWIFT ?= swift
SWIFTPM_FLAGS ?=
DATA ?= ./cloudlet-data
BENCH_ARGS ?=
# `make test` shows its output and keeps a copy here.
TEST_LOG ?= .build/logs/test.log

.PHONY: deps build test test-browser test-http-fuzz test-release sim serve bench bench-quick bench-http fuzz fuzz-quick

deps:
	.ci/install-deps

build: deps
	$(SWIFT) build $(SWIFTPM_FLAGS)

# The tests that start a real etcd (every Cluster*Tests suite: processes, leases of 2 s) run on their own after the
# rest: in the parallel run they compete for the two cores with ~700 tests, and etcd's first election or a lease can
# take longer than the tests allow for that alone (CI once saw two etcds take 90 s to serve clients).
ETCD_TESTS := Cluster[A-Za-z]+Tests|EtcdClientTests
test: deps
	mkdir -p $(dir $(TEST_LOG))
	{ $(SWIFT) build --build-tests $(SWIFTPM_FLAGS) && $(SWIFT) test --skip '$(ETCD_TESTS)' $(SWIFTPM_FLAGS) && \
	  $(SWIFT) test --skip-build --filter '$(ETCD_TESTS)' $(SWIFTPM_FLAGS) && $(BROWSER_TEST) && $(HTTP_FUZZ); } 2>&1 | \
	  tee $(TEST_LOG)

# The console's browser test (docs/console.md): a real `cloudlet serve` driven by headless Chromium. Part of `make
# test`; fails, never skips, when chromium, chromedriver or selenium is missing. Screenshots of each page go to
# CONSOLE_SCREENSHOTS (default .build/console-screenshots).
BROWSER_TEST = python3 Tests/Browser/console_test.py "$$($(SWIFT) build $(SWIFTPM_FLAGS) --show-bin-path)/cloudlet"
test-browser: deps
	$(SWIFT) build $(SWIFTPM_FLAGS) --product cloudlet
	$(BROWSER_TEST)

# The schema-driven HTTP fuzz (docs/fuzzing.md): schemathesis sends requests generated from the CloudKit Web Services
# OpenAPI description to a real `cloudlet serve` (the debug build), HTTP_FUZZ_EXAMPLES per operation with a fixed
# seed; fails on any 5xx, crash or answer whose status, content type or shape the spec does not document. Part of
# `make test`.
HTTP_FUZZ_EXAMPLES ?= 40
HTTP_FUZZ = python3 Tests/HTTPFuzz/schemathesis_test.py --examples $(HTTP_FUZZ_EXAMPLES) \
	"$$($(SWIFT) build $(SWIFTPM_FLAGS) --show-bin-path)/cloudlet"
test-http-fuzz: deps
	$(SWIFT) build $(SWIFTPM_FLAGS) --product cloudlet
	$(HTTP_FUZZ)

# libFuzzer targets for the decoders (docs/fuzzing.md; Fuzz/Package.swift, a package of its own built with coverage
# and AddressSanitizer instrumentation in Fuzz/.build). `make fuzz-quick` (in .ci/run) runs each target for
# FUZZ_QUICK_SECONDS, `make fuzz` for FUZZ_SECONDS; FUZZ_TARGETS picks targets. Inputs found are kept in .build/fuzz;
# crashes go to .build/fuzz/artifacts and fail the run. FUZZ_SWIFTPM_FLAGS: extra flags for that build (not
# SWIFTPM_FLAGS: a scratch path shared with the main build would rebuild it with other flags each time).
FUZZ_QUICK_SECONDS ?= 5
FUZZ_SECONDS ?= 300
FUZZ_TARGETS ?=
FUZZ_SWIFTPM_FLAGS ?=
FUZZ_RUN = python3 Fuzz/fuzz.py --swiftpm-flags "$(FUZZ_SWIFTPM_FLAGS)"
fuzz-quick: deps
	$(FUZZ_RUN) --seconds $(FUZZ_QUICK_SECONDS) $(FUZZ_TARGETS)
fuzz: deps
	$(FUZZ_RUN) --seconds $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# The query and index tests again in an optimized build — the build users run (`make serve`, `swift build -c release`).
# Issue 13's NEAR bug was a Swift optimizer miscompile that debug builds, and so `make test`, do not have. Builds in
# .build/release with testable imports; RELEASE_TESTS is a --filter (`RELEASE_TESTS=.` runs every test).
RELEASE_TESTS ?= Query|IndexKey|IndexPersistence|SortedBlockList|KeyDirectory|Memtable|LSM|SortedRun|ChangeFeed|IndexReopen|CompactionTests|ModelProperty
test-release: deps
	mkdir -p $(dir $(TEST_LOG))
	{ $(SWIFT) build -c release --build-tests -Xswiftc -enable-testing $(SWIFTPM_FLAGS) && \
	  $(SWIFT) test -c release -Xswiftc -enable-testing --skip-build --filter '$(RELEASE_TESTS)' $(SWIFTPM_FLAGS); } 2>&1 | \
	  tee $(basename $(TEST_LOG))-release.log

# The replication simulation over many seeds (docs/replication.md, "Deterministic simulation"): SIM_SEEDS seeds per
# scenario from SIM_FIRST_SEED, in a release build with testable imports. `make test` runs a few hundred.
SIM_SEEDS ?= 5000
SIM_FIRST_SEED ?= 1
sim: deps
	$(SWIFT) build -c release --build-tests -Xswiftc -enable-testing $(SWIFTPM_FLAGS)
	CLOUDLET_SIM_SEEDS=$(SIM_SEEDS) CLOUDLET_SIM_FIRST_SEED=$(SIM_FIRST_SEED) \
	  $(SWIFT) test -c release -Xswiftc -enable-testing --skip-build --filter ReplicationSimulationTests $(SWIFTPM_FLAGS)

# The HTTP server (CloudKit Web Services API) on a local data directory, http://127.0.0.1:8080 (PORT=… to change).
PORT ?= 8080
serve: deps
	$(SWIFT) build -c release $(SWIFTPM_FLAGS) --product cloudlet
	"$$($(SWIFT) build -c release $(SWIFTPM_FLAGS) --show-bin-path)/cloudlet" serve --data $(DATA) --port $(PORT)

# cloudlet-bench is its own package, Benchmarks/Package.swift (SQLite and RocksDB stay out of `make build`). Its
# default build directory is Benchmarks/.build; a --scratch-path in SWIFTPM_FLAGS serves both packages.
BENCH_RUN = $(SWIFT) run -c release --package-path Benchmarks $(SWIFTPM_FLAGS) cloudlet-bench

# replicated-fillsync-concurrent runs `cloudlet serve` processes: the release `cloudlet` is built first.
BENCH_CLOUDLET = $(SWIFT) build -c release $(SWIFTPM_FLAGS) --product cloudlet && \
	export CLOUDLET_BIN="$$($(SWIFT) build -c release $(SWIFTPM_FLAGS) --show-bin-path)/cloudlet"

bench: deps
	$(BENCH_CLOUDLET) && $(BENCH_RUN) $(BENCH_ARGS)

bench-quick: deps
	$(BENCH_CLOUDLET) && $(BENCH_RUN) --quick $(BENCH_ARGS)

# HTTP load test of `cloudlet serve` with wrk (Benchmarks/http/README.md).
bench-http: deps
	Benchmarks/http/run.sh
