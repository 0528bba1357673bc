"""Regrouped block rows into the bf16 pairs the AMX / AVX-512-BF16 prefill GEMM multiplies, by its two routes side
by side over the same prepared (regrouped) weights: straight (row_group_pairs: each block decoded, scaled and
rounded in registers, the pairs stored once) against the f32 route (dequantize_rows' f32 stored, reloaded and packed
by pack_f32_to_bf16_pairs), for every format the straight route covers (Q4_0, Q4_1, Q8_0, Q4_K, Q5_K, Q6_K,
IQ4_NL, IQ4_XS).

Two kinds of rows: "convert", the conversion alone (QuantWeights.bf16_pairs, 64 rows a pool task), rated in GB/s
of bf16 pairs written, on a matrix whose pairs are several times L2; and "prefill", a short prompt's projection
through the public entry (QuantWeights.matmul: a model's Linear under the default matmul precision), at a 0.5B
model's layer shapes. The routes alternate over rounds (the order swapped each round), so a change of load or clock
falls on both; ratio = the median of the rounds' f32-route time / straight time (above 1: straight is faster). Each
round checks that the route named ran (the straight-pairs count rises under the straight route only, and a prefill
row ran the bf16 GEMM), and the two routes' outputs are compared bit for bit (they are defined to be equal). Where
bf16 products do not run (no
AVX-512-BF16 in the active target, or neither AMX nor vdpbf16ps in use) the section is one line saying why.
"""
import numpy as np

from .. import _core
from .gguf_blocks import random_weights, type_id, weight_bytes
from .harness import round_time, settle_side_by_side

# row_group_pairs decodes each; a miss is an error
FORMATS = ("Q4_0", "Q4_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS")
ROUTES = ("f32", "straight")
# Each round's timing takes this share of the policy's min_seconds / rounds: the section's 40 rows of two routes
# then take ~45 s at full scale and ~4 s with --quick.
TIME_SHARE = 0.25


def _plan(scale):
    """(convert shapes [(N, K)], prefill shapes [(N, K)], token counts, rounds). Convert: 16 MiB of pairs at full
    scale, 4 MiB quick (L2 is 1-2 MiB a core on current x86); prefill: Qwen3-0.6B's q projection (2048 x 1024) and
    its gate and up projections side by side (6144 x 1024)."""
    if scale == "full":
        return [(4096, 2048)], [(2048, 1024), (6144, 1024)], (16, 64), 11
    if scale == "quick":
        return [(2048, 1024)], [(2048, 1024)], (16, 64), 7
    return [(64, 256)], [(64, 256)], (16, 64), 2


def support():
    """{"runs": whether the bf16 prefill GEMM runs here, "engine": its engine or None, "skipped": why not}."""
    engine = _core.bf16_tiles_engine()
    target = _core.active_target()
    if target != "avx512_bf16":
        why = f"the bf16 prefill GEMM needs the avx512_bf16 target (AVX-512-BF16); the active target is {target}"
    elif engine is None:
        why = "bf16 products widen to f32 here (no AMX tiles, vdpbf16ps off: see ATTNZOO_BF16_DOT)"
    else:
        why = ""
    return {"runs": not why, "engine": engine if not why else None, "skipped": why}


