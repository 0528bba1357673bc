"""attnzoo bench model on a tiny random Llama: the document's structure, positive rates, the process-wide linear
prefill switch, and errors. No timing thresholds (a shared 2-core machine)."""
import json
import os
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from attnzoo import _core  # noqa: E402
from attnzoo.bench.model import (attention_flops, cache_bytes_read, format_report,  # noqa: E402
                                 layer_matrix_elements, prompt_products, run_model_bench)

HIDDEN, INTER, LAYERS, VOCAB = 64, 128, 2, 256


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("bench_llama")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(hidden_size=HIDDEN, intermediate_size=INTER, num_hidden_layers=LAYERS,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=VOCAB,
                                      max_position_embeddings=128, tie_word_embeddings=False)
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(directory, safe_serialization=True)
    return str(directory)


def _check_doc(doc, prompt, gen, contexts):
    assert doc["model"]["architecture"] == "LlamaForCausalLM"
    assert doc["model"]["layer_kinds"] == ["attention"] and doc["model"]["linear_layers"] == 0
    # q, k, v, o, gate, up, down of every layer plus the lm_head, all f32.
    per_layer = 2 * HIDDEN * HIDDEN + 2 * HIDDEN * (HIDDEN // 2) + 3 * HIDDEN * INTER
    assert doc["model"]["decode_weight_bytes"] == 4 * (LAYERS * per_layer + VOCAB * HIDDEN)
    assert doc["peaks"]["fma"]["gflops"] > 0 and doc["peaks"]["memory"]["gbps"] > 0
    p = doc["prefill"]
    assert p["tokens"] == prompt and p["tokens_per_s"] > 0 and p["linear_gflops"] > 0
    assert p["cached_tokens"] == 0  # every timed prefill computed its whole prompt: none came from the prefix cache
    assert 0 < p["fraction_of_fma_peak"] and p["total_gflops"] > p["linear_gflops"]
    d = doc["decode"]
    assert d["tokens"] == gen and d["context"] == prompt and d["tokens_per_s"] > 0
    assert d["weight_gbps"] > 0 and d["fraction_of_bandwidth"] > 0 and d["total_gbps"] > d["weight_gbps"]
    # The bytes' share of the step and the fixed rest per layer add up to the step.
    bw = doc["peaks"]["memory"]["gbps"] * 1e9
    moved = (d["weight_bytes_per_token"] + d["cache_bytes_per_token"]) / bw
    assert d["bytes_share_of_step"] == pytest.approx(moved / (d["median_step_ms"] * 1e-3))
    assert d["fixed_us_per_layer"] * LAYERS * 1e-6 + moved == pytest.approx(d["median_step_ms"] * 1e-3)
    assert [r["context"] for r in doc["decode_by_context"]] == contexts
    for r in doc["decode_by_context"]:
        assert r["tokens_per_s"] > 0 and r["median_step_ms"] > 0
    # KV bytes read grow with the context (f32 K and V of 2 kv heads x 16 dims per layer and token).
    assert [r["cache_bytes_per_token"] for r in doc["decode_by_context"]] == \
        [LAYERS * 2 * 2 * 16 * 4 * c for c in contexts]


def test_bench_model_document(model_dir):
    said = []
    doc = run_model_bench(model_dir, prompt=16, gen=3, contexts=[24, 4], context_gen=2, dtype="float32",
                          repeats=2, probes="tiny", block_size=8, progress=said.append)
    _check_doc(doc, 16, 3, [4, 24])
    assert doc["settings"]["linear_prefill"] == "chunked" and doc["note"] == ""
    assert any("prefill" in s for s in said)
    json.dumps(doc)  # serialisable as --json prints it


def test_decode_step_timeline(model_dir):
    """--timeline: a projection run on its own appears under its module name (layer index folded), projections
    fused into one job (q / k / v, gate / up at decode sizes) under the block part that ran them; the jobs' time
    and the serial rest add up to the step, and the report prints it."""
    from attnzoo.bench.timeline import op_name
    doc = run_model_bench(model_dir, prompt=8, gen=2, contexts=[8], context_gen=1, dtype="float32", repeats=1,
                          probes="tiny", prefix=0, timeline=True)
    t = doc["timeline"]
    ops = {r["op"]: r for r in t["ops"]}
    assert ops["model.layers.N.self_attn.o_proj"]["jobs"] == LAYERS
    assert ops["model.layers.N.mlp.down_proj"]["jobs"] == LAYERS
    assert ops["mixer"]["jobs"] >= 2 * LAYERS  # the fused q / k / v job and the attention kernel of each layer
    assert ops["ffn"]["jobs"] >= LAYERS and "lm_head" in ops
    assert t["jobs"] == sum(r["jobs"] for r in t["ops"]) and t["parallel_jobs"] <= t["jobs"]
    assert t["inside_jobs_us"] + t["between_jobs_us"] == pytest.approx(t["step_us"], rel=1e-6)
    assert "Decode step timeline" in format_report(doc)
    assert op_name("model.layers.12.mlp.up_proj") == "model.layers.N.mlp.up_proj" and op_name("") == "(unlabelled)"
    with pytest.raises(ValueError, match="not recording"):
        _core.timeline_stop()


def test_pool_report_and_prefix_cache_row(model_dir):
    doc = run_model_bench(model_dir, prompt=16, gen=2, contexts=[20], context_gen=1, dtype="float32", repeats=1,
                          probes="tiny", prefix=48, prefix_new=5, block_size=16)
    pc = doc["prefix_cache"]
    assert pc["prefix"] == 48 and pc["new"] == 5 and pc["cached_tokens"] == 48  # 3 whole blocks of 16
    assert pc["cold_seconds"] > 0 and pc["hit_seconds"] > 0 and pc["speedup"] == pc["cold_seconds"] / pc["hit_seconds"]
    pool = doc["pool"]
    assert pool["block_tokens"] == 16 and pool["num_blocks"] > 0 and pool["bytes"] >= pool["num_blocks"] * pool["block_bytes"]
    # a block holds 16 tokens of every layer's f32 K and V (2 kv heads x 16)
    assert pool["block_bytes"] == 16 * LAYERS * 2 * 2 * 16 * 4
    assert pool["blocks_per_sequence"] == {18: 2, 20: 2, 53: 4}
    assert pool["layer_types"] == {"attention (kv)": {"layers": LAYERS, "dtype": "float32", "bytes_per_token": 2 * 2 * 16 * 4,
                                                      "fixed_bytes": 0}}
    text = format_report(doc)
    assert "prefix cache" in text and "memory pool" in text and "53 tokens -> 4" in text
    # the default prefix (2048) does not fit this model's 128 positions: no row
    doc = run_model_bench(model_dir, prompt=8, gen=1, contexts=[8], context_gen=1, repeats=1, probes="tiny")
    assert doc["prefix_cache"] is None and doc["settings"]["prefix"] == 0


def test_recurrent_prefill_switch_is_set_and_restored(model_dir):
    assert _core.linear_prefill() == "chunked"
    doc = run_model_bench(model_dir, prompt=8, gen=2, contexts=[8], context_gen=1, dtype="bfloat16",
                          linear_prefill="recurrent", repeats=1, probes="tiny")
    assert doc["settings"]["linear_prefill"] == "recurrent"
    assert "no linear" in doc["note"]
    assert doc["model"]["weights_dtype"] == "bfloat16"
    per_layer = 2 * HIDDEN * HIDDEN + 2 * HIDDEN * (HIDDEN // 2) + 3 * HIDDEN * INTER
    assert doc["model"]["decode_weight_bytes"] == 2 * (LAYERS * per_layer + VOCAB * HIDDEN)  # bf16: 2 bytes each
    assert _core.linear_prefill() == "chunked"


def test_batch_invariant_switch_is_set_restored_and_reported(model_dir):
    assert not _core.batch_invariant()
    doc = run_model_bench(model_dir, prompt=8, gen=1, contexts=[8], context_gen=1, repeats=1, probes="tiny",
                          batch_invariant=True)
    assert doc["settings"]["batch_invariant"] is True
    assert not _core.batch_invariant()


def test_linear_prefill_binding():
    try:
        _core.set_linear_prefill("recurrent")
        assert _core.linear_prefill() == "recurrent"
    finally:
        _core.set_linear_prefill("chunked")
    with pytest.raises(ValueError, match="mode"):
        _core.set_linear_prefill("fast")
    assert _core.linear_prefill() == "chunked"


def test_matmul_precision_is_set_restored_and_reported(model_dir):
    import attnzoo
    assert attnzoo.get_float32_matmul_precision() == "auto"
    doc = run_model_bench(model_dir, prompt=16, gen=2, contexts=[16], context_gen=1, dtype="bfloat16",
                          matmul_precision="medium", repeats=1, probes="tiny")
    assert attnzoo.get_float32_matmul_precision() == "auto"
    assert doc["settings"]["matmul_precision"] == "medium"
    p = doc["prefill"]
    if _core.bf16_tiles_enabled():  # rated against the peak of the engine that multiplied
        peak = "amx_bf16" if _core.bf16_tiles_engine() == "AMX tiles" else "bf16_dot"
        assert p["products"] == "bf16" and p["ceiling"] == peak and doc["peaks"][peak]["gflops"] > 0
        assert p["ceiling_gflops"] == doc["peaks"][peak]["gflops"] and doc["note"] == ""
    else:
        assert p["products"] == "f32" and "no effect" in doc["note"]
    assert p["fraction_of_ceiling"] > 0


def _int8_ceiling():
    """The peak the integer rows of this CPU and target are rated against: vpdpbusd where the VNNI rows run, the
    AVX2 rows' own on the other AVX2 / AVX-512 targets, the f32 FMA peak for the portable rows (scalar)."""
    if _core.measure_vnni_int8_peak(0.01, 1)["gflops"] > 0:
        return "vnni_int8"
    return "avx2_int8" if _core.active_target() != "scalar" else "fma"


def test_prompts_on_the_integer_rows_are_rated_against_their_rows_peak(tmp_path):
    """A Q4_0 model whose prompts take the integer rows: the prefill row names int8 products and the peak of the
    rows that ran (vpdpbusd on VNNI, vpmaddubsw + vpmaddwd on AVX2)."""
    from test_gguf_model import _build
    path = _build("llama", "q4_0", str(tmp_path))[1]
    before = _core.linear_prompt_int8()
    try:
        _core.set_linear_prompt_int8("on")
        doc = run_model_bench(path, prompt=16, gen=2, contexts=[16], context_gen=1, repeats=1, probes="tiny")
    finally:
        _core.set_linear_prompt_int8(before)
    p = doc["prefill"]
    ceiling = _int8_ceiling()
    assert p["products"] == "int8" and p["ceiling"] == ceiling
    if ceiling != "fma":
        assert p["ceiling_gflops"] == doc["peaks"][ceiling]["gflops"] > 0
    assert "int8 products" in format_report(doc)
    with pytest.raises(ValueError, match="matmul_precision"):
        run_model_bench(model_dir, matmul_precision="low", probes="tiny")


def test_prompt_products_follow_the_rows_bound():
    """The products a prompt runs on, from inspect's formats: the rows at every length, the rows up to a bound
    (Q5_0 on the AVX2 rows) and the panels beyond it, the panels where no rows take prompts."""
    every = {"prefill_products": "int8", "int8_rows": "VNNI", "int8_prompt_max_tokens": None}
    assert prompt_products(every, 512) == ("int8", "VNNI")
    capped = {"prefill_products": "f32", "int8_rows": "AVX2", "int8_prompt_max_tokens": 48}
    assert prompt_products(capped, 16) == ("int8", "AVX2") and prompt_products(capped, 48) == ("int8", "AVX2")
    assert prompt_products(capped, 64) == ("f32", "")
    assert prompt_products(capped, 8) == ("f32", ""), "8 tokens or fewer run the GEMV, not a prompt route"
    none = {"prefill_products": "bf16", "int8_rows": "", "int8_prompt_max_tokens": 0}
    assert prompt_products(none, 16) == ("bf16", "")


def test_the_avx2_target_rates_its_integer_rows_against_their_own_peak(tmp_path):
    """ATTNZOO_TARGET=avx2 (an AVX2 CPU's instruction mix; on any x86-64 CPU with AVX2): a Q4_0 model's prompts
    take the AVX2 rows by default and the prefill row is rated against their peak, not vpdpbusd's (0 there)."""
    if "avx2" not in _core.supported_targets():
        pytest.skip("no AVX2 on this CPU")
    from test_gguf_model import _build
    path = _build("llama", "q4_0", str(tmp_path))[1]
    code = ("import json; from attnzoo.bench.model import run_model_bench; "
            f"d = run_model_bench({path!r}, prompt=16, gen=2, contexts=[16], context_gen=1, repeats=1, "
            "probes='tiny'); print(json.dumps(d['prefill']))")
    env = dict(os.environ, ATTNZOO_TARGET="avx2")
    env.pop("ATTNZOO_PROMPT_INT8", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    p = json.loads(out.stdout.strip().splitlines()[-1])
    assert p["products"] == "int8" and p["ceiling"] == "avx2_int8" and p["ceiling_gflops"] > 0


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_auto_precision_follows_the_weights(model_dir, dtype):
    """The default "auto": f32-held weights keep f32 products, bfloat16-held ones take bf16 products (where the
    CPU has them), and the report says which."""
    doc = run_model_bench(model_dir, prompt=16, gen=2, contexts=[16], context_gen=1, dtype=dtype, repeats=1,
                          probes="tiny")
    assert doc["settings"]["matmul_precision"] == "auto"
    bf16 = dtype == "bfloat16" and _core.bf16_tiles_enabled()
    assert doc["prefill"]["products"] == ("bf16" if bf16 else "f32")


def test_medium_precision_prefill_tracks_f32(model_dir):
    """bf16 products change prefill logits by about bf16 rounding, not more; decode steps are untouched."""
    import numpy as np
    import attnzoo
    m = attnzoo.Model.load(model_dir)
    ids = np.arange(40, dtype=np.int32) * 5 % VOCAB
    exact = m.forward(ids)
    try:
        attnzoo.set_float32_matmul_precision("medium")
        fast = m.forward(ids)
        one = m.forward(ids[:1])
    finally:
        attnzoo.set_float32_matmul_precision("auto")
    np.testing.assert_array_equal(one, m.forward(ids[:1]))
    err = np.abs(fast - exact).max() / np.abs(exact).max()
    assert err < 3e-2
    if _core.bf16_tiles_enabled():
        assert err > 0  # the bf16 path really ran
    with pytest.raises(ValueError, match="precision"):
        attnzoo.set_float32_matmul_precision("low")


def test_cost_model_counts():
    info = {"num_attention_heads": 2, "head_dim": 4, "layers": [
        {"kind": "attention", "window": 0, "cache": {"bytes_per_token": 10, "fixed_bytes": 0, "window": 0}},
        {"kind": "sliding_attention", "window": 2,
         "cache": {"bytes_per_token": 10, "fixed_bytes": 0, "window": 2}},
        {"kind": "linear_attention", "window": 0, "cache": {"bytes_per_token": 0, "fixed_bytes": 7, "window": 0}},
    ]}
    # 3 queries: full causal sees 1+2+3 keys, the window 1+2+2; 4 FLOPs per pair per head-dim element.
    assert attention_flops(info, 0, 3) == 4.0 * 2 * 4 * (6 + 5)
    assert cache_bytes_read(info, 5) == 10 * 5 + 10 * 2 + 7


def test_layer_matrix_elements(model_dir):
    per_layer = 2 * HIDDEN * HIDDEN + 2 * HIDDEN * (HIDDEN // 2) + 3 * HIDDEN * INTER
    assert layer_matrix_elements(model_dir) == LAYERS * per_layer


def test_errors(model_dir):
    with pytest.raises(ValueError, match="max_position_embeddings"):
        run_model_bench(model_dir, prompt=120, gen=20, probes="tiny")
    with pytest.raises(ValueError, match="linear_prefill"):
        run_model_bench(model_dir, prompt=8, gen=2, linear_prefill="fast", probes="tiny")
    with pytest.raises(ValueError, match="prompt"):
        run_model_bench(model_dir, prompt=0, gen=2, probes="tiny")


def test_command_line_json(model_dir):
    env = dict(os.environ)  # conftest's PYTHONPATH: the checkout and its build tree
    out = subprocess.run([sys.executable, "-m", "attnzoo.bench.model", "model", "-m", model_dir, "--prompt", "8",
                          "--gen", "2", "--contexts", "4,8", "--context-gen", "1", "--repeats", "2", "--probes",
                          "tiny", "--dtype", "float32", "--json", "--block-size", "8", "--kv-cache-dtype", "float32",
                          "--kv-cache-memory", "16M"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    _check_doc(doc, 8, 2, [4, 8])
    assert doc["pool"]["block_tokens"] == 8 and 0 < doc["pool"]["bytes"] <= 16 << 20
    bad = subprocess.run([sys.executable, "-m", "attnzoo.bench.model", "model", "-m", model_dir, "--kv-cache-memory",
                          "lots"], capture_output=True, text=True, env=env, timeout=60)
    assert bad.returncode != 0 and "--kv-cache-memory" in bad.stderr
    text = subprocess.run([sys.executable, "-m", "attnzoo.bench.model", "model", "-m", model_dir, "--prompt", "8",
                           "--gen", "2", "--contexts", "8", "--context-gen", "1", "--repeats", "1", "--probes",
                           "tiny"], capture_output=True, text=True, env=env, timeout=120)
    assert text.returncode == 0, text.stderr
    assert "prefill" in text.stdout and "of bandwidth" in text.stdout and "decode by context" in text.stdout


@pytest.mark.parametrize("case", ["default prompt too long", "prefix too long", "not a checkpoint"])
def test_command_line_refuses_in_one_line_before_any_work(model_dir, tmp_path, case):
    """The model's context is 128: the default --prompt 512, a --prefix past it, or a directory without a config
    end at once with one line naming the problem, before the peak probes or the load."""
    args = {"default prompt too long": ["-m", model_dir],
            "prefix too long": ["-m", model_dir, "--prompt", "8", "--gen", "2", "--prefix", "200"],
            "not a checkpoint": ["-m", str(tmp_path)]}[case]
    # Interpreter start-up only: the refusal takes no longer than printing the help (which loads the same module
    # and runs nothing), timed side by side, fastest of two alternated runs each; a probe would add seconds.
    refused, helped = [], []
    for _ in range(2):
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "attnzoo.bench.model", "model", *args], capture_output=True,
                           text=True, env=dict(os.environ), timeout=60)
        refused.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "attnzoo.bench.model", "model", "--help"], capture_output=True,
                       env=dict(os.environ), timeout=60, check=True)
        helped.append(time.perf_counter() - t0)
    assert min(refused) < 2 * min(helped), (refused, helped)
    assert r.returncode == 1 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnzoo bench model: "), r.stderr
    assert ("config.json" if case == "not a checkpoint" else "context of 128 (max_position_embeddings") in lines[0]



@pytest.mark.parametrize("text", ["[1,2]", "[" * 100000 + "]" * 100000, "", '{"hidden_size": 64, "vocab'])
def test_a_bad_config_json_is_one_line_naming_it(model_dir, tmp_path, text):
    """Not an object, nested past the JSON depth limit, empty, truncated: one line naming the file, no traceback."""
    import shutil
    directory = tmp_path / "m"
    shutil.copytree(model_dir, directory)
    (directory / "config.json").write_text(text)
    r = subprocess.run([sys.executable, "-m", "attnzoo.bench.model", "model", "-m", str(directory)],
                       capture_output=True, text=True, env=dict(os.environ), timeout=60)
    assert r.returncode == 1 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"attnzoo bench model: {directory / 'config.json'}: "), r.stderr

# --- llama.cpp side by side (--llama-bench) ----------------------------------------------------------------

# Prints what llama-bench -o json prints (the fields read, among others it has), from its own arguments, and
# records them: tokens/s are made up from the arguments so the test can tell which row landed where.
FAKE_LLAMA_BENCH = r'''#!{python}
import json, sys
argv = sys.argv[1:]
open({log!r}, "a").write(json.dumps(argv) + "\n")
if {fail!r} == "SIGILL":  # as llama.cpp's AMX kernels built with g++ 12 die on an AMX CPU
    import os, signal
    os.kill(os.getpid(), signal.SIGILL)
if {fail!r}:
    print("llama_model_load: error loading model", file=sys.stderr)
    sys.exit(1)
arg = lambda flag: argv[argv.index(flag) + 1]
p, n, t = int(arg("-p")), int(arg("-n")), int(arg("-t"))
d = int(arg("-d")) if "-d" in argv else 0
tests = [dict(n_prompt=p, n_gen=0, n_depth=d, avg_ts=1000.0 + p, stddev_ts=5.5)] * bool(p) + \
    [dict(n_prompt=0, n_gen=n, n_depth=d, avg_ts=100.0 + n, stddev_ts=0.25)] * bool(n)
print(json.dumps([dict(build_commit="abc1234", build_number=1, cpu_info="Fake CPU", gpu_info="", backends="CPU",
                       model_filename=arg("-m"), model_type="llama ?B F32", n_threads=t,
                       avg_ns=int(1e9 * (x["n_prompt"] + x["n_gen"]) / x["avg_ts"]), samples_ns=[1], samples_ts=[1.0],
                       **x) for x in tests], indent=2))
'''


def _fake_llama_bench(directory, fail=False):
    path = directory / ({False: "llama-bench", True: "llama-bench-fail"}.get(fail) or f"llama-bench-{fail}")
    log = directory / "argv.json"
    path.write_text(FAKE_LLAMA_BENCH.format(python=sys.executable, log=str(log), fail=fail))  # log: every call's argv
    path.chmod(0o755)
    return str(path), log


@pytest.fixture(scope="module")
def model_gguf(model_dir, tmp_path_factory):
    from attnzoo.quant import quantize_checkpoint
    path = tmp_path_factory.mktemp("bench_gguf") / "tiny.gguf"
    quantize_checkpoint(model_dir, path, type="F32")
    return str(path)


def test_llama_bench_parse_and_rows(tmp_path):
    from attnzoo.bench import llama_bench as llama
    fake, log = _fake_llama_bench(tmp_path)
    rows = llama.run(fake, "/models/x.gguf", prompt=512, gen=128, threads=3, repeats=2)
    # the prompt test, then generation at the prompt's depth (ours decodes after the prompt)
    assert [json.loads(line) for line in log.read_text().splitlines()] == [
        ["-m", "/models/x.gguf", "-p", "512", "-n", "0", "-t", "3", "-r", "2", "-o", "json"],
        ["-m", "/models/x.gguf", "-p", "0", "-n", "128", "-d", "512", "-t", "3", "-r", "2", "-o", "json"]]
    assert [(r["test"], r["n_prompt"], r["n_gen"], r["n_depth"], r["n_threads"]) for r in rows] == \
        [("pp512", 512, 0, 0, 3), ("tg128 @ d512", 0, 128, 512, 3)]
    assert [r["tokens_per_s"] for r in rows] == [1512.0, 228.0] and rows[0]["stddev_tokens_per_s"] == 5.5
    assert rows[0]["build_commit"] == "abc1234" and rows[0]["cpu_info"] == "Fake CPU"
    doc = {"prefill": {"tokens": 512, "tokens_per_s": 756.0}, "decode": {"tokens": 128, "tokens_per_s": 456.0}}
    cmp = llama.comparison(doc, rows)
    assert [(c["test"], c["ours_tokens_per_s"], c["llama_cpp_tokens_per_s"], c["ratio"]) for c in cmp] == \
        [("pp512", 756.0, 1512.0, 0.5), ("tg128 @ d512", 456.0, 228.0, 2.0)]
    lines = llama.format_rows({"build_commit": "abc1234", "gguf": "/models/x.gguf", "threads": 3, "comparison": cmp})
    assert "abc1234" in lines[0] and "x.gguf" in lines[0] and "threads 3" in lines[0]
    assert lines[3].split() == ["pp512", "756.0", "1512.0", "±", "5.5", "0.50x"]
    assert lines[4].split() == ["tg128", "@", "d512", "456.0", "228.0", "±", "0.2", "2.00x"]
    # generation from an empty cache is not what our decode after the prompt measures: no row beside it
    at_zero = llama.parse_output(json.dumps([{"n_prompt": 0, "n_gen": 128, "n_threads": 3, "avg_ts": 9.0,
                                              "stddev_ts": 0.0, "n_depth": 0}]))
    assert at_zero[0]["test"] == "tg128" and llama.comparison(doc, at_zero) == []
    # a both-ways test (-pg) is named as llama-bench names it, and has no row of ours to stand beside
    both = llama.parse_output(json.dumps([{"n_prompt": 512, "n_gen": 128, "n_threads": 3, "avg_ts": 9.0,
                                           "stddev_ts": 0.0}]))
    assert both[0]["test"] == "pp512+tg128" and llama.comparison(doc, both) == []


@pytest.mark.parametrize("text, match", [("not json", "not JSON"), ("[]", "non-empty"), ("[1]", "not an object"),
                                         ('[{"n_prompt": 8, "n_gen": 0, "n_threads": 1, "stddev_ts": 0}]', "avg_ts"),
                                         ('[{"n_prompt": -1, "n_gen": 0, "n_threads": 1, "avg_ts": 1, "stddev_ts": 0}]',
                                          "n_prompt"),
                                         ('[{"n_prompt": 0, "n_gen": 0, "n_threads": 1, "avg_ts": 1, "stddev_ts": 0}]',
                                          "neither"),
                                         ('[{"n_prompt": 8, "n_gen": 0, "n_threads": 1, "avg_ts": 1, "stddev_ts": 0, '
                                          '"n_depth": -1}]', "n_depth")])
def test_llama_bench_bad_output(text, match):
    from attnzoo.bench import llama_bench as llama
    with pytest.raises(ValueError, match=match):
        llama.parse_output(text)


def test_llama_bench_errors(model_dir, model_gguf, tmp_path):
    from attnzoo.bench import llama_bench as llama
    missing = str(tmp_path / "no-such-llama-bench")
    with pytest.raises(ValueError, match="--llama-bench: .*no-such-llama-bench not found.*build_llama_bench.sh"):
        run_model_bench(model_gguf, prompt=8, gen=2, probes="tiny", llama_bench=missing)
    (tmp_path / "plain").write_text("")
    with pytest.raises(ValueError, match="not an executable"):
        llama.check_executable(str(tmp_path / "plain"))
    fake, _ = _fake_llama_bench(tmp_path)
    with pytest.raises(ValueError, match="needs a GGUF.*attnzoo quantize"):  # an HF directory: llama.cpp cannot read it
        run_model_bench(model_dir, prompt=8, gen=2, probes="tiny", llama_bench=fake)
    failing, _ = _fake_llama_bench(tmp_path, fail=True)
    with pytest.raises(ValueError, match="(?s)exit status 1.*error loading model"):
        llama.run(failing, model_gguf, 8, 2, 1, 1)
    r = subprocess.run([sys.executable, "-m", "attnzoo.bench.model", "model", "-m", model_gguf, "--prompt", "8",
                        "--gen", "2", "--llama-bench", missing], capture_output=True, text=True,
                       env=dict(os.environ), timeout=60)
    assert r.returncode == 1 and r.stdout == "" and "no-such-llama-bench not found" in r.stderr


def test_llama_bench_side_by_side(model_gguf, tmp_path):
    """The whole run on a GGUF: llama-bench gets the same file, lengths, threads and repeats as ours, and its rows
    stand beside ours in the document and the report."""
    fake, log = _fake_llama_bench(tmp_path)
    doc = run_model_bench(model_gguf, prompt=16, gen=3, contexts=[8], context_gen=1, repeats=2, probes="tiny",
                          prefix=0, llama_bench=fake)
    common = ["-t", str(_core.num_threads()), "-r", "2", "-o", "json"]
    assert [json.loads(line) for line in log.read_text().splitlines()] == [
        ["-m", model_gguf, "-p", "16", "-n", "0"] + common, ["-m", model_gguf, "-p", "0", "-n", "3", "-d", "16"] + common]
    lb = doc["llama_bench"]
    assert lb["gguf"] == os.path.abspath(model_gguf) and lb["threads"] == _core.num_threads()
    assert [c["test"] for c in lb["comparison"]] == ["pp16", "tg3 @ d16"]
    pp, tg = lb["comparison"]
    assert pp["ours_tokens_per_s"] == doc["prefill"]["tokens_per_s"] and pp["llama_cpp_tokens_per_s"] == 1016.0
    assert tg["ours_tokens_per_s"] == doc["decode"]["tokens_per_s"] and tg["llama_cpp_tokens_per_s"] == 103.0
    assert pp["ratio"] == pytest.approx(doc["prefill"]["tokens_per_s"] / 1016.0)
    json.dumps(doc)
    text = format_report(doc)
    assert "llama.cpp side by side" in text and "pp16" in text and "tg3" in text


def test_llama_bench_extra_args(model_gguf, tmp_path):
    """--llama-bench-args reach both llama-bench runs after ours; the flags bench model sets itself are refused by
    name, before anything is measured."""
    from attnzoo.bench import llama_bench as llama
    fake, log = _fake_llama_bench(tmp_path)
    llama.run(fake, "/m.gguf", prompt=8, gen=2, threads=1, repeats=1, extra=llama.extra_args("--repack 0 -fa 1"))
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r[-4:] for r in runs] == [["--repack", "0", "-fa", "1"]] * 2
    assert llama.extra_args("") == [] and llama.extra_args("--mmap '0'") == ["--mmap", "0"]
    for text, flag in (("-t 4", "-t"), ("--threads=4", "--threads"), ("-p 64", "-p"), ("-o md", "-o"),
                       ("--repack 0 -d 9", "-d")):
        with pytest.raises(ValueError, match=f"--llama-bench-args: {flag} is set by bench model"):
            llama.extra_args(text)
    with pytest.raises(ValueError, match="--llama-bench-args: .*quotation"):
        llama.extra_args("--repack '0")
    with pytest.raises(ValueError, match="llama_bench_args: only with llama_bench"):
        run_model_bench(model_gguf, prompt=8, gen=2, probes="tiny", llama_bench_args=["--repack", "0"])
    for argv, match in ((["--llama-bench-args", "--repack 0"], "only with --llama-bench"),
                        (["--llama-bench", fake, "--llama-bench-args", "-r 9"], "-r is set by bench model")):
        r = subprocess.run([sys.executable, "-m", "attnzoo.bench.model", "model", "-m", model_gguf, "--prompt", "8",
                            "--gen", "2", *argv], capture_output=True, text=True, env=dict(os.environ), timeout=60)
        assert r.returncode == 2 and r.stdout == "" and match in r.stderr, r.stderr


