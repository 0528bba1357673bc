"""The benchmark harness: machine probes, the timing helper, and the kernel table's document at tiny scale.
No timing thresholds: the machine is shared, so only structure and plausibility are checked."""
import json
import math

import pytest

import attnzoo
from attnzoo import _core
from attnzoo.bench import harness, kernels, softmax


def test_fma_peak_is_positive_and_consistent():
    p = _core.measure_fma_peak(0.02, 2)
    assert p["gflops"] > 0.05 and math.isfinite(p["gflops"])
    assert p["threads"] == attnzoo.num_threads()
    assert p["gflops_per_thread"] == pytest.approx(p["gflops"] / p["threads"])
    assert p["target"] == attnzoo.active_target()
    assert p["lanes"] >= 1 and p["chains"] >= 1 and p["runs"] == 2


def test_fma_peak_follows_the_forced_target():
    best = attnzoo.active_target()
    try:
        attnzoo.set_target("scalar")
        p = _core.measure_fma_peak(0.01, 1)
        assert p["target"] == "scalar" and p["lanes"] == 1 and p["gflops"] > 0
    finally:
        attnzoo.set_target(best)


def test_memory_bandwidth_is_positive():
    m = _core.measure_memory_bandwidth(8 << 20, 2)
    assert m["gbps"] > 0 and math.isfinite(m["gbps"])
    assert m["bytes"] == 8 << 20 and m["runs"] == 2 and m["seconds"] > 0


def test_probe_arguments_are_checked():
    with pytest.raises(ValueError, match="seconds"):
        _core.measure_fma_peak(0.0, 1)
    with pytest.raises(ValueError, match="runs"):
        _core.measure_fma_peak(0.01, 0)
    with pytest.raises(ValueError, match="bytes"):
        _core.measure_memory_bandwidth(10, 1)
    with pytest.raises(ValueError, match="scale"):
        _core.bench_config("huge")
    with pytest.raises(ValueError, match="scale"):
        kernels.run_kernels("huge")


def test_median_time_counts_runs_and_warmup():
    calls = []
    t = _core.median_time(lambda: calls.append(1), 2, 3, 3, 0.0)
    assert len(calls) == 5 and t["runs"] == 3
    assert 0 <= t["min_s"] <= t["median_s"] <= t["max_s"]
    with pytest.raises(ValueError, match="max_runs"):
        _core.median_time(lambda: None, 0, 3, 2, 0.0)


def test_visible_pairs_match_a_dense_count():
    import numpy as np
    T = 50
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    assert _core.count_visible_pairs(T, T, True) == T * (T + 1) // 2
    assert _core.count_visible_pairs(T, T, False) == T * T
    assert _core.count_visible_pairs(T, T, True, 7) == int(((j <= i) & (j > i - 7)).sum())
    mask = attnzoo.block_mask(T, block=8, local_blocks=1, global_tokens=8)
    dense = mask.blocks().astype(bool).repeat(8, 0).repeat(8, 1)[:T, :T]
    assert _core.count_visible_pairs(T, T, True, 0, mask) == int((dense & (j <= i)).sum())
    # Bottom-right alignment: 10 queries at positions 40..49 of 50 keys.
    assert _core.count_visible_pairs(10, T, True) == sum(range(41, 51))


@pytest.fixture(scope="module")
def tiny_doc():
    return kernels.run_kernels("tiny")


