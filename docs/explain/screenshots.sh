#!/bin/sh
# Regenerates the section screenshots in this folder from a real run on this machine:
#   docs/explain/screenshots.sh [path/to/attnzoo/source]
# Needs the built Python extension and Debian's chromium. Animations are captured at their last step.
set -e
ROOT=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
OUT=$ROOT/docs/explain
TMP=$(mktemp -d)
shot() {  # section, window height
  PYTHONPATH=$ROOT/python "$ROOT/.venv/bin/python" -m attnzoo.explain --section "$1" \
    --prompt "the quick brown fox jumps over the lazy dog" -o "$TMP/$1.html" >/dev/null
  chromium --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
    --disable-sync --no-first-run --hide-scrollbars --user-data-dir="$TMP/profile" $3 \
    --window-size=1100,"$2" --screenshot="$OUT/$1${4:-}.png" "file://$TMP/$1.html?frame=last" 2>/dev/null
}
shot visibility 2300
shot tiles 1500
shot memory 1250
shot paged 1450
shot interference 1250
shot measured 2050
shot s4 1200
shot memory 1250 --force-dark-mode -dark
# Section 7 needs a checkpoint: set ATTNZOO_EXPLAIN_MODEL=DIR (model.png came from scripts/make_bench_model.py).
if [ -n "${ATTNZOO_EXPLAIN_MODEL:-}" ]; then
  PYTHONPATH=$ROOT/python "$ROOT/.venv/bin/python" -m attnzoo.explain -m "$ATTNZOO_EXPLAIN_MODEL" --section model \
    --prompt "the quick brown fox jumps over the lazy dog" -o "$TMP/model.html" >/dev/null
  chromium --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
    --disable-sync --no-first-run --hide-scrollbars --user-data-dir="$TMP/profile" \
    --window-size=1100,2000 --screenshot="$OUT/model.png" "file://$TMP/model.html?frame=last" 2>/dev/null
fi
rm -rf "$TMP"
