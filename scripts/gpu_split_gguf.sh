#!/usr/bin/env bash
# The GPU machine takes at most 64 MiB per call, the working tree (~10 MB) included, and the bundle (gpu_bundle.sh)
# already fills about half of it, so a GGUF larger than the rest (the SmolLM2 Q4_1 of issue 27's perplexity proof is
# 98 MB) travels in parts: this splits it into DIR (ignored by git) with the whole file's SHA-256 beside them. The
# machine keeps ignored files from one call to the next while it stays warm, so back-to-back calls each carry one
# part (the plan is printed below), and the last one runs gpu_check.sh, which joins the parts, checks the
# digest and runs the perplexity step on the joined file (a wrong or missing part skips the step, saying so).
# PART_MIB defaults to the most that fits beside the tree less 4 MiB (~50: two parts, two calls; 30 MiB parts took
# four, each a call's start and transfer out of the GPU session's 15 minutes).
#   scripts/gpu_split_gguf.sh [GGUF] [DIR] [PART_MIB]
set -euo pipefail
cd "$(dirname "$0")/.."
GGUF=${1:-.models/SmolLM2-135M-Instruct.Q4_1.gguf}
DIR=${2:-gpu-carry}
[ -f "$GGUF" ] || { echo "gpu_split_gguf.sh: no GGUF at $GGUF (make setup fetches the SmolLM2 one)" >&2; exit 1; }
# A part travels beside the tree (tracked and untracked files git does not ignore): both within the 64 MiB.
# Outside git, or with a tracked file deleted, the command fails: what du counted stands (0 without git).
tree_bytes=$(git ls-files -z -co --exclude-standard 2> /dev/null |
  du -cb --files0-from=- 2> /dev/null | tail -1 | cut -f1) || true
max_mib=$(((64 * 1048576 - ${tree_bytes:-0}) / 1048576))
PART_MIB=${3:-$((max_mib - 4))}
[[ "$PART_MIB" =~ ^[1-9][0-9]*$ ]] && (( PART_MIB <= max_mib )) ||
  { echo "gpu_split_gguf.sh: PART_MIB must be 1..$max_mib (one call carries at most 64 MiB, the tree's" \
      "$((tree_bytes / 1048576)) MiB included), got '$PART_MIB'" >&2; exit 1; }
rm -rf "$DIR"
mkdir -p "$DIR"
split -b "${PART_MIB}M" -d -a 2 "$GGUF" "$DIR/$(basename "$GGUF").part-"
(cd "$(dirname "$GGUF")" && sha256sum "$(basename "$GGUF")") > "$DIR/$(basename "$GGUF").sha256"
echo "gpu_split_gguf.sh: $(ls "$DIR"/*.part-* | wc -l) parts of at most $PART_MIB MiB in $DIR; carry them one call each"
echo "(device run, carry [\"PART\"], command 'ls -l $DIR'), then build-gpu with the digest on the last call:"
for p in "$DIR"/*.part-*; do echo "  carry [\"$p\"]"; done
echo "  carry [\"build-gpu\", \"$DIR/$(basename "$GGUF").sha256\"]: bash build-gpu/gpu_check.sh build-gpu \$OUT"