def test_tiny_document_structure(tiny_doc):
    doc = json.loads(json.dumps(tiny_doc))  # must be plain JSON (no NaN, no objects)
    assert doc["scale"] == "tiny"
    assert doc["peaks"]["fma"]["gflops"] > 0
    assert doc["peaks"]["memory"]["gbps"] > 0
    # Probed at the start and the end of the run; the better one is the reference.
    assert doc["peaks"]["fma"]["gflops"] == max(doc["peaks"]["fma"]["samples"])
    assert doc["peaks"]["memory"]["gbps"] == max(doc["peaks"]["memory"]["samples"])
    assert doc["machine"]["threads"] == attnzoo.num_threads()
    assert doc["machine"]["target"] == attnzoo.active_target() and doc["machine"]["load_average"] >= 0
    rows = {(r["kernel"], r["name"]): r for r in doc["rows"]}
    for name in ("causal f32", "causal bf16", "paged bf16", "sliding window bf16", "block-sparse bf16"):
        r = rows[("softmax prefill", name)]
        assert r["time_ms"] > 0 and r["runs"] >= 2, r
        assert r["gflops"] > 0 and r["peak"] == "fma"
        assert r["fraction_of_peak"] == pytest.approx(r["gflops"] / doc["peaks"]["fma"]["gflops"])
        # torch ran on the same inputs: its time, our ratio, and agreement of the two outputs.
        assert r["torch_ms"] > 0
        assert r["torch_ratio"] == pytest.approx(r["torch_ms"] / r["time_ms"])
        assert r["rel_error_vs_torch"] < 2e-2, r
    for name in ("contiguous bf16", "paged bf16", "paged bf16 block 7", "paged bf16 block 48", "paged bf16 8k",
                 "paged int8", "paged fp8"):
        r = rows[("softmax decode", name)]
        if r["time_ms"] is None:  # decode not implemented yet: the row says so instead of vanishing
            assert r["note"].startswith("skipped") or r["note"].startswith("error"), r
        else:
            assert r["gbps"] > 0 and r["peak"] == "memory"
            assert r["fraction_of_peak"] == pytest.approx(r["gbps"] / doc["peaks"]["memory"]["gbps"])
            assert r["torch_ratio"] > 0 and r["rel_error_vs_torch"] < 2e-2, r


def test_the_table_holds_the_bf16_pairs_section(tiny_doc):
    """The bf16-pairs section (test_bench_bf16_pairs.py) is in the document and printed after the table: its rows
    where the bf16 prefill GEMM runs, else its one skip line."""
    from attnzoo.bench import bf16_pairs
    section = tiny_doc["bf16_pairs"]
    assert section["support"] == bf16_pairs.support()
    assert bool(section["rows"]) == section["support"]["runs"]
    text = kernels.format_table(tiny_doc)
    assert "\n".join(bf16_pairs.format_bf16_pairs(section)) in text


def test_the_table_holds_the_act_quant_section(tiny_doc):
    """The activation quantization's section (test_bench_act_quant.py) is in the document and printed after the
    table."""
    from attnzoo.bench import act_quant
    section = tiny_doc["act_quant"]
    assert [r["form"] for r in section["rows"]] == list(act_quant.FORMS) * len(act_quant._shapes("tiny"))
    assert "\n".join(act_quant.format_act_quant(section)) in kernels.format_table(tiny_doc)


def test_the_table_holds_the_json_mask_section(tiny_doc):
    """JSON mode's and json_schema's mask rows: every byte of the document a state, the mask's mean allowed count
    between none and the whole vocabulary, both times and their ratio set, printed after the table."""
    from attnzoo.bench import json_mask
    section = tiny_doc["json_mask"]
    assert [r["format"] for r in section["rows"]] == ["json_object", "json_schema", "json_schema_typed",
                                                      "json_schema_open", "json_schema_open_walk",
                                                      "json_schema_keys"]
    for r, (_, _, doc) in zip(section["rows"], json_mask.CASES + json_mask.WALK_CASES + json_mask.KEYS_CASES):
        assert r["states"] == len(doc.encode())
        assert 1 <= r["allowed_mean"] < section["vocab"]
        assert r["mask_ms"] > 0 and r["read_ms"] > 0 and r["ratio"] > 0
    schema_row = section["rows"][1]
    assert schema_row["allowed_mean"] < section["rows"][0]["allowed_mean"], "the schema allows fewer tokens"
    assert section["rows"][3]["allowed_mean"] == section["rows"][4]["allowed_mean"], "the sets change no mask"
    assert "\n".join(json_mask.format_json_mask(section)) in kernels.format_table(tiny_doc)


