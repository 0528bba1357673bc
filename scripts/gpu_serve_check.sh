#!/usr/bin/env bash
# Issue 27's serving proof, from the bundle gpu_check.sh runs (scripts/gpu_bundle.sh): `attnzoo serve --device
# cuda` on the random Qwen3-0.6B-shaped checkpoint make_bench_model.py writes (its tokenizer.json included), then
# `bench serve` (serve.py, standard library only) against it: 200 random prompts at 8 requests/s, no failure, TTFT /
# TPOT / ITL reported; then 64 prompts over 8 shared 2048-token prefixes at the same rate, the TTFT of the requests
# the prefix cache served beside the TTFT of those it did not (each response's cached_tokens says which; issue 27
# asks a hit >= 5x faster). The first run warms the server, so the second's misses are not its first prefills.
# Then, with 40 s of the budget left, the same prompts at the same times on a server started with
# --no-prefix-caching: every request cold under the same load, the hits' second yardstick.
# gpu_check.sh runs it as its step `serve` on the checkpoint its model bench wrote, within a slice of its budget
# (GPU_CHECK_SERVE_S), so one device call holds the whole GPU check; alone it is the serving proof of a call of
# its own (GPU_SERVE_BUDGET_S, default 300 s).
# Each server is stopped on every exit, failures included (SIGTERM: it drains, then SIGKILL after
# GPU_SERVE_STOP_S), and the steps bound themselves to GPU_SERVE_BUDGET_S, default 300 s, as gpu_check.sh's do.
# Writes gpu_serve.log (each step's output, the bench tables, the server's output) and gpu_serve.json (each step's
# exit status and seconds, the bench documents, the proof's verdicts) into OUT_DIR (gpu_check.sh keeps the JSON
# beside its own files and joins the log to its own: the device tool returns at most eight files).
#   bash scripts/gpu_serve_check.sh [BUNDLE_DIR] [OUT_DIR]
# GPU_SERVE_MODEL: a checkpoint with a tokenizer.json instead of writing one; GPU_SERVE_DEVICE (default cuda);
# GPU_SERVE_PROMPTS / _RATE / _INPUT_LEN / _OUTPUT_LEN (the random run), GPU_SERVE_PREFIX_LEN / _PREFIXES /
# _PREFIX_PROMPTS (the shared-prefix run); GPU_SERVE_ARGS: more `serve` flags. python/tests/test_gpu_serve_check.py
# runs it whole on the CPU (--device cpu, a tiny checkpoint, small numbers) before the GPU sees it.
set -uo pipefail
# BUNDLE, OUT_DIR, HERE, OURS; the bundle unpacked.
source "$(dirname "$0")/gpu_bundle_env.sh"
# serve.py beside this script in the bundle, in the package in a checkout.
SERVE_PY=$HERE/serve.py
[ -f "$SERVE_PY" ] || SERVE_PY=$HERE/../python/attnzoo/bench/serve.py
WORK=$(mktemp -d)
BUDGET_S=${GPU_SERVE_BUDGET_S:-300}
DEVICE=${GPU_SERVE_DEVICE:-cuda}
PROMPTS=${GPU_SERVE_PROMPTS:-200}
RATE=${GPU_SERVE_RATE:-8}
INPUT_LEN=${GPU_SERVE_INPUT_LEN:-1024}
OUTPUT_LEN=${GPU_SERVE_OUTPUT_LEN:-128}
PREFIX_LEN=${GPU_SERVE_PREFIX_LEN:-2048}
PREFIXES=${GPU_SERVE_PREFIXES:-8}
PREFIX_PROMPTS=${GPU_SERVE_PREFIX_PROMPTS:-64}
STOP_S=${GPU_SERVE_STOP_S:-20}
LOG="$OUT_DIR/gpu_serve.log"
: > "$LOG"
steps=()

skip() {
  echo "=== $1: skipped, ${SECONDS}s spent of ${BUDGET_S}s" | tee -a "$LOG"
  steps+=("{\"step\": \"$1\", \"exit\": null, \"seconds\": 0}")
}

