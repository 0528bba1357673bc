#!/usr/bin/env bash
# CUDA 13.0's compiler from PyPI alone: these machines have no GPU and no system toolkit, yet every CUDA source
# must compile here (CI included) so that a GPU machine only runs what was built. The pinned wheels land in
# .venv (site-packages/nvidia/cu13, ~250 MB installed, no cuBLAS); nvcc and CMake's CUDA support look for
# bin/, include/, nvvm/ and lib64/ with unversioned .so names, which the wheels do not lay out, so a shim
# directory of symlinks (.cuda/toolkit) gives them that shape. Idempotent; seconds when done.
#   scripts/cuda_toolchain.sh          install (if needed) and print the shim's nvcc
set -euo pipefail
cd "$(dirname "$0")/.."

# Every part pinned: an unpinned extra pulls a newer minor release beside the 13.0 nvcc. 13.0 is also what the
# H200 image's nvcc and PyTorch build carry, so a binary built here runs there unchanged.
PIN='cuda-toolkit[nvcc,crt,nvvm,cudart,cccl]==13.0.2'
# cuobjdump and the nvdisasm it runs, for the SASS check (scripts/check_sass.sh, a ctest): the meta-package has no
# extra for them and PyPI has none older than 13.2 (~5 MB together); they read 13.0's binaries.
SASS_PIN='nvidia-cuda-cuobjdump==13.2.51 nvidia-cuda-nvdisasm==13.2.51'
SHIM=.cuda/toolkit
STAMP=.stamps/cuda-$(printf '%s %s' "$PIN" "$SASS_PIN" | sha256sum | cut -c1-16)

if [ ! -f "$STAMP" ] || [ ! -x "$SHIM/bin/nvcc" ]; then
  [ -x .venv/bin/python ] || { echo "cuda_toolchain.sh: .venv is missing (run scripts/setup.sh first)" >&2; exit 1; }
  echo "[setup] installing the CUDA compiler ($PIN $SASS_PIN)"
  # shellcheck disable=SC2086  # SASS_PIN is two requirements
  .venv/bin/pip install -q "$PIN" $SASS_PIN 2> >(grep -v "WARNING: Location" >&2)
  root=$(.venv/bin/python -c 'import nvidia.cu13, os; print(os.path.dirname(nvidia.cu13.__file__))' 2>/dev/null ||
         .venv/bin/python -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13"))')
  [ -x "$root/bin/nvcc" ] || { echo "cuda_toolchain.sh: no nvcc under $root after the install" >&2; exit 1; }
  rm -rf "$SHIM"
  mkdir -p "$SHIM/bin" "$SHIM/lib64"
  # bin/ must be a real directory: nvcc finds cicc, ptxas and its nvcc.profile relative to its own path.
  for f in "$root"/bin/*; do ln -s "$(readlink -f "$f")" "$SHIM/bin/$(basename "$f")"; done
  ln -s "$(readlink -f "$root/include")" "$SHIM/include"
  ln -s "$(readlink -f "$root/nvvm")" "$SHIM/nvvm"
  for f in "$root"/lib/*; do ln -s "$(readlink -f "$f")" "$SHIM/lib64/$(basename "$f")"; done
  for so in "$SHIM"/lib64/lib*.so.[0-9]*; do
    [ -e "$so" ] || continue
    base=${so%%.so.*}.so
    [ -e "$base" ] || ln -s "$(basename "$so")" "$base"
  done
  # nvcc.profile points at the wheel's own layout; the shim's copy must point at the shim.
  if [ -f "$root/bin/nvcc.profile" ]; then
    rm "$SHIM/bin/nvcc.profile"
    sed "s|^TOP *=.*|TOP = $(readlink -f "$SHIM")|" "$root/bin/nvcc.profile" > "$SHIM/bin/nvcc.profile"
  fi
  mkdir -p .stamps
  rm -f .stamps/cuda-*
  touch "$STAMP"
fi
echo "$PWD/$SHIM/bin/nvcc"
