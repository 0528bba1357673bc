"""llama.cpp's llama-bench beside `attnzoo bench model`: the same GGUF, prompt, generation length and threads.

scripts/build_llama_bench.sh builds llama-bench from the llama.cpp that the llama-cpp-python sdist vendors. Here it
is run twice, `llama-bench -m MODEL.gguf -p PROMPT -n 0 ...` for the prompt test (n_prompt = PROMPT: "pp512") and
`llama-bench -m MODEL.gguf -p 0 -n GEN -d PROMPT ...` for the generation test at the prompt's depth (n_gen = GEN,
n_depth = PROMPT: "tg128 @ d512"), each with `-t THREADS -r REPEATS -o json`, which prints (stdout) a JSON array
with one object per test, avg_ts / stddev_ts in tokens per second over the repetitions. Our decode runs after the
prompt, so llama.cpp's generation starts from a cache holding as many tokens (its default depth, 0, would let it
skip the attention over them).
"""
import json
import os
import shlex
import signal
import subprocess

from .. import _core


def check_executable(path):
    """ValueError naming --llama-bench when `path` is not an executable file."""
    if not os.path.exists(path):
        raise ValueError(f"--llama-bench: {path} not found (build it with scripts/build_llama_bench.sh)")
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise ValueError(f"--llama-bench: {path} is not an executable file")


def model_gguf(model):
    """The GGUF that llama-bench loads for `model` (a .gguf file, or a directory holding one GGUF); ValueError
    for a Hugging Face directory, which llama.cpp cannot read."""
    gguf = _core.find_model_gguf(model)
    if not gguf:
        raise ValueError(f"--llama-bench: llama.cpp needs a GGUF and {model} is a Hugging Face directory: write one "
                         f"with `attnzoo quantize -m {model} -o MODEL.gguf --type BF16` (or F32, Q8_0, ...) "
                         f"and pass -m MODEL.gguf")
    return gguf


def _test_name(row):
    # llama-bench's own names: pp<N> for a prompt test, tg<N> for generation, pp<N>+tg<M> for both, " @ d<D>" at a
    # depth.
    parts = [f"pp{row['n_prompt']}"] if row["n_prompt"] else []
    name = "+".join(parts + ([f"tg{row['n_gen']}"] if row["n_gen"] else []))
    return name + (f" @ d{row['n_depth']}" if row.get("n_depth") else "")


def parse_output(text):
    """llama-bench's `-o json` output -> [{test, n_prompt, n_gen, n_depth, n_threads, tokens_per_s,
    stddev_tokens_per_s, model_type, cpu_info, build_commit}]. ValueError naming the field when the output is not
    that (n_depth may be absent: 0)."""
    try:
        tests = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"llama-bench output: not JSON ({e}): {text[:200]!r}") from None
    if not isinstance(tests, list) or not tests:
        raise ValueError("llama-bench output: expected a non-empty JSON array of tests")
    rows = []
    for i, t in enumerate(tests):
        if not isinstance(t, dict):
            raise ValueError(f"llama-bench output: test {i} is not an object")
        for key, kind in (("n_prompt", int), ("n_gen", int), ("n_threads", int), ("avg_ts", (int, float)),
                          ("stddev_ts", (int, float))):
            if not isinstance(t.get(key), kind) or isinstance(t.get(key), bool) or t[key] < 0:
                raise ValueError(f"llama-bench output: test {i}: {key} missing or not a non-negative number")
        depth = t.get("n_depth", 0)
        if not isinstance(depth, int) or isinstance(depth, bool) or depth < 0:
            raise ValueError(f"llama-bench output: test {i}: n_depth not a non-negative number")
        if not t["n_prompt"] and not t["n_gen"]:
            raise ValueError(f"llama-bench output: test {i} has neither prompt nor generated tokens")
        rows.append({"test": _test_name(t), "n_prompt": t["n_prompt"], "n_gen": t["n_gen"], "n_depth": depth,
                     "n_threads": t["n_threads"], "tokens_per_s": float(t["avg_ts"]),
                     "stddev_tokens_per_s": float(t["stddev_ts"]), "model_type": str(t.get("model_type", "")),
                     "cpu_info": str(t.get("cpu_info", "")), "build_commit": str(t.get("build_commit", ""))})
    return rows


# The flags run() sets itself: passing them again would change what the rows stand beside.
_OWN_FLAGS = {"-m": "the model", "--model": "the model", "-p": "--prompt", "--n-prompt": "--prompt",
              "-n": "--gen", "--n-gen": "--gen", "-d": "the depth (--prompt)", "--n-depth": "the depth (--prompt)",
              "-t": "the threads", "--threads": "the threads", "-r": "--repeats", "--repetitions": "--repeats",
              "-o": "the output format", "--output": "the output format", "-pg": "the tests", "-oe": "the output",
              "--output-err": "the output"}


