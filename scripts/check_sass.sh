#!/usr/bin/env bash
# Fails unless every sm_90a function of LIBRARY whose (mangled) name matches the extended regex KERNEL passes
# each CHECK: the proof that a kernel compiled to what it was written for (the Hopper prefill's HGMMA, not an
# mma.sync fallback; the paged decode's 16-byte K / V copies; the recurrences' loads in flight together), checked
# on any machine from the build alone. cuobjdump needs nvdisasm beside it.
#   scripts/check_sass.sh CUOBJDUMP LIBRARY KERNEL CHECK...
# LIBRARY: one object, or several separated by ';'. CHECK, on each function's instructions (their mnemonics, e.g.
# LDGSTS.E.BYPASS.128, without the predicate):
#   has=RE        at least one mnemonic matches RE (a bare RE, the script's first form, means the same)
#   lacks=RE      no mnemonic matches RE
#   waits<=N      at most N global-load waits: in code order, an instruction that reads a register still owed
#                 by a global load (LDG) counts one and settles every load before it. Loads issued one
#                 latency after another count one each; a batch issued together counts one. Branches are read
#                 straight through, so a loop's body counts once.
set -euo pipefail
cuobjdump=$1 libraries=$2 kernel=$3
shift 3
[ $# -gt 0 ] || { echo "check_sass: no check given" >&2; exit 2; }
PATH="$(dirname "$(readlink -f "$cuobjdump")"):$PATH"
sass=""
IFS=';' read -ra objects <<<"$libraries"
for object in "${objects[@]}"; do sass+=$("$cuobjdump" --dump-sass "$object")$'\n'; done
demangle() { if command -v c++filt >/dev/null; then c++filt "$1" | sed 's/([^()]*)$//'; else printf '%s\n' "$1"; fi; }

failed=0
for check in "$@"; do
  case $check in
    has=*) mode=has arg=${check#has=} ;;
    lacks=*) mode=lacks arg=${check#lacks=} ;;
    waits\<=*) mode=waits arg=${check#waits<=} ;;
    *) mode=has arg=$check ;;
  esac
  # One line per sm_90a function named KERNEL: the count (matching mnemonics, or load waits), then the name.
  report=$(printf '%s\n' "$sass" | awk -v kernel="$kernel" -v mode="$mode" -v arg="$arg" '
    function flush() { if (name != "") print count, name; name = "" }
    function uses(text, _r, _n) {  # the registers text names (R4.64 as R4 and R5, not UR4) into used[]
      delete used
      text = " " text
      while (match(text, /[^A-Z_]R[0-9]+(\.64)?/)) {
        _r = substr(text, RSTART + 2, RLENGTH - 2); _n = _r + 0; used[_n] = 1
        if (index(_r, ".64")) used[_n + 1] = 1
        text = substr(text, RSTART + RLENGTH)
      }
    }
    /code for sm_/ { flush(); arch = $NF }
    /Function :/ { flush(); if (arch == "sm_90a" && match($NF, kernel)) { name = $NF; count = 0; delete owed } }
    name != "" && /\/\*[0-9a-f]+\*\// {
      line = $0; sub(/^[ \t]*\/\*[0-9a-f]+\*\/[ \t]*/, "", line); sub(/;.*/, "", line)
      sub(/^@!?U?P[T0-9]+[ \t]+/, "", line)
      op = line; sub(/[ \t].*/, "", op); operands = substr(line, length(op) + 1)
      if (mode == "has" || mode == "lacks") { if (op ~ arg) count++; next }
      # The first operand is written, not read, unless the instruction stores or compares.
      dest = -1
      if (op !~ /^(ST|RED|ATOM)|SETP/ && match(operands, /^[ \t]*R[0-9]+/)) {
        dest = substr(operands, RSTART, RLENGTH); sub(/^[ \t]*R/, "", dest); dest += 0
        operands = substr(operands, RSTART + RLENGTH)
      }
      uses(operands)
      for (r in used) if (r in owed) { count++; delete owed; break }
      if (op ~ /^LDG(\.|$)/ && dest >= 0) {
        width = op ~ /\.128/ ? 4 : op ~ /\.64/ ? 2 : 1
        for (i = 0; i < width; ++i) owed[dest + i] = 1
      }
    }
    END { flush() }')
  [ -n "$report" ] || { echo "check_sass: no sm_90a function matching $kernel in $libraries" >&2; exit 1; }
  while read -r count name; do
    pretty=$(demangle "$name")
    case $mode in
      has) bad=$((count == 0)) what="$count x $arg" ;;
      lacks) bad=$((count > 0)) what="$count x $arg (none allowed)" ;;
      waits) bad=$((count > arg)) what="$count global-load waits (at most $arg)" ;;
    esac
    if [ "$bad" = 1 ]; then
      echo "check_sass: FAIL $pretty: $what" >&2
      failed=1
    else
      echo "$what: $pretty"
    fi
  done <<<"$report"
done
exit $failed
