# iapledger: two commands do everything on a fresh Debian machine.
#   make demo   install what is missing, build, generate a demo workspace, run the nightly job
#   make test   install what is missing, build, run every test
#   make bench  the benchmark: a 1M-transaction night, an incremental night, workbook writing
SHELL := /bin/bash
SWIFT ?= swift
DEMO_DIR ?= demo
DEMO_TRANSACTIONS ?= 3000
DEMO_SEED ?= 42
APT_PACKAGES := libxlsxwriter-dev libsqlite3-dev zlib1g-dev libzstd-dev pkg-config
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: deps build release test demo bench clean

# Installs the Debian packages the build links against, only when one is missing.
deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "Installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

build: deps
	$(SWIFT) build

# Release builds find the Swift runtime at the toolchain's path alone: no $ORIGIN in the
# binary's RUNPATH (copied to a folder others can write, it would load their libraries).
RELEASE := -c release --disable-local-rpath

release: deps
	$(SWIFT) build $(RELEASE)

test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

demo: release
	rm -rf "$(DEMO_DIR)"
	"$$($(SWIFT) build $(RELEASE) --show-bin-path)/iapledger" demo --dir "$(DEMO_DIR)" --transactions $(DEMO_TRANSACTIONS) --seed $(DEMO_SEED)

# The benchmark (README, "Benchmark"): BENCH_TRANSACTIONS (default 1,000,000) transactions,
# a night and an incremental night (+10%), and workbook writing against libxlsxwriter.
BENCH_TRANSACTIONS ?= 1000000
BENCH_DIR ?= .build/bench/workspace
bench: release
	$(SWIFT) build $(RELEASE) --product iapledger-bench
	"$$($(SWIFT) build $(RELEASE) --show-bin-path)/iapledger-bench" --transactions $(BENCH_TRANSACTIONS) --dir "$(BENCH_DIR)"

clean:
	rm -rf .build "$(DEMO_DIR)"