def test_goals_are_judged(tiny_doc):
    headline = next(r for r in tiny_doc["rows"] if r["name"] == "causal f32")
    goals = {g["goal"]: g for g in headline["goals"]}
    idle = tiny_doc["machine"]["idle"]
    assert goals[">=45% of peak"]["met"] == ((headline["fraction_of_peak"] >= 0.45) if idle else None)
    assert goals[">=1.5x torch"]["met"] == (headline["torch_ratio"] >= 1.5)
    # bf16 prefill's targets: faster than our f32 prefill, and at least torch's bf16 SDPA.
    bf16 = next(r for r in tiny_doc["rows"] if r["kernel"] == "softmax prefill" and r["name"] == "causal bf16")
    bf16_goals = {g["goal"]: g["met"] for g in bf16["goals"]}
    assert bf16_goals[">=1x faster than causal f32"] == (headline["time_ms"] >= bf16["time_ms"])
    assert bf16_goals[">=1x torch"] == (bf16["torch_ratio"] >= 1.0)
    text = kernels.format_table(tiny_doc)
    assert "target met" in text or "below target" in text
    assert "MISSED" not in text and "n/a" not in text
    assert ("peak-fraction targets not judged" in text) == (not idle)
    for r in tiny_doc["rows"]:
        assert r["name"] in text


def test_table_names_the_blas_kernels(tiny_doc):
    """The f32 GEMM rows run on OpenBLAS's kernels, whose class the environment can pin below the CPU's: the
    table names the core and, when it is narrower than the active target, says so."""
    blas = tiny_doc["machine"]["blas"]
    assert blas["core"] and "OpenBLAS" in blas["config"]
    text = kernels.format_table(tiny_doc)
    assert f"blas            {blas['core']} kernels" in text
    width = {"haswell": 1, "zen": 1, "skylakex": 2, "cooperlake": 2, "sapphirerapids": 2}  # the common x86 cores
    target_width = {"scalar": 0, "avx2": 1, "avx512": 2, "avx512_bf16": 2}[attnzoo.active_target()]
    if blas["core"].lower() in width:
        assert bool(blas["note"]) == (width[blas["core"].lower()] < target_width), blas
    assert (blas["note"] in text) if blas["note"] else "OpenBLAS runs its" not in text
    # A core attnzoo switched OpenBLAS to (off its fallback for a CPU it does not know) is the one it runs, said so.
    if blas["selected"]:
        assert blas["core"] == blas["selected"] != blas["detected"], blas
        assert blas["choice_note"] in text and f"attnzoo selected {blas['selected']}" in text
    else:
        assert blas["core"] == blas["detected"] and not blas["choice_note"], blas


def test_goal_verdicts_say_what_was_measured():
    """A missed target names the value measured; a target that does not apply gets no verdict at all; a peak
    fraction is not judged on a busy machine, a torch ratio still is."""
    case = harness.BenchCase("demo", "row", "n=1", None, flops=1.0,
                             goals=[harness.fraction_of_peak_at_least(0.5), harness.torch_ratio_at_least(2.0)])
    row = {"fraction_of_peak": 0.25, "torch_ratio": 3.0, "note": ""}
    harness.apply_goals([case], [row], idle=True)
    assert kernels._goal_text(row) == "below target: >=50% of peak (measured 25.0%)"
    harness.apply_goals([case], [row], idle=False)
    assert kernels._goal_text(row) == "target met (>=2x torch)"
    row = {"fraction_of_peak": None, "torch_ratio": None, "note": ""}
    harness.apply_goals([case], [row], idle=True)
    assert kernels._goal_text(row) == ""


