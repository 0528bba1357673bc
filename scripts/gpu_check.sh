#!/usr/bin/env bash
# The GPU machine's one prepared run, from a bundle built here (scripts/gpu_bundle.sh), in this order within one
# time budget (GPU_CHECK_BUDGET_S, default 450 s: the run must end inside 8 minutes): correctness first (the
# device seam's and the CUDA kernels' tests; our softmax and linear-family entries against PyTorch on the same GPU,
# check_vs_torch.py over the cases `attnzoo bench kernels --write-cases` writes, fla beside the linear ones), then
# the CUDA kernel table (bench_cuda.json), the GPU runner's decode on a 0.6B-shaped model (bench model, in the
# log), the serving proof on that model (gpu_serve_check.sh, gpu_serve.json), then the peers beside the kernels
# (gpu_peers.py: torch's SDPA, cuBLAS, fla, mamba_ssm where present), then, as long as the time allows,
# compute-sanitizer's memcheck and racecheck on the tests. After the tests, the perplexity of a GGUF on the CPU and
# the GPU (gguf_perplexity in gpu_check.json). What the compiled kernels hold (HGMMA in the Hopper prefill) is
# checked where they are built, by the ctests of scripts/check_sass.sh, not here. Every step's limit is cut to the
# budget left, and a step with too little left is skipped and recorded so. Writes gpu_check.log, gpu_check.json
# (each step's exit status, seconds, limit and whether it was killed at it), tests.json (every test binary's
# results) and the steps' own JSON into OUT_DIR (8 files at most: all the device tool returns). Every step runs
# even when an earlier one fails, so on a machine without a GPU (a dry run) the script walks every step, each
# failing fast: python/tests/test_gpu_check_dry_run.py does that in make test.
#   bash scripts/gpu_check.sh [BUNDLE_DIR] [OUT_DIR]
set -uo pipefail
# BUNDLE, OUT_DIR, HERE, OURS; the bundle unpacked.
source "$(dirname "$0")/gpu_bundle_env.sh"
WORK=$(mktemp -d)  # the cases and per-binary test JSON: too many files for OUT_DIR
trap 'rm -rf "$WORK"' EXIT  # the cases, the joined GGUF and the 1.2 GB bench model: never left behind
# The device tool's per-call limit is 600 s and the GPU session's whole lease is 15 minutes: the run ends by this.
BUDGET_S=${GPU_CHECK_BUDGET_S:-450}
LOG="$OUT_DIR/gpu_check.log"
: > "$LOG"
steps=()

skip() {
  echo "=== $1: skipped, ${SECONDS}s spent of ${BUDGET_S}s" | tee -a "$LOG"
  steps+=("{\"step\": \"$1\", \"exit\": null, \"seconds\": 0, \"limit\": null, \"timed_out\": false}")
  return 1
}

# record NAME EXIT SECONDS LIMIT: a run step's verdict, in the log and the JSON; killed at its limit means exit 124,
# or 137 when SIGTERM was not enough.
record() {
  local name=$1 rc=$2 dt=$3 limit=$4 timed_out=false
  (( (rc == 124 || rc == 137) && dt >= limit )) && timed_out=true
  echo "=== $name: exit $rc in ${dt}s$([ $timed_out = true ] && echo ", killed at its limit of ${limit}s")" | tee -a "$LOG"
  steps+=("{\"step\": \"$name\", \"exit\": $rc, \"seconds\": $dt, \"limit\": $limit, \"timed_out\": $timed_out}")
}

# step NAME TIMEOUT_S COMMAND...: runs it with its output in the log, its limit cut to the budget left, and
# records status, time, limit and whether the limit killed it, returning the status. Skipped with under 5 s left.
# SIGKILL 5 s after SIGTERM: a process that ignores SIGTERM (a hung driver call, a compile worker) would otherwise
# hold the run past the device tool's limit, which kills it before gpu_check.json and tests.json are written.
step() {
  local name=$1 limit=$2 left=$((BUDGET_S - SECONDS))
  shift 2
  if (( left < 5 )); then skip "$name"; return; fi
  (( limit > left )) && limit=$left
  echo "=== $name (limit ${limit}s): $*" | tee -a "$LOG"
  local t0=$SECONDS
  timeout -k 5 "$limit" "$@" >> "$LOG" 2>&1
  local rc=$?
  record "$name" $rc $((SECONDS - t0)) "$limit"
  return $rc
}

# step_if_time NAME TIMEOUT_S COMMAND...: the same, skipped (and recorded so) when it could overrun the budget.
step_if_time() {
  if (( SECONDS + $2 > BUDGET_S )); then skip "$1"; return; fi
  step "$@"
}

