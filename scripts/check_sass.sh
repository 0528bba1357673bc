#!/usr/bin/env bash
# Fails unless every sm_90a function of LIBRARY whose (mangled) name contains KERNEL holds the SASS opcode
# OPCODE: the proof that a Hopper kernel compiled to what it was written for (the prefill's HGMMA, not an
# mma.sync fallback), checked on any machine from the build alone. cuobjdump needs nvdisasm beside it.
#   scripts/check_sass.sh CUOBJDUMP LIBRARY KERNEL OPCODE
set -euo pipefail
cuobjdump=$1 library=$2 kernel=$3 opcode=$4
PATH="$(dirname "$(readlink -f "$cuobjdump")"):$PATH"
sass=$("$cuobjdump" --dump-sass "$library")
# Sections start at "code for sm_XX" and "Function : NAME"; count OPCODE per sm_90a function named KERNEL.
report=$(printf '%s\n' "$sass" | awk -v kernel="$kernel" -v opcode="$opcode" '
  /code for sm_/ { arch = $NF }
  /Function :/ { name = $NF; if (arch == "sm_90a" && index(name, kernel)) { seen[name] = 0; order[++n] = name } }
  index($0, opcode) && (name in seen) && arch == "sm_90a" { seen[name]++ }
  END { for (i = 1; i <= n; ++i) print seen[order[i]], order[i] }')
[ -n "$report" ] || { echo "check_sass: no sm_90a function named *$kernel* in $library" >&2; exit 1; }
printf '%s\n' "$report" | sed "s/^/$opcode x /"
if printf '%s\n' "$report" | grep -q '^0 '; then
  echo "check_sass: a function above has no $opcode" >&2
  exit 1
fi