def test_flop_count_of_the_headline_row():
    cfg = _core.bench_config("tiny")["prefill"]
    case = softmax.softmax_prefill_cases(_core.bench_config("tiny"))[0]
    T = cfg["T"]
    assert case.flops == 4.0 * (T * (T + 1) // 2) * cfg["Hq"] * cfg["D"]


def test_rows_without_torch(monkeypatch):
    doc = kernels.run_kernels("tiny", use_torch=False)
    assert doc["machine"]["torch"] is None and "torch" in doc["note"]
    for r in doc["rows"]:
        assert r["torch_ms"] is None and r["torch_ratio"] is None
    headline = next(r for r in doc["rows"] if r["name"] == "causal f32")
    assert headline["time_ms"] > 0
    assert {g["goal"]: g["met"] for g in headline["goals"]}[">=1.5x torch"] is None


def test_a_not_implemented_kernel_is_skipped_with_a_note():
    def setup():
        raise NotImplementedError("later")
    case = harness.BenchCase("demo", "missing", "n=1", setup, flops=1.0)
    peaks = {"fma": {"gflops": 1.0}, "memory": {"gbps": 1.0}}
    row = harness.run_case(case, peaks, {"warmup": 0, "min_runs": 1, "max_runs": 1, "min_seconds": 0.0}, True)
    assert row["time_ms"] is None and row["note"] == "skipped: later"


def test_cpp_prefill_table():
    rows = _core.bench_prefill_cases("tiny")
    assert [r["name"] for r in rows] == ["causal f32", "causal bf16", "paged bf16", "sliding window bf16",
                                        "block-sparse bf16"]
    for r in rows:
        assert r["timing"]["median_s"] > 0 and r["timing"]["runs"] >= 2 and r["flops"] > 0


def test_decode_rows_once_decode_exists(monkeypatch):
    """The decode rows fill in by themselves when attention_decode works: stand in a torch version."""
    import torch
    import torch.nn.functional as F
    import attnzoo.decode

    def fake_decode(q, k_cache, v_cache, cache_seqlens, *, block_table=None, out=None, check_inputs=True):
        S = int(cache_seqlens[0])
        if block_table is not None:  # gather the pages back into one sequence
            k_cache = k_cache[block_table[0].long()].flatten(0, 1)[None]
            v_cache = v_cache[block_table[0].long()].flatten(0, 1)[None]
        k, v = k_cache[:, :S].transpose(1, 2), v_cache[:, :S].transpose(1, 2)
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k, v, enable_gqa=True).transpose(1, 2)
        return out.copy_(o) if out is not None else o

    monkeypatch.setattr(attnzoo.decode, "attention_decode", fake_decode)
    config = _core.bench_config("tiny")
    cases = [c for c in softmax.softmax_decode_cases(config) if "bf16" in c.name]  # the stand-in reads bf16 only
    peaks = {"fma": {"gflops": 1.0}, "memory": {"gbps": 10.0}}
    rows = [harness.run_case(c, peaks, config["timing"], True) for c in cases]
    harness.apply_goals(cases, rows)
    d = config["decode"]
    for case, row in zip(cases, rows):
        assert case.bytes == 2 * d["context"] * d["Hkv"] * d["D"] * 2
        assert row["time_ms"] > 0 and row["gbps"] == pytest.approx(case.bytes / row["time_ms"] * 1e-6)
        assert row["fraction_of_peak"] == pytest.approx(row["gbps"] / 10.0)
        assert row["rel_error_vs_torch"] < 1e-2  # the paged layout really holds the same cache
    paged_goals = {g["goal"]: g["met"] for g in rows[1]["goals"]}
    assert paged_goals["within 10% of contiguous bf16"] == (rows[1]["time_ms"] <= 1.1 * rows[0]["time_ms"])


def test_linear_section_compares_every_family_at_every_length(tiny_doc):
    linear = tiny_doc["linear"]
    families = {"gated delta rule", "kda", "simple gla", "gla", "retention", "linear attention", "delta rule",
                "mamba2", "rwkv7"}
    lengths = sorted({r["T"] for r in linear["rows"]})
    assert len(lengths) >= 2
    assert {(r["family"], r["T"]) for r in linear["rows"]} == {(f, T) for f in families for T in lengths}
    for r in linear["rows"]:
        assert r["chunk_ms"] > 0 and r["recurrent_ms"] > 0
        assert r["chunk_vs_recurrent"] == pytest.approx(r["recurrent_ms"] / r["chunk_ms"])
        assert r["softmax_ms"] is None or r["softmax_ms"] > 0
    assert set(linear["crossover"]) == families
    assert "linear family" in kernels.format_table(tiny_doc)



