#!/usr/bin/env bash
# A ctest over the static libraries: every global function or variable is defined in one object file only. A
# static library links the first object that resolves a symbol and never pulls another that defines it again, so
# two definitions of one function (a helper moved into core/ while an old copy stays in a folder of its own) link
# without an error, and which one runs depends on the link order: a CUDA build and a CPU-only one then disagree.
# Weak definitions (inline functions, templates) are meant to repeat and are not counted.
#   scripts/check_one_definition.sh LIBRARY.a...
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 LIBRARY.a..." >&2; exit 2; }
dups=$(for lib in "$@"; do
  # "LIBRARY:OBJECT:ADDRESS TYPE NAME" per strong global definition (text, data, bss, read-only data).
  nm -A --defined-only "$lib" | awk '$2 ~ /^[TDBR]$/ { n = split($1, p, ":"); print $3 "\t" p[n - 1] }'
done | sort -u | awk -F'\t' '{ n[$1]++; o[$1] = o[$1] " " $2 } END { for (s in n) if (n[s] > 1) print s ":" o[s] }')
if [ -n "$dups" ]; then
  echo "defined in more than one object file (symbol: objects):" >&2
  while IFS= read -r line; do
    echo "  $(echo "${line%%:*}" | c++filt):${line#*:}" >&2
  done <<< "$dups"
  exit 1
fi
echo "one definition per global symbol in: $*"
