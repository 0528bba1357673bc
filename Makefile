# Two entry points: `make demo` and `make test`. Both set the machine up first (idempotent, seconds when done).
BUILD ?= build
JOBS ?= $(shell nproc)
PY := .venv/bin/python

.PHONY: demo test setup build test-cpp test-python test-sanitize clean bench

setup:
	@bash scripts/setup.sh

# ATTNZOO_CUDA=AUTO|ON|OFF: the CUDA kernels, built by default with the PyPI compiler setup installs (no GPU
# needed to compile them; OFF for a CPU-only build).
ATTNZOO_CUDA ?= AUTO
export ATTNZOO_CUDA

build: setup
	@if [ ! -f $(BUILD)/build.ninja ]; then \
	  cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE=$(CURDIR)/$(PY) \
	    -DATTNZOO_CUDA=$(ATTNZOO_CUDA) >/dev/null; fi
	@cmake --build $(BUILD) -j $(JOBS)

# A real model first (SmolLM2-135M-Instruct, the Q4_1 GGUF setup fetched: the CLI's default model), then the
# kernel tour.
DEMO_MODEL := .models/SmolLM2-135M-Instruct.Q4_1.gguf

demo: build
	$(BUILD)/attnzoo generate --chat -p "What is the capital of France?" -n 48
	$(BUILD)/attnzoo inspect $(DEMO_MODEL)
	$(BUILD)/attnzoo info
	$(BUILD)/attnzoo bench kernels --quick

bench: build
	$(BUILD)/attnzoo bench kernels

test-cpp: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# --durations: the slowest tests in every CI log, where the time budget of a run is spent.
test-python: build
	ATTNZOO_BUILD=$(BUILD) $(PY) -m pytest -q --durations=15 python/tests  # conftest.py puts python/ and $(BUILD)/python on the path

# The C++ tests again in a second build with AddressSanitizer + UndefinedBehaviorSanitizer, every finding fatal
# (CMake option ATTNZOO_SANITIZE), then the fuzz entry points over their seed corpora (fuzz/corpus) and the
# in-tree mutation fuzzers for 10 s each. -O1 keeps the sanitized build and run inside the CI budget;
# SANITIZE_SKIP leaves out only the long-sequence stability runs of the kernels (Prefill.LongSequence and the
# linear families' *.LongSequence*: numerical checks over thousands of steps through the same code paths the
# short cases cover); they still run, unsanitized, in test-cpp.
BUILD_SAN ?= build-asan
SANITIZE_SKIP ?= LongSequence
SAN_ENV := ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	ATTNZOO_FUZZ_SECONDS=10 ATTNZOO_FUZZ_ITERATIONS=100000000
test-sanitize: setup
	@if [ ! -f $(BUILD_SAN)/build.ninja ]; then \
	  cmake -S . -B $(BUILD_SAN) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	    -DATTNZOO_SANITIZE=address,undefined >/dev/null; fi
	@cmake --build $(BUILD_SAN) -j $(JOBS)
	cd $(BUILD_SAN) && $(SAN_ENV) ctest --output-on-failure -j $(JOBS) -E '$(SANITIZE_SKIP)'
	$(SAN_ENV) $(BUILD_SAN)/fuzz_json_replay fuzz/corpus/json/*
	$(SAN_ENV) $(BUILD_SAN)/fuzz_safetensors_replay fuzz/corpus/safetensors/*
	$(SAN_ENV) $(BUILD_SAN)/fuzz_gguf_replay fuzz/corpus/gguf/*
	$(SAN_ENV) $(BUILD_SAN)/fuzz_tokenizer_replay fuzz/corpus/tokenizer/*

# A cold make test (fresh clone, no ccache) on an idle 2-core AMD EPYC (Zen 4), 2026-12-07: 46 min 25 s, of it
# the release build 13.5 min, pytest 10 min, the sanitizer build 17.7 min and its tests 2.6 min (59 min 39 s before
# -g1 and the precompiled headers, CMakeLists.txt).
test: test-cpp test-python test-sanitize

clean:
	rm -rf $(BUILD)