def test_strong_decay_rows_cover_every_exp_decay_family(tiny_doc):
    rows = tiny_doc["linear"]["strong_decay"]
    assert {(r["family"], r["form"]) for r in rows} == {
        ("mamba2", "chunk"), ("mamba2", "recurrent"), ("mamba", "selective scan"), ("rwkv4", "wkv")} | {
        (f, form) for f in ("gla", "simple gla", "kda", "gated delta rule", "rwkv7") for form in ("chunk", "recurrent")}
    for r in rows:
        assert r["normal_ms"] > 0 and r["strong_ms"] > 0
        assert r["strong_vs_normal"] == pytest.approx(r["strong_ms"] / r["normal_ms"])
    assert "strong decays" in kernels.format_table(tiny_doc)


def test_mamba2_shape_rows(tiny_doc):
    from attnzoo.bench.ssm import mamba2_chunk_flops
    rows = tiny_doc["linear"]["mamba2_shapes"]
    assert len({r["T"] for r in rows}) >= 2
    peak = tiny_doc["peaks"]["fma"]["gflops"]
    for r in rows:
        assert r["chunk_vs_recurrent"] == pytest.approx(r["recurrent_ms"] / r["chunk_ms"])
        flops = mamba2_chunk_flops(r["T"], r["H"], r["P"], r["N"], r["G"])
        assert r["chunk_gflops"] == pytest.approx(flops / (r["chunk_ms"] * 1e-3) * 1e-9)
        assert r["fraction_of_peak"] == pytest.approx(r["chunk_gflops"] / peak)
        assert r["met"] is None  # tiny lengths are below the targets' T >= 2048
    assert mamba2_chunk_flops(64, 2, 4, 8, 1, chunk=64) == 2.0 * 64 * (32 * 8 + 2 * (2 * 8 * 4 + 32 * 4))
    # The CUDA bench's count (docs/benchmarks/cuda.md): 48.5 GFLOP at Mamba-2 2.7B's shape, B 4 x T 4096.
    assert mamba2_chunk_flops(4 * 4096, 80, 64, 128, 1) == pytest.approx(48.45e9, rel=1e-3)
    assert "Mamba-2 chunked SSD at model shapes" in kernels.format_table(tiny_doc)

def test_linear_decode_rows(tiny_doc):
    """Gated DeltaNet and KDA decode steps at batch 1 and 16 on each path; in-place rows carry the 60% target."""
    decode = tiny_doc["linear"]["decode"]
    paths = {"kernel in place", "python in place", "python default"}
    assert {(d["family"], d["path"], d["batch"]) for d in decode} == {
        (f, p, b) for f in ("gated delta rule", "kda") for p in paths for b in (1, 16)}
    bandwidth = tiny_doc["peaks"]["memory"]["gbps"]
    for d in decode:
        state_bytes = d["batch"] * d["H"] * d["K"] * d["K"] * 4
        assert d["state_mib"] == pytest.approx(state_bytes / 2**20)
        assert d["ms"] > 0 and math.isfinite(d["ms"]) and d["state_sets"] >= 2
        assert d["gbps"] == pytest.approx(2 * state_bytes / (d["ms"] * 1e-3) * 1e-9)
        assert d["fraction_of_bandwidth"] == pytest.approx(d["gbps"] / bandwidth)
        if d["path"].endswith("in place"):
            judged = (d["fraction_of_bandwidth"] >= 0.6) if tiny_doc["machine"]["idle"] else None
            assert d["target"] == 0.6 and d["met"] == judged
        else:
            assert d["target"] is None and d["met"] is None
    text = kernels.format_table(tiny_doc)
    assert "decode step" in text and "python in place" in text and "of bw" in text


