# Quick start: `make test`, `make serve`, `make bench`. Every target installs missing Debian packages first.
# Extra SwiftPM flags go in SWIFTPM_FLAGS, e.g. `make test SWIFTPM_FLAGS="--scratch-path /tmp/build"`.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

SWIFT ?= swift
SWIFTPM_FLAGS ?=
DATA ?= ./cloudlet-data
BENCH_ARGS ?=
# `make test` shows its output and keeps a copy here.
TEST_LOG ?= .build/logs/test.log

.PHONY: deps build test serve bench bench-quick

deps:
	.ci/install-deps

build: deps
	$(SWIFT) build $(SWIFTPM_FLAGS)

test: deps
	mkdir -p $(dir $(TEST_LOG))
	{ $(SWIFT) build --build-tests $(SWIFTPM_FLAGS) && $(SWIFT) test $(SWIFTPM_FLAGS); } 2>&1 | tee $(TEST_LOG)

# An embedded demo on a local data directory.
serve: deps
	$(SWIFT) run -c release $(SWIFTPM_FLAGS) cloudlet demo --data $(DATA)

bench: deps
	$(SWIFT) run -c release $(SWIFTPM_FLAGS) cloudlet-bench $(BENCH_ARGS)

bench-quick: deps
	$(SWIFT) run -c release $(SWIFTPM_FLAGS) cloudlet-bench --quick $(BENCH_ARGS)
