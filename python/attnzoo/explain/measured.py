"""Section 6 - measured on this machine: prefill and decode time of softmax vs linear-family kernels.

Uses attnzoo.bench.harness (BenchCase, run_case: the shared median-timing policy and the rate / fraction
of peak arithmetic) on a short sweep, so the numbers mean what `attnzoo bench kernels` numbers mean.
"""
import math

import numpy as np

from .. import _core, attention, attention_decode
from ..bench import harness
from ..linear import chunk_gated_delta_rule, recurrent_gated_delta_rule
from .page import Section, figure, table
from .svg import esc, human_bytes, human_tokens, legend_html, line_chart

ID = "measured"
TITLE = "6. Measured on this machine"

H, D = 4, 64


def _gdn_flops(T):
    """Useful work of Gated DeltaNet per token and head: decay S (KV), S^T k (2KV), rank-1 update (2KV),
    S^T q (2KV); the chunked form does more arithmetic to run in parallel, which is not counted."""
    return 7.0 * D * D * H * T


def _inputs(T, rng):
    f = lambda *s: rng.standard_normal(s).astype(np.float32)
    q, k, v = f(1, T, H, D), f(1, T, H, D), f(1, T, H, D)
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    g = -np.abs(f(1, T, H)) * 0.05
    beta = np.full((1, T, H), 0.5, np.float32)
    return q, k, v, g, beta


def cases_for(T, rng):
    q, k, v, g, beta = _inputs(T, rng)
    out = np.empty_like(q)
    pairs = _core.count_visible_pairs(T, T, True, 0, None)
    shape = f"T={T} H={H} D={D}"
    dq = q[:, -1].copy()
    lens = np.array([T], np.int32)
    state = np.zeros((1, H, D, D), np.float32)
    return [
        harness.BenchCase("prefill", "softmax (flash tiles)", shape,
                        lambda: harness.Prepared(lambda: attention(q, k, v, out=out, check_inputs=False)),
                        flops=4.0 * pairs * H * D),
        harness.BenchCase("prefill", "Gated DeltaNet chunked", shape,
                        lambda: harness.Prepared(lambda: chunk_gated_delta_rule(q, k, v, g, beta)),
                        flops=_gdn_flops(T)),
        harness.BenchCase("prefill", "Gated DeltaNet sequential", shape,
                        lambda: harness.Prepared(lambda: recurrent_gated_delta_rule(q, k, v, g, beta)),
                        flops=_gdn_flops(T)),
        harness.BenchCase("decode", "softmax, context T", shape,
                        lambda: harness.Prepared(lambda: attention_decode(dq, k, v, lens, check_inputs=False)),
                        bytes=2.0 * T * H * D * 4),
        harness.BenchCase("decode", "Gated DeltaNet step", shape,
                        lambda: harness.Prepared(lambda: recurrent_gated_delta_rule(
                            q[:, :1], k[:, :1], v[:, :1], g[:, :1], beta[:, :1], initial_state=state)),
                        bytes=float(state.nbytes)),
    ]


def run_sweep(full=False, progress=None):
    Ts = [256, 512, 1024, 2048] + ([4096, 8192] if full else [])
    timing = ({"warmup": 2, "min_runs": 5, "max_runs": 50, "min_seconds": 0.2} if full else
              {"warmup": 3, "min_runs": 5, "max_runs": 30, "min_seconds": 0.04})
    say = progress or (lambda s: None)
    say("measuring FMA peak and memory bandwidth")
    peaks = {"fma": _core.measure_fma_peak(0.1 if full else 0.03, 3 if full else 2),
             "memory": _core.measure_memory_bandwidth((256 if full else 64) << 20, 3 if full else 2)}
    rng = np.random.default_rng(5)
    rows = []
    for T in Ts:
        say(f"timing T={T}")
        for case in cases_for(T, rng):
            row = harness.run_case(case, peaks, timing, use_torch=False)
            row["T"] = T
            rows.append(row)
    return {"Ts": Ts, "peaks": peaks, "rows": rows, "timing": timing, "threads": _core.num_threads(),
            "target": _core.active_target(), "cpu": _core.cpu_info()["description"]}


def crossover(Ts, softmax_ms, linear_ms):
    """First length where the chunked linear kernel beats softmax prefill (log-interpolated), or None."""
    for i, T in enumerate(Ts):
        if linear_ms[i] < softmax_ms[i]:
            if i == 0:
                return float(T)
            r0 = math.log(softmax_ms[i - 1] / linear_ms[i - 1])
            r1 = math.log(softmax_ms[i] / linear_ms[i])
            f = r0 / (r0 - r1)
            return float(math.exp(math.log(Ts[i - 1]) + f * (math.log(T) - math.log(Ts[i - 1]))))
    return None