SINGLE_FORM_ROWS = {("mla", "prefill f32 (naive form)"): "fma", ("mla", "absorbed decode f32"): "memory",
                    ("mamba", "selective scan f32 (Mamba-130M)"): "fma",
                    ("mamba", "selective scan f32 (Falcon-Mamba-7B)"): "fma", ("rwkv4", "wkv f32"): "memory",
                    ("rwkv7", "recurrent f32"): "fma", ("causal conv1d", "width 4 silu f32"): "memory",
                    ("projection gemm", "bf16 weights, f32 products"): "fma"}
for _q in ("Q4_0", "Q4_K", "Q5_K", "IQ4_XS", "Q8_0", "BF16"):
    for _n in ("K", "3K"):
        SINGLE_FORM_ROWS[("quantized gemv", f"{_q} weights N={_n}")] = "memory"
for _q in ("Q2_K", "Q3_K", "Q4_K", "IQ4_NL", "IQ4_XS"):
    SINGLE_FORM_ROWS[("weight quantization", f"{_q} scale search")] = "memory"
# The case names its backend, so it times bf16 products wherever the CPU has them, also where the vendor rule
# widens, rated against the peak of the engine that multiplies them (AMX tiles where they run, else vdpbf16ps).
if _core.active_target() == "avx512_bf16":
    SINGLE_FORM_ROWS[("projection gemm", "bf16 weights, bf16 products")] = (
        "amx_bf16" if _core.bf16_tiles_engine() == "AMX tiles" else "bf16_dot")


def test_single_form_kernels_have_rows(tiny_doc):
    """MLA (both forms), the selective scan, RWKV-4, RWKV-7 and the causal conv are in the kernel table, timed and
    rated against the right peak; their torch peers (where they have one) agree with them."""
    rows = {(r["kernel"], r["name"]): r for r in tiny_doc["rows"]}
    peaks = tiny_doc["peaks"]
    for key, peak in SINGLE_FORM_ROWS.items():
        r = rows[key]
        assert r["note"] == "" and r["time_ms"] > 0 and math.isfinite(r["time_ms"]), r
        assert r["peak"] == peak
        if peak in ("fma", "bf16_dot", "amx_bf16"):
            assert r["gflops"] > 0 and r["fraction_of_peak"] == pytest.approx(r["gflops"] / peaks[peak]["gflops"])
        else:
            assert r["gbps"] > 0 and r["fraction_of_peak"] == pytest.approx(r["gbps"] / peaks["memory"]["gbps"])
    for key in (("mla", "prefill f32 (naive form)"), ("mla", "absorbed decode f32"),
                ("causal conv1d", "width 4 silu f32"), ("projection gemm", "bf16 weights, f32 products")):
        r = rows[key]
        assert r["torch_ms"] > 0 and r["rel_error_vs_torch"] < 1e-4, r
    bf16 = rows.get(("projection gemm", "bf16 weights, bf16 products"))
    if bf16:  # torch's bf16 matmul rounds its output to bf16; ours stays f32
        assert bf16["torch_ms"] > 0 and bf16["rel_error_vs_torch"] < 1e-2, bf16
    text = kernels.format_table(tiny_doc)
    for kernel, name in SINGLE_FORM_ROWS:
        assert name in text