record() {  # NAME EXIT SECONDS
  echo "=== $1: exit $2 in ${3}s" | tee -a "$LOG"
  steps+=("{\"step\": \"$1\", \"exit\": $2, \"seconds\": $3}")
}

# step NAME TIMEOUT_S COMMAND...: gpu_check.sh's, its limit cut to the budget left; skipped with under 5 s left.
step() {
  local name=$1 limit=$2 left=$((BUDGET_S - SECONDS))
  shift 2
  if (( left < 5 )); then skip "$name"; return 1; fi
  (( limit > left )) && limit=$left
  echo "=== $name (limit ${limit}s): $*" | tee -a "$LOG"
  local t0=$SECONDS
  # SIGKILL 5 s after SIGTERM, as gpu_check.sh's: a client that ignores SIGTERM must not hold the run past its budget.
  timeout -k 5 "$limit" "$@" >> "$LOG" 2>&1
  local rc=$?
  record "$name" $rc $((SECONDS - t0))
  return $rc
}

server_pid=
server_url=
server_out=
server_name=
# Stops the server if one runs: SIGTERM drains it (requests in flight get 5 s), SIGKILL past STOP_S. Its exit
# status is the step's (0 after a drain), its output goes into the log.
stop_server() {
  [ -n "$server_pid" ] || return 0
  local t0=$SECONDS rc
  kill -TERM "$server_pid" 2> /dev/null
  for ((i = 0; i < STOP_S * 10; ++i)); do
    kill -0 "$server_pid" 2> /dev/null || break
    sleep 0.1
  done
  kill -KILL "$server_pid" 2> /dev/null
  wait "$server_pid"
  rc=$?
  server_pid=
  record "$server_name-stop" $rc $((SECONDS - t0))
  { echo "=== server output (last 200 lines)"; tail -n 200 "$server_out"; } >> "$LOG"
}
trap stop_server EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# start_server NAME LIMIT_S DIR [FLAG...]: starts `attnzoo serve` on a free port and waits, at most LIMIT_S, for
# "ready"; steps NAME-start and (stop_server) NAME-stop.
start_server() {
  local limit=$2 model=$3 left=$((BUDGET_S - SECONDS))
  server_name=$1
  shift 3
  if (( left < 5 )); then skip "$server_name-start"; return 1; fi
  (( limit > left )) && limit=$left
  # shellcheck disable=SC2086  # GPU_SERVE_ARGS: flags, split on spaces
  local cmd=("${OURS[@]}" "$BUNDLE/attnzoo" serve -m "$model" --port 0 --served-model-name bench --device "$DEVICE"
             --shutdown-grace-seconds 5 ${GPU_SERVE_ARGS:-} "$@")
  echo "=== $server_name-start (limit ${limit}s): ${cmd[*]}" | tee -a "$LOG"
  local t0=$SECONDS rc=124
  # A file of its own per server, made before the server starts: the background job opens (truncates) its output
  # only once it runs, so polling a reused file could read the previous server's "ready" and then an emptied file.
  server_out="$WORK/$server_name.out" server_url=
  : > "$server_out"
  "${cmd[@]}" > "$server_out" 2>&1 &
  server_pid=$!
  echo "=== server pid $server_pid" >> "$LOG"
  while (( SECONDS - t0 < limit )); do
    if grep -q "^attnzoo serve: ready" "$server_out"; then
      server_url=$(grep -m1 -o "listening on http://[^ ]*" "$server_out" | sed 's/listening on //')
      rc=0
      break
    fi
    if ! kill -0 "$server_pid" 2> /dev/null; then
      wait "$server_pid"
      rc=$?
      (( rc == 0 )) && rc=1  # it exited before it was ready
      server_pid=
      { echo "=== server output"; cat "$server_out"; } >> "$LOG"
      break
    fi
    sleep 0.2
  done
  record "$server_name-start" $rc $((SECONDS - t0))
  echo "=== server at ${server_url:-nowhere}" | tee -a "$LOG"
  return $rc
}

