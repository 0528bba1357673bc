# Two entry points: `make demo` and `make test`. Both set the machine up first (idempotent, seconds when done).
BUILD ?= build
JOBS ?= $(shell nproc)
PY := .venv/bin/python

.PHONY: demo test setup build test-cpp test-python test-sanitize clean bench

setup:
	@bash scripts/setup.sh

build: setup
	@if [ ! -f $(BUILD)/build.ninja ]; then \
	  cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE=$(CURDIR)/$(PY) >/dev/null; fi
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/attnzoo info
	$(BUILD)/attnzoo bench kernels --quick

bench: build
	$(BUILD)/attnzoo bench kernels

test-cpp: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-python: build
	PYTHONPATH=$(CURDIR)/python $(PY) -m pytest -q python/tests

# The C++ tests again in a second build with AddressSanitizer + UndefinedBehaviorSanitizer, every finding fatal
# (CMake option ATTNZOO_SANITIZE), then the fuzz entry points over their seed corpora (fuzz/corpus) and the
# in-tree mutation fuzzers for a fixed time each. -O1 keeps the sanitized build and run inside the CI budget;
# SANITIZE_SKIP leaves out only the long kernel sweeps that re-run, unsanitized, in test-cpp (the exhaustive
# per-target grids of the prefill and chunked linear kernels): their code paths are covered by the other cases.
BUILD_SAN ?= build-asan
SANITIZE_SKIP ?= PrefillGrid|AllTargets|Exhaustive|Sweep
SAN_ENV := ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	ATTNZOO_FUZZ_SECONDS=10
test-sanitize: setup
	@if [ ! -f $(BUILD_SAN)/build.ninja ]; then \
	  cmake -S . -B $(BUILD_SAN) -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -g -DNDEBUG" \
	    -DATTNZOO_SANITIZE=address,undefined >/dev/null; fi
	@cmake --build $(BUILD_SAN) -j $(JOBS)
	cd $(BUILD_SAN) && $(SAN_ENV) ctest --output-on-failure -j $(JOBS) -E '$(SANITIZE_SKIP)'
	$(SAN_ENV) $(BUILD_SAN)/fuzz_json_replay fuzz/corpus/json/*
	$(SAN_ENV) $(BUILD_SAN)/fuzz_safetensors_replay fuzz/corpus/safetensors/*
	$(SAN_ENV) $(BUILD_SAN)/fuzz_tokenizer_replay fuzz/corpus/tokenizer/*

test: test-cpp test-python test-sanitize

clean:
	rm -rf $(BUILD)