def _empty_row(kind, qtype, N, K, T=None):
    pair_bytes = N * ((K + 1) // 2) * 4
    return {"kind": kind, "format": qtype, "tokens": T, "shape": (f"T={T} " if T else "") + f"N={N} K={K}",
            "n": N, "k": K, "bytes": float(pair_bytes if kind == "convert" else weight_bytes(qtype, N, K)),
            "f32_ms": None, "straight_ms": None, "f32_gbps": None, "straight_gbps": None, "ratio": None,
            "round_ratios": [], "note": ""}


def _rows(scale):
    converts, prefills, tokens, _ = _plan(scale)
    rows = []
    for q in FORMATS:
        rows += [_empty_row("convert", q, N, K) for N, K in converts]
        rows += [_empty_row("prefill", q, N, K, T) for N, K in prefills for T in tokens]
    return rows


def _gemms():
    return sum(_core.linear_bf16_gemm_counts())


def _run_once(row, fn, route):
    """Runs fn under `route`; the error it shows, or "" when the route named ran (and a prefill the bf16 GEMM)."""
    _core.linear_bf16_allow_straight_pairs(route == "straight")
    straight, gemms = _core.linear_bf16_straight_pairs(), _gemms()
    fn()
    went = _core.linear_bf16_straight_pairs() > straight
    if went != (route == "straight"):
        return f"error: the rows {'went' if went else 'did not go'} straight under the {route} route"
    if row["kind"] == "prefill" and _gemms() == gemms:
        return "error: the projection did not run the bf16 GEMM"
    return ""


def _measure(row, fn, outputs, timing, rounds, routes):
    """Times the routes in alternating rounds (each round's route checked); fills the row or its note."""
    times = {r: [] for r in routes}
    for i in range(rounds):
        for route in (routes if i % 2 == 0 else routes[::-1]):
            error = _run_once(row, fn[route], route)
            if error:
                row["note"] = error
                return
            times[route].append(round_time(fn[route], timing, rounds, TIME_SHARE))
    settle_side_by_side(row, times, outputs, "f32", "straight", "routes", rate=row["kind"] == "convert")


def _bench_row(row, weights, timing, rounds):
    N, K, T = row["n"], row["k"], row["tokens"]
    if row["kind"] == "convert":
        outputs = {r: np.empty((N, (K + 1) // 2), np.int32) for r in ROUTES}
        fn = {r: (lambda out=outputs[r]: weights.bf16_pairs(out)) for r in ROUTES}
    else:
        x = np.random.default_rng(102).standard_normal((T, K), dtype=np.float32)
        outputs = {r: np.empty((T, N), np.float32) for r in ROUTES}
        fn = {r: (lambda out=outputs[r]: weights.matmul(x, out)) for r in ROUTES}
    _core.linear_bf16_allow_straight_pairs(True)
    before = _core.linear_bf16_straight_pairs()
    fn["straight"]()
    if _core.linear_bf16_straight_pairs() == before:
        row["note"] = f"error: {row['format']} rows did not go straight"
        return
    _measure(row, fn, outputs, timing, rounds, ROUTES)


def run_bf16_pairs(scale, timing, progress=lambda s: None):
    """{"support", "rounds", "threads", "rows": [one per (kind, format, shape)]}: the two routes side by side, or
    no rows where the bf16 prefill GEMM does not run (support's "skipped" says why)."""
    sup = support()
    rounds = _plan(scale)[3]
    doc = {"support": sup, "rounds": rounds, "threads": _core.num_threads(), "rows": []}
    if not sup["runs"]:
        return doc
    doc["rows"] = rows = _rows(scale)
    allowed = _core.linear_bf16_straight_pairs_allowed()
    prompt_int8 = _core.linear_prompt_int8()
    # The prefill rows time the bf16 GEMM's two routes: prompts that would take the integer rows (where those beat
    # the panels: set_linear_prompt_int8) are held on the panels for the section.
    _core.set_linear_prompt_int8("off")
    prepared = {}
    try:
        for row in rows:
            qtype = row["format"]
            progress(f"timing regrouped {qtype} rows to bf16 pairs, {row['kind']} {row['shape']}: f32 vs straight")
            try:
                key = (qtype, row["n"], row["k"])
                if key not in prepared:
                    prepared.clear()  # one format's matrices at a time
                    w = random_weights(qtype, row["n"], row["k"], 101)
                    prepared[key] = _core.QuantWeights(w, type_id(qtype), row["n"], row["k"])
                weights = prepared[key]
                if not weights.owned_bytes:
                    row["note"] = "error: the weights were not regrouped"
                    continue
                _bench_row(row, weights, timing, rounds)
            except Exception as e:  # one broken row must not hide the others
                row["note"] = f"error: {type(e).__name__}: {e}"
    finally:
        _core.linear_bf16_allow_straight_pairs(allowed)
        _core.set_linear_prompt_int8(prompt_int8)
    return doc


def _fmt(x, spec):
    return "-" if x is None else format(x, spec)


def format_bf16_pairs(section):
    """The section's lines for the kernel table."""
    sup = section["support"]
    if not sup["runs"]:
        return ["", f"Regrouped rows to bf16 pairs, straight against the f32 route: skipped: {sup['skipped']}"]
    threads = f"{section['threads']} thread{'s' if section['threads'] != 1 else ''}"
    lines = ["", f"Regrouped rows to bf16 pairs for the prefill GEMM ({sup['engine']}, {threads}), straight against "
             f"the f32 route (dequantize + pack): the same regrouped weights, {section['rounds']} alternated rounds,",
             "outputs compared bit for bit; ratio = f32-route time / straight time (median of the rounds); convert "
             "GB/s = bf16 pairs written"]
    table = [("rows", "format", "shape", "f32 route ms", "GB/s", "straight ms", "GB/s", "ratio", "")]
    for r in section["rows"]:
        table.append((r["kind"], r["format"], r["shape"], _fmt(r["f32_ms"], ".3f"), _fmt(r["f32_gbps"], ".1f"),
                      _fmt(r["straight_ms"], ".3f"), _fmt(r["straight_gbps"], ".1f"),
                      _fmt(r["ratio"], ".2f") + ("x" if r["ratio"] is not None else ""), r["note"]))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]) - 1)]
    for row in table:
        cells = [row[i].rjust(widths[i]) if i >= 3 else row[i].ljust(widths[i]) for i in range(len(widths))]
        lines.append("  ".join(cells + [row[-1]]).rstrip())
    return lines
