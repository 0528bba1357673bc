# Sourced by the GPU machine's scripts (gpu_check.sh, gpu_serve_check.sh), which sit beside it in the bundle
# (scripts/gpu_bundle.sh) as in scripts/: from their arguments [BUNDLE_DIR] [OUT_DIR], BUNDLE and OUT_DIR as
# absolute paths (OUT_DIR made), HERE (the scripts' folder), the bundle's archive unpacked once, and OURS, the
# prefix that gives only our binaries the bundled libraries: the image's Python and torch keep their own. A bundle
# built with cuBLASLt (cmake/Cuda.cmake) does not carry its 517 MB library: the image's, which PyTorch's wheels
# installed, is found after the bundle's.
BUNDLE=$(cd "${1:-build-gpu}" && pwd)
OUT_DIR=${2:-${OUT:-gpu-out}}
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
if [ -f "$BUNDLE/bundle.tar.xz" ] && [ ! -x "$BUNDLE/attnzoo" ]; then
  tar -C "$BUNDLE" -xJf "$BUNDLE/bundle.tar.xz" ||
    { echo "$(basename "$0"): cannot unpack $BUNDLE/bundle.tar.xz" >&2; exit 1; }
fi
# nvidia.cu13 is a namespace package (no __init__.py, __file__ None): its folders are __path__. The build's RUNPATH
# (.cuda/toolkit/lib64) does not exist there, so without this no binary of a cuBLASLt build would load.
CU13_LIB=$(python3 -c "import glob, nvidia.cu13
print(next((p + '/lib' for p in nvidia.cu13.__path__ if glob.glob(p + '/lib/libcublasLt.so*')), ''))" 2>/dev/null)
OURS=(env "LD_LIBRARY_PATH=$BUNDLE/lib${CU13_LIB:+:$CU13_LIB}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