# step_if_left NAME MIN_S TIMEOUT_S COMMAND...: run with at least MIN_S of the budget left, cut to it: for the
# sanitizers, whose log up to the cut still holds every error found so far.
step_if_left() {
  local name=$1 min=$2
  shift 2
  if (( SECONDS + min > BUDGET_S )); then skip "$name"; return; fi
  step "$name" "$@"
}

# tests_at_once TIMEOUT_S BINARY...: the test binaries all at once, each a step of its own (its limit cut to the
# budget left, its output one section of the log, in the order given, its gtest JSON), so the group takes as long
# as its slowest.
tests_at_once() {
  local limit=$1 left=$((BUDGET_S - SECONDS)) t name
  shift
  if (( left < 5 )); then
    for t; do skip "$(basename "$t")"; done
    return
  fi
  (( limit > left )) && limit=$left
  for t; do
    name=$(basename "$t")
    (
      t0=$SECONDS
      timeout -k 5 "$limit" "${OURS[@]}" "$t" --gtest_output="json:$WORK/tests/$name.json" > "$WORK/tests/$name.log" 2>&1
      echo "$? $((SECONDS - t0))" > "$WORK/tests/$name.rc"
    ) &
  done
  wait
  for t; do
    name=$(basename "$t")
    echo "=== $name (limit ${limit}s): ${OURS[*]} $t (beside the other kernel tests)" | tee -a "$LOG"
    cat "$WORK/tests/$name.log" >> "$LOG"
    local rc=1 dt=$limit
    [ -f "$WORK/tests/$name.rc" ] && read -r rc dt < "$WORK/tests/$name.rc"
    record "$name" "$rc" "$dt" "$limit"
  done
}

# The CUDA test binaries (test_cuda_emulation runs the kernels' device code on the CPU: make test's, not this run's).
cuda_tests=()
for t in "$BUNDLE"/test_*cuda*; do
  case "$(basename "$t")" in *emulation*) ;; *) [ -x "$t" ] && cuda_tests+=("$t") ;; esac
done

step device 30 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
step info 30 "${OURS[@]}" "$BUNDLE/attnzoo" info
mkdir -p "$WORK/tests"
step seam 60 "${OURS[@]}" "$BUNDLE/test_core" --gtest_filter='Device.*' --gtest_output="json:$WORK/tests/test_core.json"
# The kernels' binaries at once (their CPU-side references and checks take a core each, the machine has 16, and the
# GPU is shared between them); the layers', state's, models' and engine's one by one after them: some size a memory pool by the GPU's free memory (gpu_memory_utilization),
# which another process allocating beside them would change under them.
kernel_tests=() other_tests=()
for t in "${cuda_tests[@]}"; do
  case "$(basename "$t")" in test_kernels_*) kernel_tests+=("$t") ;; *) other_tests+=("$t") ;; esac