def test_llama_bench_failure_keeps_our_rows(model_gguf, tmp_path):
    """llama-bench dying after our measurements (here by SIGILL, as llama.cpp's AMX kernels built with g++ 12 do)
    leaves our rows in the document and the report, names the signal, and makes the command's status 1."""
    crashing, log = _fake_llama_bench(tmp_path, fail="SIGILL")
    doc = run_model_bench(model_gguf, prompt=8, gen=2, contexts=[8], context_gen=1, repeats=1, probes="tiny",
                          prefix=0, llama_bench=crashing)
    lb = doc["llama_bench"]
    assert doc["prefill"]["tokens_per_s"] > 0 and doc["decode"]["tokens_per_s"] > 0
    assert lb["rows"] == [] and lb["comparison"] == [] and lb["build_commit"] is None
    assert "killed by SIGILL" in lb["error"] and "--repack 0" in lb["error"] and crashing in lb["error"]
    assert len(log.read_text().splitlines()) == 1  # the prompt run died: no generation run after it
    json.dumps(doc)
    assert f"llama.cpp side by side: {lb['error']}" in format_report(doc)
    failing, _ = _fake_llama_bench(tmp_path, fail=True)
    r = subprocess.run([sys.executable, "-m", "attnzoo.bench.model", "model", "-m", model_gguf, "--prompt", "8",
                        "--gen", "2", "--contexts", "8", "--context-gen", "1", "--repeats", "1", "--probes", "tiny",
                        "--prefix", "0", "--llama-bench", failing], capture_output=True, text=True,
                       env=dict(os.environ), timeout=300)
    assert r.returncode == 1, r.stderr
    assert "prefill" in r.stdout and "llama.cpp side by side: llama-bench failed (exit status 1)" in r.stdout
    assert "error loading model" in r.stdout and "attnzoo bench model: llama-bench failed" in r.stderr
