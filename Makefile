# Two entry points: `make demo` and `make test`. Both set the machine up first (idempotent, seconds when done).
BUILD ?= build
JOBS ?= $(shell nproc)
PY := .venv/bin/python

.PHONY: demo test setup build test-cpp test-python clean bench

setup:
	@bash scripts/setup.sh

build: setup
	@if [ ! -f $(BUILD)/build.ninja ]; then \
	  cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE=$(CURDIR)/$(PY) >/dev/null; fi
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

test-python: build
	ATTNZOO_BUILD=$(BUILD) $(PY) -m pytest -q python/tests  # conftest.py puts python/ and $(BUILD)/python on the path

test: test-cpp test-python

clean:
	rm -rf $(BUILD)
