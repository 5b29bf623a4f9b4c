# The two commands of the README, and the pieces they are made of.
# Every target installs what it needs first (scripts/setup.sh is idempotent).
SHELL := /bin/bash
export TAILLAB_PYTHON ?= $(CURDIR)/.venv/bin/python
CARGO ?= cargo
# Where cli/tests/faults.rs leaves its table's rows (CARGO_TARGET_TMPDIR/faults).
FAULTS_ROWS = $(or $(CARGO_TARGET_DIR),target)/tmp/faults
# The skip ledger every skip and accuracy test of the Rust and Python suites appends to
# (tests/require.rs, python/tests/require.py); scripts/skips-table prints it.
export TAILLAB_SKIP_LEDGER ?= $(abspath $(or $(CARGO_TARGET_DIR),target)/tmp/skips)
PYTEST = $(TAILLAB_PYTHON) -m pytest -q -rs --durations=15 python/tests

.PHONY: setup build build-tests demo test test-rust test-python rust-tests python-tests test-long test-faults bench bundle lint reproduce tailwag clean

setup:
	@scripts/setup.sh

build: setup
	$(CARGO) build --release --workspace

# The suites' build: the binaries with the features the tests' dependencies add, and the test
# targets, in one pass (after `build` alone, `cargo test` rebuilt tantivy and the cli: 3 min).
build-tests: setup
	$(CARGO) build --release --workspace --all-targets

## make demo: set up, build, run an integrated synth sweep at 3 loads, print the table.
demo: build
	@scripts/demo.sh

## make test: set up, build, run every test (timing tests one at a time), then the lints.
## The faults table (scripts/faults-table) and the skip table (scripts/skips-table: every skip
## per feature, and the share of accuracy tests a disturbed host left unchecked, bounded) are
## printed after the tests, also when one failed.
test: build-tests
	@rm -rf $(FAULTS_ROWS); rm -f $(TAILLAB_SKIP_LEDGER)/ledger.tsv
	@s=0; $(MAKE) --no-print-directory rust-tests || s=1; \
	  $(MAKE) --no-print-directory python-tests || s=1; \
	  scripts/skips-table || s=1; exit $$s
	@echo "lint: started $$(date -u +%T)"; $(MAKE) --no-print-directory lint

test-rust:
	@rm -rf $(FAULTS_ROWS); rm -f $(TAILLAB_SKIP_LEDGER)/ledger.tsv
	@s=0; $(MAKE) --no-print-directory rust-tests || s=1; scripts/skips-table || s=1; exit $$s

test-python:
	@rm -f $(TAILLAB_SKIP_LEDGER)/ledger.tsv
	@s=0; $(MAKE) --no-print-directory python-tests || s=1; scripts/skips-table || s=1; exit $$s

# The suites without clearing or printing the ledger (test, test-rust and test-python do).
# Its output is kept (target/tmp/rust-tests.log) for scripts/slowest's table of where the time went.
RUST_LOG_FILE = $(or $(CARGO_TARGET_DIR),target)/tmp/rust-tests.log
rust-tests:
	@mkdir -p $(dir $(RUST_LOG_FILE)); echo "rust-tests: started $$(date -u +%T)"
	set -o pipefail; $(CARGO) test --release --workspace --no-fail-fast 2>&1 | tee $(RUST_LOG_FILE); s=$$?; \
	  scripts/faults-table $(FAULTS_ROWS); scripts/slowest $(RUST_LOG_FILE); exit $$s

python-tests:
	@echo "python-tests: started $$(date -u +%T)"
	@if [ -d python/tests ]; then $(PYTEST); fi

## make bundle: a relocatable tarball (stripped binary, its libraries, the Python package,
## bench/) for hosts that cannot install anything: target/taillab-bundle.tar.gz (docs/bundle.md).
bundle: build
	@scripts/bundle.sh

## Long tests (#[ignore]d in the default suite).
test-long: build-tests
	@rm -f $(TAILLAB_SKIP_LEDGER)/ledger.tsv
	@s=0; $(CARGO) test --release --workspace -- --ignored || s=1; scripts/skips-table || s=1; exit $$s

## make test-faults: the whole faults suite (quick and long parts), then its table.
test-faults: build-tests
	@rm -rf $(FAULTS_ROWS)
	$(CARGO) test --release -p taillab-cli --test faults -- --include-ignored; s=$$?; scripts/faults-table $(FAULTS_ROWS); exit $$s

bench: build
	@python3 bench/accuracy

lint: setup
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings
	$(TAILLAB_PYTHON) -m ruff check python
	$(TAILLAB_PYTHON) -m ruff format --check python
	# The fit's numbers are named constants with their reasons: no bare number compared with.
	$(TAILLAB_PYTHON) -m ruff check --select PLR2004 python/taillab/fit
	# The bench and helper scripts (no .py suffix): syntax errors and undefined names.
	$(TAILLAB_PYTHON) -m ruff check --isolated --target-version py311 --select E9,F bench/accuracy bench/apps bench/model bench/tailwag bench/transport bench/contention bench/manycore bench/fanout bench/grpc bench/claim-profile bench/records bench/attribute bench/attribute-analysis bench/reproduce-seeds transport/grpc/echo_server.py scripts/faults-table scripts/skips-table scripts/import-cycles.py scripts/long-functions.py scripts/reproduction-doc.py scripts/verdict-mutants.py
	python3 scripts/import-cycles.py
	python3 scripts/long-functions.py

## TailWAG's validation over all eight apps (about three hours on a 2-vCPU VM; speech two rounds on its AN4 set), with its table.
tailwag: build
	python3 bench/tailwag

## Every seed figure and table, quick variants (full: target/release/taillab reproduce all).
reproduce: build
	target/release/taillab reproduce all --quick

clean:
	$(CARGO) clean
