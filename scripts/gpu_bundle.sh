#!/usr/bin/env bash
# Packs what the GPU machine runs into one folder (default build-gpu/, ignored by git, carried there whole):
# the CUDA test binaries and the CLI of a CUDA build, stripped, plus the shared libraries they load that a bare
# CUDA image lacks (Highway, OpenBLAS, PCRE2 and their runtime dependencies from Debian; the CUDA runtime is
# linked statically). scripts/gpu_check.sh runs there from it; nothing is built on the GPU machine.
#   scripts/gpu_bundle.sh [BUILD_DIR] [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OUT=${2:-build-gpu}
grep -q "ATTNZOO_WITH_CUDA:INTERNAL=ON\|ATTNZOO_WITH_CUDA=1" "$BUILD/CMakeCache.txt" "$BUILD/build.ninja" 2>/dev/null ||
  { echo "gpu_bundle.sh: $BUILD is not a CUDA build (scripts/cuda_toolchain.sh, then configure again)" >&2; exit 1; }
rm -rf "$OUT"
mkdir -p "$OUT/lib"
# The binaries whose tests touch a GPU: the CUDA kernels' folders and the device seam's (core).
# test_cuda_emulation runs the kernels' device code on the CPU (make test's): no use there.
bins=(attnzoo test_core)
for t in "$BUILD"/test_*cuda*; do
  case "$(basename "$t")" in *emulation*) ;; *) [ -x "$t" ] && bins+=("$(basename "$t")") ;; esac
done
for b in "${bins[@]}"; do
  [ -x "$BUILD/$b" ] || { echo "gpu_bundle.sh: $BUILD/$b is missing (build first)" >&2; exit 1; }
  strip -o "$OUT/$b" "$BUILD/$b"
done
# Shared libraries outside glibc / libstdc++ (present on any image) that the binaries need; not cuBLAS(Lt), which a
# build with ATTNZOO_CUBLASLT links: 517 MB, and the GPU image has it with PyTorch (gpu_check.sh finds it there).
for b in "${bins[@]}"; do ldd "$OUT/$b"; done | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*|libcublas*) ;;
    *) cp -L "$lib" "$OUT/lib/" ;;
  esac
done
# The GPU machine takes at most 64 MiB with the working tree: OpenBLAS alone is 36 MB, so the binaries and
# libraries travel as one xz archive that gpu_check.sh unpacks there. The CLI and the larger test binaries each
# hold most of the library's device code (~45 MB stripped apiece): a dictionary as long as the whole tar (~190 MB)
# lets xz encode every later copy as a match of the first: 20 MB with the libraries instead of 48 (2 GB of memory
# to pack, 200 MB to unpack). GPU_BUNDLE_XZ overrides those xz options: python/tests/test_gpu_check_dry_run.py
# packs with preset=0 and a small dictionary, since CI only unpacks the archive (53 MB, packed in seconds, not minutes).
tar -C "$OUT" -cf - "${bins[@]}" lib | xz "--lzma2=${GPU_BUNDLE_XZ:-preset=6,dict=192MiB}" > "$OUT.tar.xz.part"
rm -rf "$OUT"
mkdir -p "$OUT"
mv "$OUT.tar.xz.part" "$OUT/bundle.tar.xz"
cp scripts/gpu_check.sh scripts/gpu_peers.py scripts/check_vs_torch.py scripts/check_linear_vs_torch.py \
  scripts/check_step_vs_torch.py scripts/check_layers_vs_torch.py scripts/check_runner_vs_torch.py \
  scripts/make_bench_model.py scripts/hf_generate_bench.py scripts/gpu_serve_check.sh scripts/gpu_bundle_env.sh \
  "$OUT/"
# bench serve's load generator (standard library only) for gpu_serve_check.sh: the image has no attnzoo package.
cp python/attnzoo/bench/serve.py "$OUT/"
# The perplexity text (The Adventures of Sherlock Holmes, 594 KB, from setup.sh's Debian package) for gpu_check.sh's
# GGUF perplexity on both devices.
SHERLOCK=/usr/share/gocode/src/github.com/bkaradzic/go-lz4/testdata/pg1661.txt
[ -f "$SHERLOCK" ] && cp "$SHERLOCK" "$OUT/" || echo "gpu_bundle.sh: no $SHERLOCK: gpu_check.sh's GGUF perplexity needs GPU_CHECK_TEXT" >&2
# fla (flash-linear-attention's kernels, pure Python + Triton) for the linear cases' fla columns and gpu_peers.py's
# linear-family peers: the image has triton and einops but not fla, and no network; .venv (or $ATTNZOO_PYTHON)
# holds the pinned fla-core (requirements.txt).
fla=$("${ATTNZOO_PYTHON:-.venv/bin/python}" -c "import fla, os; print(os.path.dirname(os.path.dirname(fla.__file__)))" 2>/dev/null) &&
  tar -C "$fla" --exclude=__pycache__ -cf - fla | xz -6 > "$OUT/fla.tar.xz" ||
  echo "gpu_bundle.sh: no fla in .venv: the GPU run's linear-family rows will have no fla peer" >&2
# gguf-py (pure Python over numpy, 1.4 MB) for check_step_vs_torch.py's decoding of the GEMV's and the embedding's
# GGUF blocks: the image has numpy but not gguf.
gguf=$("${ATTNZOO_PYTHON:-.venv/bin/python}" -c "import importlib.util, os; print(os.path.dirname(list(importlib.util.find_spec('gguf').submodule_search_locations)[0]))" 2>/dev/null) &&
  tar -C "$gguf" --exclude=__pycache__ -cf - gguf | xz -6 > "$OUT/gguf.tar.xz" ||
  echo "gpu_bundle.sh: no gguf in .venv: the GPU run's GEMV and embedding cases will have no reference" >&2
du -sh "$OUT"
# The call that carries it carries the tree too, within 64 MiB (a bundle packed with the dry run's fast
# GPU_BUNDLE_XZ, ~55 MB, comes within 3 MiB of it; the GGUF's parts go in calls of their own).
# Outside git, or with a tracked file deleted, the command fails: what du counted stands (0 without git).
tree_bytes=$(git ls-files -z -co --exclude-standard 2> /dev/null |
  du -cb --files0-from=- 2> /dev/null | tail -1 | cut -f1) || true
out_bytes=$(du -sb "$OUT" | cut -f1)
(( out_bytes + ${tree_bytes:-0} <= 64 * 1048576 )) || echo "gpu_bundle.sh: $OUT ($((out_bytes / 1048576)) MiB) and the" \
  "tree ($((tree_bytes / 1048576)) MiB) pass the 64 MiB one device call carries: not for the GPU machine as it is" >&2