def test_single_form_work_counts():
    from attnzoo.bench import single as bench_single
    config = _core.bench_config("tiny")
    cases = {(c.kernel, c.name): c for c in bench_single.single_form_cases(config)}
    assert set(cases) == set(SINGLE_FORM_ROWS)
    s = bench_single._shapes("tiny")
    m = s["mla"]
    pairs = m["T"] * (m["T"] + 1) // 2
    assert cases[("mla", "prefill f32 (naive form)")].flops == (
        2 * m["T"] * m["H"] * (m["dn"] + m["dv"]) * m["r"] + 2 * pairs * m["H"] * (m["dn"] + m["dr"] + m["dv"]))
    assert cases[("mla", "absorbed decode f32")].bytes == 4 * (m["S"] * (m["r"] + m["dr"]) +
                                                             m["H"] * (m["dn"] + m["dv"]) * m["r"])
    assert cases[("causal conv1d", "width 4 silu f32")].bytes == 4 * s["conv"]["T"] * s["conv"]["D"]
    K = s["qgemv"]["K"]
    assert cases[("quantized gemv", "Q4_0 weights N=K")].bytes == K * K // 32 * 18
    assert cases[("quantized gemv", "Q4_K weights N=3K")].bytes == 3 * K * K // 256 * 144
    assert cases[("quantized gemv", "Q5_K weights N=K")].bytes == K * K // 256 * 176
    assert cases[("quantized gemv", "BF16 weights N=K")].bytes == K * K * 2
    assert cases[("weight quantization", "IQ4_XS scale search")].bytes == 3 * K * K * 4
    assert cases[("weight quantization", "Q2_K scale search")].bytes == 3 * K * K * 4
    for case in cases.values():
        assert (case.flops > 0) != (case.bytes > 0)


def test_quantized_gemv_rows_time_the_product_alone(monkeypatch):
    """The quantized gemv rows time a decode token's product over weights prepared once in the case's setup, as a
    model's loader prepares them: the timed body neither builds a Linear nor copies the rows (regrouped where this
    CPU's kernels read them so) again. Its result is the per-call quant.matmul's."""
    import numpy as np
    from attnzoo import quant
    from attnzoo.bench import gguf_blocks, single as bench_single
    built = []
    real = _core.QuantWeights

    def counting(*args):
        built.append(args[1:])
        return real(*args)

    def refused(*args, **kw):
        raise AssertionError("a per-call projection in the timed body")

    monkeypatch.setattr(_core, "QuantWeights", counting)
    monkeypatch.setattr(_core, "quant_matmul", refused)
    cases = [c for c in bench_single.single_form_cases(_core.bench_config("tiny")) if c.kernel == "quantized gemv"]
    assert cases
    for case in cases:
        built.clear()
        ours = case.setup().ours
        first = ours().copy()
        for _ in range(3):
            assert np.array_equal(ours(), first)
        assert len(built) == 1, case.name
        qtype, n, k = built[0]
        w = gguf_blocks.random_weights(case.name.split()[0], n, k, 81)
        x = np.random.default_rng(82).standard_normal((1, k), dtype=np.float32)
        monkeypatch.setattr(_core, "QuantWeights", real)
        assert np.array_equal(first, quant.matmul(x, w, qtype, n, k)), case.name
        monkeypatch.setattr(_core, "QuantWeights", counting)


AVX_VNNI_ROWS = [(q, T) for q in ("Q4_0", "Q4_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS") for T in (1, 4)]


def _check_avx_vnni_section(section, support):
    """Every (format, tokens) row is there; each form the CPU runs is timed, the others say why they are not."""
    import statistics
    assert [(r["format"], r["tokens"]) for r in section["rows"]] == AVX_VNNI_ROWS
    assert section["support"] == support
    for r in section["rows"]:
        if not support["avx2"]:
            assert r["vpmaddubsw_ms"] is None and r["note"] == f"skipped: {support['skipped']}", r
            continue
        assert r["vpmaddubsw_ms"] > 0 and r["vpmaddubsw_gbps"] == pytest.approx(r["bytes"] / r["vpmaddubsw_ms"] * 1e-6)
        if not support["vpdpbusd"]:
            assert r["vpdpbusd_ms"] is None and r["ratio"] is None, r
            assert r["note"] == f"vpdpbusd skipped: {support['skipped']}", r
            continue
        assert r["vpdpbusd_ms"] > 0 and r["vpdpbusd_gbps"] == pytest.approx(r["bytes"] / r["vpdpbusd_ms"] * 1e-6)
        assert len(r["round_ratios"]) == section["rounds"] >= 2
        assert r["ratio"] == pytest.approx(statistics.median(r["round_ratios"]))
        assert all(math.isfinite(x) and x > 0 for x in r["round_ratios"])
        assert r["note"] == "", r
    from attnzoo.bench.avx_vnni import format_avx_vnni
    text = "\n".join(format_avx_vnni(section))
    assert "vpdpbusd (AVX-VNNI) against vpmaddubsw" in text and "ratio" in text
    for r in section["rows"]:
        assert (r["note"] or f"{r['ratio']:.2f}x") in text