def extra_args(text):
    """--llama-bench-args' value -> a list of llama-bench arguments (shell words), checked by check_args.
    ValueError naming --llama-bench-args for unbalanced quotes."""
    try:
        words = shlex.split(text or "")
    except ValueError as e:
        raise ValueError(f"--llama-bench-args: {e}: {text!r}") from None
    return check_args(words)


def check_args(words):
    """`words` as a list of strings; ValueError naming --llama-bench-args for a flag bench model sets itself."""
    words = [str(w) for w in words]
    for w in words:
        flag = w.split("=", 1)[0]
        if flag in _OWN_FLAGS:
            raise ValueError(f"--llama-bench-args: {flag} is set by bench model ({_OWN_FLAGS[flag]}), not here")
    return words


def run(path, gguf, prompt, gen, threads, repeats, timeout=3600, extra=()):
    """Runs llama-bench for the prompt test and for the generation test at the prompt's depth; returns
    parse_output's rows (prompt test first). `extra`: more llama-bench arguments for both runs (extra_args)."""
    check_executable(path)
    common = ["-t", str(threads), "-r", str(repeats), "-o", "json"] + list(extra)
    rows = []
    if prompt:
        rows += _run_once([path, "-m", gguf, "-p", str(prompt), "-n", "0"] + common, timeout)
    if gen:
        rows += _run_once([path, "-m", gguf, "-p", "0", "-n", str(gen), "-d", str(prompt)] + common, timeout)
    return rows


def _run_once(cmd, timeout):
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ValueError(f"llama-bench: no result after {timeout} s: {' '.join(cmd)}") from None
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise ValueError(f"llama-bench failed ({_exit_reason(done.returncode)}): {' '.join(cmd)}" +
                         (f"\n{tail}" if tail else ""))
    return parse_output(done.stdout)


def _exit_reason(code):
    if code >= 0:
        return f"exit status {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    # SIGILL: an instruction this CPU does not run. llama.cpp's AMX kernels, built with g++ 12, die so on AMX CPUs
    # (their tile configuration is loaded through an intrinsic that g++ 12 lets drop the configuration's stores).
    hint = "; its repacked (AMX) kernels can be left out with --llama-bench-args='--repack 0'" \
        if name == "SIGILL" else ""
    return f"killed by {name}{hint}"


def comparison(doc, rows):
    """Our prefill / decode beside llama.cpp's prompt / generation tests: [{test, ours, llama_cpp, ratio}],
    ratio = ours / llama.cpp's tokens per second (above 1: we are faster). Our decode runs after the prompt: it
    stands beside llama.cpp's generation at that depth."""
    ours = {(doc["prefill"]["tokens"], 0, 0): doc["prefill"]["tokens_per_s"],
            (0, doc["decode"]["tokens"], doc["prefill"]["tokens"]): doc["decode"]["tokens_per_s"]}
    out = []
    for r in rows:
        mine = ours.get((r["n_prompt"], r["n_gen"], r.get("n_depth", 0)))
        if mine is not None:
            out.append({"test": r["test"], "ours_tokens_per_s": mine, "llama_cpp_tokens_per_s": r["tokens_per_s"],
                        "llama_cpp_stddev": r["stddev_tokens_per_s"],
                        "ratio": mine / r["tokens_per_s"] if r["tokens_per_s"] else None})
    return out


def format_rows(section):
    """The report's lines for doc["llama_bench"]."""
    if section.get("error"):
        return [f"llama.cpp side by side: {section['error']}"]
    args = f", arguments {' '.join(section['args'])}" if section.get("args") else ""
    lines = [f"llama.cpp side by side: llama-bench (build {section['build_commit'] or 'unknown'}) on "
             f"{os.path.basename(section['gguf'])}, threads {section['threads']}{args}",
             "  same prompt / generation lengths; both generate after the prompt (llama-bench -d)",
             f"  {'test':>13}  {'attnzoo tok/s':>13}  {'llama.cpp tok/s':>17}  {'ratio':>6}"]
    for c in section["comparison"]:
        ratio = f"{c['ratio']:5.2f}x" if c["ratio"] is not None else "     -"
        lines.append(f"  {c['test']:>13}  {c['ours_tokens_per_s']:13.1f}  "
                     f"{c['llama_cpp_tokens_per_s']:10.1f} ± {c['llama_cpp_stddev']:4.1f}  {ratio}")
    return lines