def build(ctx):
    doc = run_sweep(full=ctx.full, progress=ctx.progress)
    Ts = doc["Ts"]
    by = {}
    for r in doc["rows"]:
        by.setdefault(r["name"], {})[r["T"]] = r
    ms = lambda name: [by[name][T]["time_ms"] for T in Ts]
    cross = crossover(Ts, ms("softmax (flash tiles)"), ms("Gated DeltaNet chunked"))
    cls = {"softmax (flash tiles)": "c4", "Gated DeltaNet chunked": "c1", "Gated DeltaNet sequential": "c6",
           "softmax, context T": "c4", "Gated DeltaNet step": "c1"}
    prefill = [{"name": n, "cls": cls[n], "points": list(zip(Ts, ms(n)))}
               for n in ("softmax (flash tiles)", "Gated DeltaNet chunked", "Gated DeltaNet sequential")]
    decode = [{"name": n, "cls": cls[n], "points": [(T, 1e3 * t) for T, t in zip(Ts, ms(n))]}
              for n in ("softmax, context T", "Gated DeltaNet step")]
    vlines = [(cross, f"crossover ≈ {cross:.0f}")] if cross and Ts[0] <= cross <= Ts[-1] else []
    c1 = line_chart(prefill, width=640, height=300, xlabel="prompt length T (tokens)", ylabel="prefill time (ms)",
                    xlog=True, ylog=True, xfmt=human_tokens, yfmt=lambda y: f"{y:g}", vlines=vlines, xticks=Ts,
                    label="prefill time vs length")
    c2 = line_chart(decode, width=640, height=260, xlabel="context length (tokens)",
                    ylabel="time per decoded token (µs)", xlog=True, ylog=True, xfmt=human_tokens, xticks=Ts,
                    yfmt=lambda y: f"{y:g}", label="decode time vs context")
    rows, above = [], False
    l3 = _core.cpu_info()["l3_bytes"]
    for r in doc["rows"]:
        note = r.get("note", "")
        if r.get("gbps") is not None and (r.get("fraction_of_peak") or 0) > 1:
            # The bandwidth probe streams a buffer far larger than the caches; a small decode working set is
            # served from the last-level cache, which is faster than memory.
            above = True
            note = (note + "; " if note else "") + "above 100%: its data fits in the last-level cache"
        rate = (f"{r['gflops']:.1f} GFLOP/s" if r.get("gflops") is not None else
                f"{r['gbps']:.1f} GB/s" if r.get("gbps") is not None else "-")
        frac = "-" if r.get("fraction_of_peak") is None else f"{r['fraction_of_peak']:.0%}"
        rows.append([esc(f"{r['kernel']}: {r['name']}"), str(r["T"]),
                     "-" if r["time_ms"] is None else f"{r['time_ms']:.3f}", rate, frac, esc(note)])
    fma, mem = doc["peaks"]["fma"], doc["peaks"]["memory"]
    facts = {"Ts": Ts, "crossover": cross, "peak_gflops": fma["gflops"], "peak_gbps": mem["gbps"],
             "rows": [{k: r.get(k) for k in ("kernel", "name", "T", "time_ms", "gflops", "gbps", "fraction_of_peak")}
                      for r in doc["rows"]]}
    cross_text = (f"the chunked Gated DeltaNet kernel overtakes softmax prefill at about <b>{cross:.0f}</b> tokens"
                  if cross else "softmax prefill stays faster than chunked Gated DeltaNet across this sweep")
    body = [f"<p>Timed here, now: {esc(doc['cpu'])}, {doc['threads']} threads, SIMD target {esc(doc['target'])}; "
            f"measured peaks {fma['gflops']:.1f} GFLOP/s (f32 FMA) and {mem['gbps']:.1f} GB/s (streaming read). "
            f"One layer, {H} heads of {D}, f32, medians through <code>attnzoo.bench</code>'s timing policy "
            f"({'full' if ctx.full else 'quick'} sweep). Softmax prefill does O(T²) work; the chunked linear "
            f"form O(T) with a larger constant; the sequential recurrence is O(T) but one token at a time. "
            f"On this machine {cross_text}.</p>",
            figure(c1 + legend_html(prefill), "softmax's slope is twice the linear kernels' on log-log axes: "
                                              "quadratic vs linear in T."),
            figure(c2 + legend_html(decode), "a softmax decode step reads the whole cache, so it grows with "
                                             "context; a Gated DeltaNet step reads a fixed state."),
            figure(table(["kernel", "T", "ms", "rate", "of peak", "note"], rows),
                   "compute-bound prefill is judged against the FMA peak, memory-bound decode against bandwidth."
                   + (f" Rows above 100% read less than the {human_bytes(l3)} last-level cache: after the first "
                      "call their data comes from the cache, which is faster than the streaming-memory probe."
                      if above else ""),
                   caption="Gated DeltaNet FLOPs count 7·K·V per token and head (the recurrence's work); the "
                           "chunked form's extra arithmetic is not credited.")]
    return Section(ID, TITLE, "".join(body), facts, figures=3)