def test_avx_vnni_rows_time_both_forms_and_give_the_target_back():
    """The AVX2 regrouped rows on vpdpbusd against vpmaddubsw, alternated over the same prepared weights, with a
    ratio per row where this CPU has AVX-VNNI; the active target and the AVX-VNNI switch are as they were after."""
    from attnzoo.bench import avx_vnni
    target, allowed = attnzoo.active_target(), _core.quant_avx_vnni_allowed()
    section = avx_vnni.run_avx_vnni("tiny", _core.bench_config("tiny")["timing"])
    assert (attnzoo.active_target(), _core.quant_avx_vnni_allowed()) == (target, allowed)
    _check_avx_vnni_section(section, _core.Avx2GroupRows.support())


def test_avx_vnni_rows_say_when_a_form_did_not_run_as_named(monkeypatch):
    """Each timed round checks the vpdpbusd task count: rows whose vpdpbusd form ran no vpdpbusd task are errors,
    not ratios."""
    from attnzoo.bench import avx_vnni
    if not _core.Avx2GroupRows.support()["vpdpbusd"]:
        pytest.skip(_core.Avx2GroupRows.support()["skipped"])
    monkeypatch.setattr(_core, "quant_avx_vnni_tasks", lambda: 7)
    section = avx_vnni.run_avx_vnni("tiny", _core.bench_config("tiny")["timing"])
    for r in section["rows"]:
        assert r["ratio"] is None and r["note"] == "error: the rows did not take vpdpbusd under vpdpbusd", r


def test_avx_vnni_rows_say_skipped_where_it_is_turned_off():
    """ATTNZOO_AVX_VNNI=0 (decided once per process, so in a child): the rows time vpmaddubsw alone and name why
    vpdpbusd is skipped, and asking the scope for vpdpbusd is refused by name."""
    import os
    import subprocess
    import sys
    code = ("import json\nfrom attnzoo import _core\nfrom attnzoo.bench import avx_vnni\n"
            "s = avx_vnni.run_avx_vnni('tiny', _core.bench_config('tiny')['timing'])\n"
            "with _core.Avx2GroupRows() as rows:\n"
            "    for form in ('vpdpbusd', 'vpdpbusd8'):\n"
            "        try:\n            rows.use(form)\n            s.setdefault('refused', []).append(None)\n"
            "        except ValueError as e:\n            s.setdefault('refused', []).append(str(e))\n"
            "print(json.dumps(s))\n")
    env = dict(os.environ, ATTNZOO_AVX_VNNI="0")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    section = json.loads(r.stdout)
    support = section["support"]
    if not support["avx2"]:
        pytest.skip(support["skipped"])
    flags = open("/proc/cpuinfo").read().split()
    assert support["skipped"] == ("AVX-VNNI turned off (ATTNZOO_AVX_VNNI=0)" if "avx_vnni" in flags
                                  else "this CPU has no AVX-VNNI")
    assert not support["vpdpbusd"]
    _check_avx_vnni_section(section, support)
    assert section["refused"][0].startswith("lane_sums: vpdpbusd cannot run: ")
    assert section["refused"][1].startswith("lane_sums: expected 'vpmaddubsw' or 'vpdpbusd'")


def test_kernel_table_has_the_avx_vnni_section(tiny_doc):
    _check_avx_vnni_section(tiny_doc["avx_vnni"], _core.Avx2GroupRows.support())
    assert "AVX2 regrouped rows, lane sums by vpdpbusd" in kernels.format_table(tiny_doc)
