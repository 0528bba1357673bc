#!/usr/bin/env bash
# The GPU machine's one prepared run, from a bundle built here (scripts/gpu_bundle.sh): the device seam's and the
# CUDA kernels' tests, compute-sanitizer's memcheck and racecheck on them, what the compiled kernels hold (SASS
# tensor-core instructions), and the CUDA kernel table beside PyTorch's (gpu_peers.py). Writes gpu_check.log,
# gpu_check.json (each step's exit status and seconds) and the steps' own JSON into OUT_DIR (7 files: the device
# tool returns at most 8). Every step runs even when an earlier one fails.
#   bash scripts/gpu_check.sh [BUNDLE_DIR] [OUT_DIR]
set -uo pipefail
BUNDLE=$(cd "${1:-build-gpu}" && pwd)
OUT_DIR=${2:-${OUT:-gpu-out}}
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
if [ -f "$BUNDLE/bundle.tar.xz" ] && [ ! -x "$BUNDLE/attnzoo" ]; then
  tar -C "$BUNDLE" -xJf "$BUNDLE/bundle.tar.xz" || { echo "gpu_check.sh: cannot unpack $BUNDLE/bundle.tar.xz" >&2; exit 1; }
fi
# Only our binaries see the bundled libraries: the image's Python and torch keep their own.
OURS=(env "LD_LIBRARY_PATH=$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
LOG="$OUT_DIR/gpu_check.log"
: > "$LOG"
steps=()

# step NAME TIMEOUT_S COMMAND...: runs it with its output in the log, and records status and time.
step() {
  local name=$1 limit=$2
  shift 2
  echo "=== $name: $*" | tee -a "$LOG"
  local t0=$SECONDS
  timeout "$limit" "$@" >> "$LOG" 2>&1
  local rc=$?
  local dt=$((SECONDS - t0))
  echo "=== $name: exit $rc in ${dt}s" | tee -a "$LOG"
  steps+=("{\"step\": \"$name\", \"exit\": $rc, \"seconds\": $dt}")
}

step device 30 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
step info 30 "${OURS[@]}" "$BUNDLE/attnzoo" info
step seam 60 "${OURS[@]}" "$BUNDLE/test_core" --gtest_filter='Device.*' --gtest_output="json:$OUT_DIR/test_core.json"
for t in "$BUNDLE"/test_*cuda*; do
  name=$(basename "$t")
  step "$name" 240 "${OURS[@]}" "$t" --gtest_output="json:$OUT_DIR/$name.json"
  # The sanitizers (they slow kernels by orders of magnitude) on every test but the long-sequence ones. Under
  # gVisor compute-sanitizer has refused the device before ("Device not supported"): a short limit, then on.
  step "$name-memcheck" 120 "${OURS[@]}" compute-sanitizer --tool memcheck --error-exitcode 3 "$t" --gtest_filter='-*Long*'
  step "$name-racecheck" 120 "${OURS[@]}" compute-sanitizer --tool racecheck --error-exitcode 3 "$t" --gtest_filter='-*Long*'
  step "$name-sass" 60 bash -c "set -o pipefail; cuobjdump --dump-sass '$t' | grep -oE 'HGMMA|HMMA|LDSM|LDGSTS' | sort | uniq -c"
done

# Our kernels by CUDA events, then PyTorch's SDPA backends and the cuBLAS GEMM peak on the same shapes (the
# image's torch; the script needs nothing else).
step bench 240 bash -c "$(printf '%q ' "${OURS[@]}") '$BUNDLE/attnzoo' bench kernels --device cuda --json > '$OUT_DIR/bench_cuda.json'"
step peers 240 python3 "$HERE/gpu_peers.py" "$OUT_DIR/bench_cuda.json" "$OUT_DIR"

{
  echo "{\"steps\": ["
  (IFS=,; echo "${steps[*]}")
  echo "]}"
} > "$OUT_DIR/gpu_check.json"
cat "$OUT_DIR/gpu_check.json"
