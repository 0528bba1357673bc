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

demo: build
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
