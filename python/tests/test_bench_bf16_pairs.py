"""The kernel bench's bf16-pairs section: regrouped rows turned into the bf16 prefill GEMM's pairs straight against
through f32, side by side over the same weights. Structure, the route checks and the bit-for-bit verdict only: no
timing is asserted (the machine is shared)."""
import itertools
import json
import math
import os
import statistics
import subprocess
import sys

import numpy as np
import pytest

from attnzoo import _core
from attnzoo.bench import bf16_pairs, gguf_blocks

TIMING = _core.bench_config("tiny")["timing"]
ROWS = [(kind, q, T) for q in bf16_pairs.FORMATS for kind, T in (("convert", None), ("prefill", 16), ("prefill", 64))]


def _needs_the_gemm():
    support = bf16_pairs.support()
    if not support["runs"]:
        pytest.skip(support["skipped"])


def _section():
    return json.loads(json.dumps(bf16_pairs.run_bf16_pairs("tiny", TIMING)))  # plain JSON


def test_rows_time_both_routes_and_give_the_switch_back():
    """Every (kind, format, tokens) row; each format the straight route decodes has both routes' medians, a ratio
    that is the median of its rounds' and no note (so the outputs were equal bit for bit and every round ran the
    route it names). The switch is on again after."""
    _needs_the_gemm()
    section = _section()
    assert _core.linear_bf16_straight_pairs_allowed()
    assert [(r["kind"], r["format"], r["tokens"]) for r in section["rows"]] == ROWS
    assert section["support"] == bf16_pairs.support() and section["threads"] == _core.num_threads()
    for r in section["rows"]:
        assert r["f32_ms"] > 0, r
        assert r["note"] == "" and r["straight_ms"] > 0, r
        assert len(r["round_ratios"]) == section["rounds"] >= 2
        assert all(math.isfinite(x) and x > 0 for x in r["round_ratios"])
        assert r["ratio"] == pytest.approx(statistics.median(r["round_ratios"]))
        if r["kind"] == "convert":  # GB/s of pairs written: N rows of ceil(K / 2) four-byte pairs
            assert r["bytes"] == r["n"] * ((r["k"] + 1) // 2) * 4
            assert r["straight_gbps"] == pytest.approx(r["bytes"] / r["straight_ms"] * 1e-6)
        else:
            assert r["straight_gbps"] is None and r["bytes"] == gguf_blocks.weight_bytes(r["format"], r["n"], r["k"])
    text = "\n".join(bf16_pairs.format_bf16_pairs(section))
    assert "straight against the f32 route" in text and "compared bit for bit" in text
    for r in section["rows"]:
        assert (r["note"] or f"{r['ratio']:.2f}x") in text


def test_the_conversion_gives_the_same_pairs_by_either_route_and_names_bad_arguments():
    """QuantWeights.bf16_pairs, the section's convert body: the switch takes effect (the straight count rises only
    when it is on), both routes' pairs are the same bits and are the bf16 values of the dequantized weights
    (rounded to nearest even); out, path and the target are checked by name."""
    _needs_the_gemm()
    N, K = 32, 512
    w = gguf_blocks.random_weights("Q4_K", N, K, 7)
    weights = _core.QuantWeights(w, gguf_blocks.type_id("Q4_K"), N, K)
    pairs = {}
    try:
        for allow in (True, False):
            _core.linear_bf16_allow_straight_pairs(allow)
            assert _core.linear_bf16_straight_pairs_allowed() == allow
            before = _core.linear_bf16_straight_pairs()
            pairs[allow] = np.empty((N, K // 2), np.int32)
            weights.bf16_pairs(pairs[allow])
            assert (_core.linear_bf16_straight_pairs() > before) == allow
    finally:
        _core.linear_bf16_allow_straight_pairs(True)
    assert np.array_equal(pairs[True], pairs[False])
    f32 = np.empty(N * K, np.float32)
    _core.dequantize(w, gguf_blocks.type_id("Q4_K"), f32, True)
    bits = f32.view(np.uint32).astype(np.uint64)
    bf16 = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint32)  # finite values: round to nearest even
    assert np.array_equal(pairs[True].view(np.uint32).reshape(-1), bf16[0::2] | (bf16[1::2] << 16))
    with pytest.raises(ValueError, match=r"^out: expected a contiguous \[32, 256\] int32 array"):
        weights.bf16_pairs(np.empty((N, K // 2), np.float32))
    int8 = _core.QuantWeights(w, gguf_blocks.type_id("Q4_K"), N, K, "int8")
    with pytest.raises(ValueError, match=r"^path: bf16 pairs come from the 'auto' path's weights"):
        int8.bf16_pairs(pairs[True])
    target = _core.active_target()
    _core.set_target("avx2")
    try:
        with pytest.raises(ValueError, match=r"^target: the bf16 prefill GEMM needs the avx512_bf16 target"):
            weights.bf16_pairs(pairs[True])
    finally:
        _core.set_target(target)


def test_rows_say_when_a_round_did_not_run_the_route_it_names(monkeypatch):
    """Each round reads the straight-pairs count: a count that rises under the f32 route, or never rises for a
    format the straight route decodes, makes the row an error, not a ratio."""
    _needs_the_gemm()
    counter = itertools.count()
    monkeypatch.setattr(_core, "linear_bf16_straight_pairs", lambda: next(counter))
    for r in _section()["rows"]:
        assert r["ratio"] is None and r["note"] == "error: the rows went straight under the f32 route", r
    monkeypatch.setattr(_core, "linear_bf16_straight_pairs", lambda: 7)
    for r in _section()["rows"]:
        assert r["ratio"] is None and r["note"] == f"error: {r['format']} rows did not go straight", r
    assert _core.linear_bf16_straight_pairs_allowed()


def test_rows_say_when_the_two_routes_outputs_differ(monkeypatch):
    """The routes are defined to give the same bits: outputs that differ (here one bit flipped under the f32
    route) make the row an error rather than a timing."""
    _needs_the_gemm()
    real_allow, real_weights = _core.linear_bf16_allow_straight_pairs, _core.QuantWeights
    straight = {"on": True}

    def allow(on):
        straight["on"] = on
        real_allow(on)

    class FlippedUnderF32:
        def __init__(self, *args):
            self.w = real_weights(*args)
            self.owned_bytes = self.w.owned_bytes

        def bf16_pairs(self, out):
            self.w.bf16_pairs(out)
            out[0, 0] ^= 0 if straight["on"] else 1

        def matmul(self, x, out):
            self.w.matmul(x, out)
            out.view(np.uint32)[0, 0] ^= 0 if straight["on"] else 1

    monkeypatch.setattr(_core, "linear_bf16_allow_straight_pairs", allow)
    monkeypatch.setattr(_core, "QuantWeights", FlippedUnderF32)
    for r in _section()["rows"]:
        assert r["ratio"] is None and r["note"] == "error: the two routes' outputs differ", r


def test_the_section_is_one_skip_line_without_avx512_bf16():
    """ATTNZOO_TARGET=avx2 (decided once per process, so in a child): no rows, and the table's one line says why."""
    code = ("import json\nfrom attnzoo import _core\nfrom attnzoo.bench import bf16_pairs\n"
            "s = bf16_pairs.run_bf16_pairs('tiny', _core.bench_config('tiny')['timing'])\n"
            "print(json.dumps({'section': s, 'lines': bf16_pairs.format_bf16_pairs(s)}))\n")
    env = dict(os.environ, ATTNZOO_TARGET="avx2")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    if r.returncode != 0 and "avx2" in r.stderr and "target" in r.stderr:
        pytest.skip("this CPU has no AVX2")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    want = "the bf16 prefill GEMM needs the avx512_bf16 target (AVX-512-BF16); the active target is avx2"
    assert out["section"]["support"] == {"runs": False, "engine": None, "skipped": want}
    assert out["section"]["rows"] == []
    assert out["lines"] == ["", f"Regrouped rows to bf16 pairs, straight against the f32 route: skipped: {want}"]


def test_one_table_of_block_types_serves_every_section():
    """gguf_blocks' ids are the engine's own (its format table names each id back), and both bench sections and the
    decode GEMV rows draw their formats from it."""
    from attnzoo.bench import avx_vnni, single
    for name in gguf_blocks.F16_SCALES:
        assert _core.quant_type_info(gguf_blocks.type_id(name))[0] == name
    assert (gguf_blocks.type_id("Q4_0"), gguf_blocks.type_id("Q4_K"), gguf_blocks.type_id("BF16")) == (2, 12, 30)
    for names in (bf16_pairs.FORMATS, avx_vnni.FORMATS, single.QGEMV_TYPES):
        assert set(names) <= set(gguf_blocks.F16_SCALES)
    with pytest.raises(ValueError, match=r"^name: unknown GGUF block type 'Q9_9'"):
        gguf_blocks.type_id("Q9_9")