done
(( ${#kernel_tests[@]} )) && tests_at_once 120 "${kernel_tests[@]}"
for t in "${other_tests[@]}"; do
  name=$(basename "$t")
  step "$name" 90 "${OURS[@]}" "$t" --gtest_output="json:$WORK/tests/$name.json"
done

# Issue 27's proof for GGUF weights: the perplexity of the SmolLM2 GGUF over the project's text (pg1661.txt, which
# gpu_bundle.sh packs; GPU_CHECK_TEXT) on the CPU and on the GPU, within 0.5% of each other; both recorded in
# gpu_check.json. The GGUF (scripts/setup.sh's .models/, or GPU_CHECK_GGUF) is 98 MB, past what travels to the GPU
# machine with the tree: without it the step is skipped and recorded so. 4 windows of 512 tokens, bounded.
GGUF=${GPU_CHECK_GGUF:-$HERE/../.models/SmolLM2-135M-Instruct.Q4_1.gguf}
TEXT=${GPU_CHECK_TEXT:-$BUNDLE/pg1661.txt}
# Or in parts carried by earlier calls (scripts/gpu_split_gguf.sh): joined here, used only when the digest matches.
CARRY=${GPU_CHECK_CARRY:-$HERE/../gpu-carry}
if [ -z "${GPU_CHECK_GGUF:-}" ] && [ ! -f "$GGUF" ] && ls "$CARRY"/*.sha256 > /dev/null 2>&1; then
  digest=$(ls "$CARRY"/*.sha256 | head -1)
  name=$(awk '{print $2}' "$digest")
  cat "$CARRY/$name".part-* > "$WORK/$name" 2>/dev/null
  if (cd "$WORK" && sha256sum --quiet -c "$digest") >> "$LOG" 2>&1; then
    GGUF=$WORK/$name
    echo "=== gguf: $name joined from $(ls "$CARRY/$name".part-* | wc -l) carried parts, digest matches" | tee -a "$LOG"
  else
    echo "=== gguf: the parts in $CARRY do not join into $name (a part missing or damaged)" | tee -a "$LOG"
  fi
fi
ppl_json=null
if [ -f "$GGUF" ] && [ -f "$TEXT" ]; then
  for dev in cpu cuda; do
    step_if_time "gguf-perplexity-$dev" 60 "${OURS[@]}" "$BUNDLE/attnzoo" perplexity -m "$GGUF" -f "$TEXT" -c 512 \
      --chunks 4 --device "$dev"
  done
  # The last "Final estimate: PPL = X +/- Y" of each device's step in the log.
  ppl_json=$(python3 - "$LOG" <<'PY'
import json, re, sys
log, ppl, dev = open(sys.argv[1]).read().splitlines(), {}, None
for line in log:
    m = re.match(r"=== gguf-perplexity-(cpu|cuda) \(limit", line)
    if m:
        dev = m.group(1)
    m = re.search(r"Final estimate: PPL = ([0-9.]+)", line)
    if m and dev:
        ppl[dev] = float(m.group(1))
if "cpu" in ppl and "cuda" in ppl:
    ppl["relative_difference"] = abs(ppl["cuda"] - ppl["cpu"]) / ppl["cpu"]
    ppl["within_0.5%"] = ppl["relative_difference"] <= 0.005
print(json.dumps(ppl))
PY
)
else
  # Under the names a run records, so a reader finds both steps either way.
  [ -f "$GGUF" ] || echo "=== gguf-perplexity: no GGUF at $GGUF nor parts in $CARRY" | tee -a "$LOG"
  [ -f "$TEXT" ] || echo "=== gguf-perplexity: no text at $TEXT" | tee -a "$LOG"
  skip gguf-perplexity-cpu
  skip gguf-perplexity-cuda
fi

# fla (the bundle's, pure Python over the image's triton) for the linear cases' and the peers' fla columns; gguf-py
# (pure Python over numpy) for the GEMV and embedding cases' GGUF block decoding.
mkdir -p "$WORK/pylib"
[ -f "$BUNDLE/fla.tar.xz" ] && tar -C "$WORK/pylib" -xJf "$BUNDLE/fla.tar.xz"
[ -f "$BUNDLE/gguf.tar.xz" ] && tar -C "$WORK/pylib" -xJf "$BUNDLE/gguf.tar.xz"
PYENV=(env "PYTHONPATH=$WORK/pylib${PYTHONPATH:+:$PYTHONPATH}")

# Our entries on seeded cases (softmax and linear family), then PyTorch on the same GPU recomputing them (the
# image's torch and numpy; fla's recurrences and kernels beside the linear ones, their compile time bounded).
step cases 60 "${OURS[@]}" "$BUNDLE/attnzoo" bench kernels --write-cases "$WORK/cases" --device cuda
step vs-torch 150 "${PYENV[@]}" python3 "$HERE/check_vs_torch.py" "$WORK/cases" --json "$OUT_DIR/vs_torch.json"

# Our kernels by CUDA events, then the peers on the same shapes: PyTorch's SDPA backends and the cuBLAS GEMM peak,
# fla's linear-family kernels (each compiled and autotuned on first use: gpu_peers.py bounds itself to what is left
# of the budget, keeping 60 s for the sanitizers, and writes its files after every section).
# Into OUT_DIR only when whole: a failed or killed bench left an empty or cut file there, which no reader parses.
step bench 150 bash -c "$(printf '%q ' "${OURS[@]}") '$BUNDLE/attnzoo' bench kernels --device cuda --json > '$WORK/bench_cuda.json'" &&
  mv "$WORK/bench_cuda.json" "$OUT_DIR/bench_cuda.json"
# The GPU runner on a whole model (issue 27's proof): a random Qwen3-0.6B-shaped bf16 checkpoint (make_bench_model.py,
# the image's torch and transformers), then decode tok/s at batch 1 and 64 over 1k-token sequences beside the floor
# of reading the weights once at the copy bandwidth measured in the same run, then transformers' generate at batch 64
# on the same checkpoint (hf_generate_bench.py); both reports go to the log.
step_if_time bench-model-write 60 "${PYENV[@]}" python3 "$HERE/make_bench_model.py" "$WORK/bench_model"
step_if_time bench-model 120 "${OURS[@]}" "$BUNDLE/attnzoo" bench model -m "$WORK/bench_model" --device cuda \
  --batches 1,64 --context 1024 --steps 16
# The batch-64 peer on the same checkpoint: transformers' greedy generate over the same prompt length.
step_if_time hf-generate 90 "${PYENV[@]}" python3 "$HERE/hf_generate_bench.py" "$WORK/bench_model" --batch 64 \
  --context 1024 --new 16
# Issue 27's serving proof (gpu_serve_check.sh: `bench serve` against `attnzoo serve --device cuda`, random prompts
# and a shared-prefix run) on the same checkpoint, inside this run: the issue asks the whole GPU check to fit one
# prepared run of under 8 minutes. Its own budget ends GPU_CHECK_SERVE_S (0 leaves it out) minus 15 s in, so it
# stops its servers and writes gpu_serve.json itself before this step's limit; its log joins this one.
SERVE_S=${GPU_CHECK_SERVE_S:-120}
# A number of seconds, or the step is recorded as skipped and why: bash arithmetic would read garbage as 0.
[[ $SERVE_S =~ ^[0-9]+$ ]] || { echo "=== serve: GPU_CHECK_SERVE_S='$SERVE_S' is not a number of seconds" | tee -a "$LOG"; SERVE_S=0; skip serve; }
if (( SERVE_S > 0 )); then
  serve_env=(env "GPU_SERVE_BUDGET_S=$((SERVE_S - 15))" GPU_SERVE_STOP_S=8)
  # The checkpoint bench-model-write finished (its tokenizer.json is written last), else the serving check writes one.
  [ -f "$WORK/bench_model/tokenizer.json" ] && serve_env+=("GPU_SERVE_MODEL=$WORK/bench_model")
  mkdir -p "$WORK/serve"
  # Its stdout (each of its step lines, tee'd into its own log) left out: unmarked here, they would read as ours.
  step_if_time serve "$SERVE_S" "${serve_env[@]}" "${PYENV[@]}" bash -c \
    "$(printf '%q ' bash "$HERE/gpu_serve_check.sh" "$BUNDLE" "$WORK/serve") > /dev/null"
  [ -f "$WORK/serve/gpu_serve.json" ] && mv "$WORK/serve/gpu_serve.json" "$OUT_DIR/gpu_serve.json"
  # Each line marked, so its own "=== step" lines are not read as this run's.
  [ -f "$WORK/serve/gpu_serve.log" ] && { echo "=== serve: its gpu_serve.log"; sed 's/^/serve| /' "$WORK/serve/gpu_serve.log"; } >> "$LOG"
fi
peers_s=$((BUDGET_S - SECONDS - 60))
(( peers_s > 200 )) && peers_s=200
if (( peers_s < 20 )) || [ ! -f "$OUT_DIR/bench_cuda.json" ]; then
  [ -f "$OUT_DIR/bench_cuda.json" ] || echo "=== peers: no bench_cuda.json (the bench failed) to measure beside" | tee -a "$LOG"
  skip peers
else
  step peers $((peers_s + 15)) "${PYENV[@]}" python3 "$HERE/gpu_peers.py" "$OUT_DIR/bench_cuda.json" "$OUT_DIR" --budget-s "$peers_s"
fi

# The kernels' own tests first (issues 25 and 26 ask the sanitizers of them; the budget rarely reaches past a
# few binaries), then the layers, state, models and engine that call them.
for t in "${kernel_tests[@]}" "${other_tests[@]}"; do
  name=$(basename "$t")
  # The sanitizers slow kernels by orders of magnitude: every test but the long-sequence ones. Under gVisor
  # compute-sanitizer has refused the device before ("Device not supported"): a short limit, then on. Each runs
  # with 30 s left (the peers keep 60 s for them: asking for the whole 90 skipped every one after a full peers step).
  step_if_left "$name-memcheck" 30 90 "${OURS[@]}" compute-sanitizer --tool memcheck --error-exitcode 3 "$t" --gtest_filter='-*Long*'
  step_if_left "$name-racecheck" 30 90 "${OURS[@]}" compute-sanitizer --tool racecheck --error-exitcode 3 "$t" --gtest_filter='-*Long*'
done

# Every binary by name, its gtest JSON or why there is none: a binary that crashed, was killed or was skipped writes
# none, and one missing name would have hidden it (as one unreadable file would have lost the whole merge).
python3 - "$WORK/tests" "$OUT_DIR/tests.json" test_core "${cuda_tests[@]##*/}" <<'PY'
import json, os, sys
merged = {}
for name in sys.argv[3:]:
    path = os.path.join(sys.argv[1], name + ".json")
    try:
        with open(path) as f:
            merged[name] = json.load(f)
    except FileNotFoundError:
        merged[name] = {"error": "no gtest JSON: the binary crashed, was killed or was skipped (gpu_check.log)"}
    except ValueError as e:
        merged[name] = {"error": f"unreadable gtest JSON: {e}"}
with open(sys.argv[2], "w") as f:
    json.dump(merged, f, indent=1)
PY
{
  echo "{\"steps\": ["
  (IFS=,; echo "${steps[*]}")
  echo "], \"gguf_perplexity\": $ppl_json}"
} > "$OUT_DIR/gpu_check.json"
cat "$OUT_DIR/gpu_check.json"
