#!/usr/bin/env bash
# Builds llama.cpp's llama-bench from the llama.cpp that the llama-cpp-python sdist on PyPI vendors, for
# `attnzoo bench model --llama-bench PATH` (llama.cpp's pp512 / tg128 beside ours). Not part of `make test`.
#
#   scripts/build_llama_bench.sh            # prints the path of llama-bench on its last line
#                                           # (llama-quantize is built beside it)
#
# Everything lives outside the source tree, in $ATTNZOO_LLAMA_CACHE (default ~/.cache/attnzoo/llama.cpp):
# the sdist, its unpacked copy and the CMake build; a second run reuses all three (the build is incremental).
# LLAMA_CPP_PYTHON_VERSION picks the sdist; JOBS the build's parallelism (default: all cores, niced);
# LLAMA_CMAKE_ARGS more CMake arguments (a build directory of their own). On an AMX CPU with g++ 12, llama.cpp's
# AMX kernels (Q4_0 / Q8_0 / K-quants under its default --repack 1) die on SIGILL: g++ 12 declares
# _tile_loadconfig's operand as 8 bytes, so the stores filling the rest of ggml's tile configuration are dropped
# (even at -O1; no flag keeps them all). Its best build there leaves AMX out and keeps the repacked AVX-512 kernels:
#   LLAMA_CMAKE_ARGS='-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
#     -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DGGML_AVX_VNNI=ON'
set -euo pipefail

VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
CACHE="${ATTNZOO_LLAMA_CACHE:-$HOME/.cache/attnzoo/llama.cpp}"
JOBS="${JOBS:-$(nproc)}"
PIP="${PIP:-python3 -m pip}"

mkdir -p "$CACHE"
SDIST="$CACHE/llama_cpp_python-$VERSION.tar.gz"
if [[ ! -f "$SDIST" ]]; then
    # --no-binary for this package only: the sdist (a wheel has no llama.cpp sources), while pip's metadata step
    # still gets its build backend (scikit-build-core, cmake) as wheels rather than building CMake from source.
    $PIP download --no-deps --no-binary llama-cpp-python --dest "$CACHE" "llama-cpp-python==$VERSION" >&2
fi
[[ -f "$SDIST" ]] || { echo "build_llama_bench: $SDIST not found after pip download" >&2; exit 1; }

SRC="$CACHE/llama_cpp_python-$VERSION/vendor/llama.cpp"
if [[ ! -f "$SRC/CMakeLists.txt" ]]; then
    tar -xzf "$SDIST" -C "$CACHE"
fi
[[ -f "$SRC/tools/llama-bench/llama-bench.cpp" ]] \
    || { echo "build_llama_bench: $SDIST vendors no llama.cpp with tools/llama-bench" >&2; exit 1; }

EXTRA=()
BUILD="$CACHE/build-$VERSION"
if [[ -n "${LLAMA_CMAKE_ARGS:-}" ]]; then
    read -r -a EXTRA <<< "$LLAMA_CMAKE_ARGS"
    BUILD="$BUILD-$(printf '%s' "$LLAMA_CMAKE_ARGS" | sha256sum | cut -c1-8)"
fi
GENERATOR=()
command -v ninja >/dev/null && GENERATOR=(-G Ninja)
# GGML_NATIVE: tuned for this CPU like our own kernels (runtime dispatch picks the best there); no network,
# tests, server or examples: only the libraries llama-bench links.
cmake -S "$SRC" -B "$BUILD" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF -DBUILD_SHARED_LIBS=OFF "${EXTRA[@]}" >&2
# llama-quantize too (two more files over the same libraries): it writes the BF16 / F16 GGUF of a quantized one
# (--allow-requantize) for a same-dtype comparison when no Hugging Face checkpoint is at hand.
nice cmake --build "$BUILD" --target llama-bench llama-quantize -j "$JOBS" >&2

BIN="$BUILD/bin/llama-bench"
[[ -x "$BIN" ]] || { echo "build_llama_bench: the build did not produce $BIN" >&2; exit 1; }
echo "$BIN"