# bench NAME TIMEOUT_S JSON ARGS...: serve.py's JSON into JSON, its table into the log.
bench() {
  local name=$1 limit=$2 json=$3
  shift 3
  step "$name" "$limit" bash -c "$(printf '%q ' python3 "$SERVE_PY" serve --base-url "$server_url" --json "$@") > '$json'"
  local rc=$?
  [ -s "$json" ] && python3 -c "import json, sys; sys.path.insert(0, sys.argv[1]); import serve
print(serve.format_report(json.load(open(sys.argv[2]))))" "$(dirname "$SERVE_PY")" "$json" >> "$LOG" 2>&1
  return $rc
}

# Which card gave the numbers (a second call may not get gpu_check.sh's), into the JSON too.
gpu=
case "$DEVICE" in
  cuda*) step device 30 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv &&
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) ;;
esac
MODEL=${GPU_SERVE_MODEL:-}
if [ -z "$MODEL" ]; then
  MODEL=$WORK/bench_model
  step model-write 90 python3 "$HERE/make_bench_model.py" "$MODEL"
fi
# Short answers: the prefill is what differs between a hit and a miss.
prefix_args=(--dataset shared-prefix --prefix-len "$PREFIX_LEN" --num-prefixes "$PREFIXES" --num-prompts
             "$PREFIX_PROMPTS" --input-len 64 --output-len 16 --request-rate "$RATE" --seed 1)
if start_server serve 120 "$MODEL"; then
  bench serve-random 150 "$WORK/random.json" --dataset random --num-prompts "$PROMPTS" --request-rate "$RATE" \
    --input-len "$INPUT_LEN" --output-len "$OUTPUT_LEN"
  bench serve-shared-prefix 90 "$WORK/prefix.json" "${prefix_args[@]}"
fi
stop_server
# The same prompts at the same arrival times (the same seed) on a server started with --no-prefix-caching: every
# request cold under the same load, the second measure of what a hit saves. Only with 40 s of the budget left: the
# server's start from a warm page cache and the 64 prompts' 8 s of arrivals, inside gpu_check.sh's slice.
if [ -s "$WORK/prefix.json" ]; then
  if (( BUDGET_S - SECONDS < 40 )); then
    skip serve-nocache-start
  elif start_server serve-nocache 60 "$MODEL" --no-prefix-caching; then
    bench serve-shared-prefix-nocache 60 "$WORK/prefix_nocache.json" "${prefix_args[@]}"
  fi
  stop_server
fi

python3 - "$WORK" "$OUT_DIR/gpu_serve.json" "$PROMPTS" "$(IFS=,; echo "${steps[*]}")" "$DEVICE" "$gpu" <<'PY'
import json, os, sys
work, out, prompts, steps, device, gpu = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]

def load(name):
    try:
        with open(os.path.join(work, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

random_doc, prefix_doc, nocache_doc = load("random.json"), load("prefix.json"), load("prefix_nocache.json")
speedup = (prefix_doc or {}).get("prefix_ttft", {}).get("ttft_speedup")
# Hits against the same prompts served cold by the server without a prefix cache.
hit_ms = (prefix_doc or {}).get("prefix_ttft", {}).get("hit_ttft_ms", {}).get("median")
cold_ms = nocache_doc["ttft_ms"]["median"] if nocache_doc and nocache_doc["completed"] else None
speedup_nocache = cold_ms / hit_ms if cold_ms and hit_ms else None
proof = {
    "random_all_completed": bool(random_doc) and random_doc["completed"] == prompts and random_doc["failed"] == 0,
    "prefix_ttft_speedup": speedup,
    "prefix_ttft_speedup_at_least_5x": speedup is not None and speedup >= 5,
    "prefix_ttft_speedup_vs_no_caching": speedup_nocache,
}
doc = {"device": device, "gpu": gpu or None, "steps": json.loads(f"[{steps}]"), "serve_random": random_doc,
       "serve_shared_prefix": prefix_doc, "serve_shared_prefix_no_caching": nocache_doc, "proof": proof}
with open(out, "w") as f:
    json.dump(doc, f, indent=1)
print(json.dumps({"steps": doc["steps"], "proof": proof}, indent=1))
PY
rm -rf "$WORK"
# Every step exited 0 (the proof's verdicts are the JSON's to judge).
for s in "${steps[@]}"; do
  [[ $s == *'"exit": 0,'* ]] || exit 1
done
exit 0
