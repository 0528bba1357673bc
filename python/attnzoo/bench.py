"""Kernel benchmark: every kernel at realistic shapes, against this machine's measured peaks and PyTorch.

    python -m attnzoo.bench kernels [--quick] [--json] [--no-torch]

First measures the machine (f32 FMA throughput of the active SIMD target and streaming read bandwidth, on
every thread of attnzoo's pool), then times each benchmark case: our kernel and PyTorch's equivalent run on
the very same tensors in this process. Times are medians after warm-up (the policy is the C++ harness's,
see src/bench/timer.h). Compute-bound rows report GFLOP/s of useful work (masked-out pairs not counted) as a
fraction of the FMA peak; memory-bound rows report GB/s of cache bytes read as a fraction of the bandwidth.

Adding a kernel family = adding a function that returns BenchCase objects and listing it in CASE_BUILDERS.
"""
import argparse
import json
import math
import os
import sys
from dataclasses import dataclass, field
from typing import Callable, List, Optional

import numpy as np

from . import _core

SCALES = ("full", "quick", "tiny")  # "tiny" exists for the tests: seconds, not minutes


@dataclass
class Goal:
    """A performance target printed beside a row. check(row, rows_by_key) -> True / False / None (n/a)."""
    text: str
    check: Callable[[dict, dict], Optional[bool]]


@dataclass
class Prepared:
    ours: Callable[[], object]                     # runs our kernel once, returns its output
    torch: Optional[Callable[[], object]] = None   # the PyTorch equivalent on the same inputs (None: no peer)


@dataclass
class BenchCase:
    kernel: str   # family, e.g. "softmax prefill"
    name: str     # e.g. "causal f32"
    shape: str
    setup: Callable[[], Prepared]  # allocates inputs only when the case runs, so big cases do not pile up
    flops: float = 0.0  # useful FLOPs per call (compute-bound rows)
    bytes: float = 0.0  # bytes that must be read per call (memory-bound rows)
    peak: str = ""      # compute rows rated against another peak than the f32 FMA one ("bf16_dot")
    goals: List[Goal] = field(default_factory=list)

    @property
    def key(self):
        return f"{self.kernel} {self.name}"


# --- goals -------------------------------------------------------------------------------------------------

def fraction_of_peak_at_least(x):
    return Goal(f">={x:.0%} of peak", lambda row, rows: None if row.get("fraction_of_peak") is None
                else row["fraction_of_peak"] >= x)


def torch_ratio_at_least(x):
    return Goal(f">={x:g}x torch", lambda row, rows: None if row.get("torch_ratio") is None
                else row["torch_ratio"] >= x)


def faster_than(other_key, factor):
    def check(row, rows):
        other = rows.get(other_key)
        if other is None or other.get("time_ms") is None or row.get("time_ms") is None:
            return None
        return other["time_ms"] >= factor * row["time_ms"]
    return Goal(f">={factor:g}x faster than {other_key.split(' ', 2)[-1]}", check)


def time_within_of(other_key, tolerance):
    def check(row, rows):
        other = rows.get(other_key)
        if other is None or other.get("time_ms") is None or row.get("time_ms") is None:
            return None
        return row["time_ms"] <= other["time_ms"] * (1 + tolerance)
    return Goal(f"within {tolerance:.0%} of {other_key.split(' ', 2)[-1]}", check)


# --- inputs ------------------------------------------------------------------------------------------------

def _torch():
    try:
        import torch
        return torch
    except ImportError:
        return None


def _randn(shape, dtype, seed):
    """Inputs live in torch when it is installed (so both sides read the same memory), else numpy f32."""
    torch = _torch()
    if torch is not None:
        g = torch.Generator().manual_seed(seed)
        return torch.randn(*shape, generator=g, dtype=torch.float32).to(getattr(torch, dtype))
    if dtype != "float32":
        raise RuntimeError(f"{dtype} inputs need PyTorch (numpy has no bfloat16)")
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def _empty_like(x):
    return x.new_empty(x.shape) if hasattr(x, "new_empty") else np.empty_like(x)


def _rel_rms(got, want):
    torch = _torch()
    if torch is not None and isinstance(got, torch.Tensor):
        got, want = got.double(), want.double()
        return float(((got - want) ** 2).sum().sqrt() / max(float((want ** 2).sum().sqrt()), 1e-300))
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.sqrt(((got - want) ** 2).sum()) / max(np.sqrt((want ** 2).sum()), 1e-300))


# --- softmax prefill ---------------------------------------------------------------------------------------

def _torch_visibility(T, window, block_mask):
    """The boolean [T, T] mask torch needs for the cases it has no flag for (True = attend)."""
    torch = _torch()
    i = torch.arange(T).unsqueeze(1)
    j = torch.arange(T).unsqueeze(0)
    visible = j <= i
    if window:
        visible &= j > i - window
    if block_mask is not None:
        b = block_mask.block
        blocks = torch.from_numpy(block_mask.blocks().astype(bool))
        visible &= blocks.repeat_interleave(b, 0).repeat_interleave(b, 1)[:T, :T]
    return visible


def _prefill_case(cfg, name, dtype, window=None, block_mask=None, goals=(), extra=""):
    from .softmax import attention
    T, Hq, Hkv, D = cfg["T"], cfg["Hq"], cfg["Hkv"], cfg["D"]
    pairs = _core.count_visible_pairs(T, T, True, window or 0, block_mask)

    def setup():
        q, k, v = (_randn((1, T, H, D), dtype, seed) for H, seed in ((Hq, 1), (Hkv, 2), (Hkv, 3)))
        out = _empty_like(q)
        ours = lambda: attention(q, k, v, causal=True, window=window, block_mask=block_mask, out=out,
                                 check_inputs=False)
        torch = _torch()
        if torch is None:
            return Prepared(ours)
        import torch.nn.functional as F
        qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if window is None and block_mask is None:
            peer = lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=True, enable_gqa=True)
        else:
            mask = _torch_visibility(T, window, block_mask)
            peer = lambda: F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, enable_gqa=True)
        return Prepared(ours, lambda: peer().transpose(1, 2))

    return BenchCase("softmax prefill", name, f"T={T} Hq={Hq} Hkv={Hkv} D={D}{extra}", setup,
                     flops=4.0 * pairs * Hq * D, goals=list(goals))


def _prefill_paged_case(cfg, P):
    """Causal bf16 prefill reading K/V from a paged cache (shuffled blocks of P tokens) through the block table."""
    from .softmax import attention
    T, Hq, Hkv, D = cfg["T"], cfg["Hq"], cfg["Hkv"], cfg["D"]
    pairs = _core.count_visible_pairs(T, T, True, 0, None)

    def setup():
        torch = _torch()
        if torch is None:
            raise RuntimeError("bf16 caches need PyTorch")
        q, k, v = (_randn((1, T, H, D), "bfloat16", seed) for H, seed in ((Hq, 1), (Hkv, 2), (Hkv, 3)))
        (k_pages, table), (v_pages, _) = _to_pages(k, P), _to_pages(v, P)
        seqused = torch.tensor([T], dtype=torch.int32)
        out = _empty_like(q)
        ours = lambda: attention(q, k_pages, v_pages, block_table=table, seqused_k=seqused, out=out,
                                 check_inputs=False)
        import torch.nn.functional as F

        def peer():
            kg = _gather_pages(k_pages, table, T).transpose(1, 2)
            vg = _gather_pages(v_pages, table, T).transpose(1, 2)
            return F.scaled_dot_product_attention(q.transpose(1, 2), kg, vg, is_causal=True,
                                                  enable_gqa=True).transpose(1, 2)
        return Prepared(ours, peer)

    return BenchCase("softmax prefill", "paged bf16", f"T={T} Hq={Hq} Hkv={Hkv} D={D} page={P}", setup,
                     flops=4.0 * pairs * Hq * D, goals=[time_within_of("softmax prefill causal bf16", 0.05)])


def softmax_prefill_cases(config):
    cfg = config["prefill"]
    sp = cfg["block_sparse"]
    from .softmax import block_mask
    mask = block_mask(cfg["T"], block=sp["block"], local_blocks=sp["local_blocks"],
                      global_tokens=sp["global_tokens"], stride=sp["stride"], random_blocks=sp["random_blocks"],
                      seed=sp["seed"])
    return [
        _prefill_case(cfg, "causal f32", "float32",
                      goals=[fraction_of_peak_at_least(0.45), torch_ratio_at_least(1.5)]),
        _prefill_case(cfg, "causal bf16", "bfloat16"),
        _prefill_paged_case(cfg, config["decode"]["page_block"]),
        _prefill_case(cfg, "sliding window bf16", "bfloat16", window=cfg["window"],
                      extra=f" window={cfg['window']}"),
        _prefill_case(cfg, "block-sparse bf16", "bfloat16", block_mask=mask,
                      extra=f" block={sp['block']} density={mask.density():.0%}"),
    ]


# --- softmax decode ----------------------------------------------------------------------------------------

def _decode_call(q, k_cache, v_cache, cache_seqlens, out, block_table=None):
    """One place that knows attention_decode's calling convention (flash_attn_with_kvcache's)."""
    from .decode import attention_decode
    return attention_decode(q, k_cache, v_cache, cache_seqlens, block_table=block_table, out=out,
                            check_inputs=False)


def _to_pages(x, P, seed=7):
    """[1, S, H, D] -> pages [n, P, H, D] in a shuffled order (as a long-running server's allocator leaves them)
    and the block table [1, n]."""
    torch = _torch()
    S, rest = x.shape[1], tuple(x.shape[2:])
    n = -(-S // P)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    pages = torch.empty((n, P) + rest, dtype=x.dtype)
    pages[perm] = torch.cat([x, torch.zeros((1, n * P - S) + rest, dtype=x.dtype)], 1).reshape((n, P) + rest)
    return pages, perm.to(torch.int32).reshape(1, n)


def _gather_pages(pages, table, S):
    """What a torch user does with a paged cache before attending: [1, S, H, D]."""
    return pages[table[0]].reshape((1, -1) + tuple(pages.shape[2:]))[:, :S]


def _decode_inputs(S, Hq, Hkv, D):
    """One bf16 query token, bf16 K / V of S tokens, cache_seqlens and an output buffer (torch tensors)."""
    torch = _torch()
    if torch is None:
        raise RuntimeError("bf16 caches need PyTorch")
    q = _randn((1, 1, Hq, D), "bfloat16", 4)
    k, v = _randn((1, S, Hkv, D), "bfloat16", 5), _randn((1, S, Hkv, D), "bfloat16", 6)
    return q, k, v, torch.tensor([S], dtype=torch.int32), torch.empty_like(q)


def _decode_case(cfg, name, paged, goals, page_block=None):
    S, Hq, Hkv, D = cfg["context"], cfg["Hq"], cfg["Hkv"], cfg["D"]
    P = page_block or cfg["page_block"]
    kv_bytes = 2.0 * S * Hkv * D * 2  # K and V, bf16

    def setup():
        q, k, v, seqlens, out = _decode_inputs(S, Hq, Hkv, D)
        import torch.nn.functional as F
        qt = q.transpose(1, 2)
        if not paged:
            ours = lambda: _decode_call(q, k, v, seqlens, out)
            kt, vt = k.transpose(1, 2), v.transpose(1, 2)
            peer = lambda: F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True).transpose(1, 2)
            return Prepared(ours, peer)
        (k_pages, table), (v_pages, _) = _to_pages(k, P), _to_pages(v, P)
        ours = lambda: _decode_call(q, k_pages, v_pages, seqlens, out, block_table=table)

        def peer():
            kg = _gather_pages(k_pages, table, S).transpose(1, 2)
            vg = _gather_pages(v_pages, table, S).transpose(1, 2)
            return F.scaled_dot_product_attention(qt, kg, vg, enable_gqa=True).transpose(1, 2)
        return Prepared(ours, peer)

    shape = f"context={S} Hq={Hq} Hkv={Hkv} D={D}" + (f" page={P}" if paged else "")
    return BenchCase("softmax decode", name, shape, setup, bytes=kv_bytes, goals=goals)


QUANT_CONTEXT = 8192  # the quantized-cache rows and their bf16 baseline (smaller scales keep their own context)


def _decode_quant_case(cfg, kind, goals):
    """Paged decode over an int8 / fp8 (e4m3) cache with per-row scales, as Model.load(kv_cache_dtype=) holds it.
    torch has no quantized-cache attention: its side dequantizes the gathered pages, then attends."""
    S, Hq, Hkv, D, P = min(cfg["context"], QUANT_CONTEXT), cfg["Hq"], cfg["Hkv"], cfg["D"], cfg["page_block"]
    kv_bytes = 2.0 * S * Hkv * (D + 4)  # bytes and f32 scales of K and V

    def setup():
        from .kv_cache import write_kv_paged
        torch = _torch()
        q, k, v, seqlens, out = _decode_inputs(S, Hq, Hkv, D)
        (k_pages, table), (v_pages, _) = _to_pages(k, P), _to_pages(v, P)
        n = k_pages.shape[0]
        stored = torch.int8 if kind == "int8" else torch.uint8
        kq, vq = (torch.zeros((n, P, Hkv, D), dtype=stored) for _ in range(2))
        ks, vs = (torch.zeros((n, P, Hkv)) for _ in range(2))
        slots = torch.arange(n * P, dtype=torch.int64)
        write_kv_paged(k_pages.reshape(-1, Hkv, D), v_pages.reshape(-1, Hkv, D), slots, kq, vq, k_scale=ks,
                       v_scale=vs, kv_cache_dtype=kind)
        from .decode import attention_decode
        ours = lambda: attention_decode(q, kq, vq, seqlens, block_table=table, out=out, check_inputs=False,
                                        k_scale=ks, v_scale=vs, kv_cache_dtype=kind)
        import torch.nn.functional as F

        def dequantized(x, scale):
            values = x.view(torch.float8_e4m3fn).float() if kind == "fp8" else x.float()
            return (values * scale[..., None]).to(torch.bfloat16)

        def peer():
            kg = _gather_pages(dequantized(kq, ks), table, S).transpose(1, 2)
            vg = _gather_pages(dequantized(vq, vs), table, S).transpose(1, 2)
            return F.scaled_dot_product_attention(q.transpose(1, 2), kg, vg, enable_gqa=True).transpose(1, 2)
        return Prepared(ours, peer)

    shape = f"context={S} Hq={Hq} Hkv={Hkv} D={D} page={P}"
    return BenchCase("softmax decode", f"paged {kind}", shape, setup, bytes=kv_bytes, goals=goals)


def softmax_decode_cases(config):
    cfg = config["decode"]
    contiguous = "softmax decode contiguous bf16"
    return [
        _decode_case(cfg, "contiguous bf16", False, [fraction_of_peak_at_least(0.70)]),
        _decode_case(cfg, "paged bf16", True,
                     [fraction_of_peak_at_least(0.70), time_within_of(contiguous, 0.10)]),
        # Odd block sizes: blocks straddle cache lines and key tiles.
        _decode_case(cfg, "paged bf16 block 7", True, [time_within_of(contiguous, 0.10)], page_block=7),
        _decode_case(cfg, "paged bf16 block 48", True, [time_within_of(contiguous, 0.10)], page_block=48),
        # Quantized caches read half the bytes of bf16: where decode is bound by memory they should be ~2x faster.
        _decode_case(dict(cfg, context=min(cfg["context"], QUANT_CONTEXT)), "paged bf16 8k", True, []),
        _decode_quant_case(cfg, "int8", [faster_than("softmax decode paged bf16 8k", 1.6)]),
        _decode_quant_case(cfg, "fp8", [faster_than("softmax decode paged bf16 8k", 1.6)]),
    ]


def single_form_cases(config):
    """MLA, Mamba, RWKV-4, RWKV-7 and the causal conv (bench_single.py, which imports this module)."""
    from .bench_single import single_form_cases as cases
    return cases(config)


CASE_BUILDERS = [softmax_prefill_cases, softmax_decode_cases, single_form_cases]


# --- running -----------------------------------------------------------------------------------------------

def measure_peaks(config):
    """f32 FMA and memory read peaks, plus the bf16-product peak where the target has AVX-512-BF16."""
    p = config["probes"]
    peaks = {"fma": _core.measure_fma_peak(p["fma_seconds"], p["fma_runs"]),
             "memory": _core.measure_memory_bandwidth(p["memory_bytes"], p["memory_runs"])}
    if _core.active_target() == "avx512_bf16":
        peaks["bf16_dot"] = _core.measure_bf16_dot_peak(p["fma_seconds"], p["fma_runs"])
    return peaks


def _better_peaks(first, second):
    """On a shared machine a probe can land in a busy moment: keep the better of two, at start and end."""
    fma = max(first["fma"], second["fma"], key=lambda d: d["gflops"])
    memory = max(first["memory"], second["memory"], key=lambda d: d["gbps"])
    fma["samples"] = [first["fma"]["gflops"], second["fma"]["gflops"]]
    memory["samples"] = [first["memory"]["gbps"], second["memory"]["gbps"]]
    out = {"fma": fma, "memory": memory}
    if "bf16_dot" in first and "bf16_dot" in second:
        out["bf16_dot"] = max(first["bf16_dot"], second["bf16_dot"], key=lambda d: d["gflops"])
    return out


def _time(fn, timing):
    return _core.median_time(fn, timing["warmup"], timing["min_runs"], timing["max_runs"], timing["min_seconds"])


def run_case(case, peaks, timing, use_torch):
    """Times one case (ours, then torch on the same inputs); peaks=None leaves the rate columns empty."""
    row = {"kernel": case.kernel, "name": case.name, "shape": case.shape, "time_ms": None, "runs": 0,
           "gflops": None, "gbps": None, "peak": "memory" if case.bytes else (case.peak or "fma"),
           "fraction_of_peak": None,
           "torch_ms": None, "torch_ratio": None, "rel_error_vs_torch": None, "goals": [], "note": ""}
    try:
        prepared = case.setup()
        ours = _time(prepared.ours, timing)
    except NotImplementedError as e:
        row["note"] = f"skipped: {e}"
        return row
    except Exception as e:  # one broken kernel must not hide the rest of the table
        row["note"] = f"error: {type(e).__name__}: {e}"
        return row
    seconds = ours["median_s"]
    row["time_ms"] = seconds * 1e3
    row["runs"] = ours["runs"]
    if use_torch and prepared.torch is not None:
        try:
            theirs = _time(prepared.torch, timing)
            row["torch_ms"] = theirs["median_s"] * 1e3
            row["torch_ratio"] = theirs["median_s"] / seconds
            row["rel_error_vs_torch"] = _rel_rms(prepared.ours(), prepared.torch())
        except Exception as e:
            row["note"] = f"torch failed: {type(e).__name__}: {e}"
    return row if peaks is None else _rate_row(case, row, peaks)


def _rate_row(case, row, peaks):
    """Fills the rate and the fraction of the machine's peak into a timed row."""
    if row["time_ms"] is None:
        return row
    seconds = row["time_ms"] * 1e-3
    if case.bytes:
        row["gbps"] = case.bytes / seconds * 1e-9
        row["fraction_of_peak"] = row["gbps"] / peaks["memory"]["gbps"]
    else:
        row["gflops"] = case.flops / seconds * 1e-9
        row["fraction_of_peak"] = row["gflops"] / peaks[case.peak or "fma"]["gflops"]
    return row


def _apply_goals(cases, rows):
    by_key = {c.key: r for c, r in zip(cases, rows)}
    for case, row in zip(cases, rows):
        row["goals"] = [{"goal": g.text, "met": g.check(row, by_key)} for g in case.goals]


def run_kernels(scale="full", use_torch=True, progress=None, with_linear=True):
    """Measures the peaks, then every case; returns the document `--json` prints.

    scale: "full" (headline shapes), "quick" (about a minute on 2 cores) or "tiny" (tests only).
    progress: optional callable(str) told what is being measured.
    """
    if scale not in SCALES:
        raise ValueError(f"scale: expected one of {', '.join(SCALES)}, got {scale!r}")
    config = _core.bench_config(scale)
    torch = _torch()
    use_torch = bool(use_torch and torch is not None)
    if torch is not None:
        torch.set_num_threads(_core.num_threads())  # same cores for both sides
    say = progress or (lambda s: None)
    say("measuring FMA peak and memory bandwidth")
    peaks = measure_peaks(config)
    cases = [c for build in CASE_BUILDERS for c in build(config)]
    timed = []
    for case in cases:
        say(f"timing {case.key} ({case.shape})")
        timed.append(run_case(case, None, config["timing"], use_torch))
    linear = None
    if with_linear:
        from .bench_linear import run_linear
        linear = run_linear(scale, config["timing"], peaks, say)
    say("measuring the peaks again")
    peaks = _better_peaks(peaks, measure_peaks(config))
    rows = [_rate_row(case, row, peaks) for case, row in zip(cases, timed)]
    if linear is not None:
        from .bench_linear import rate_decode
        from .bench_ssm import rate_mamba2
        rate_decode(linear["decode"], peaks)
        rate_mamba2(linear["mamba2_shapes"], peaks)
    _apply_goals(cases, rows)
    cpu = _core.cpu_info()
    return {
        "scale": scale,
        "machine": {"cpu": cpu["model"], "threads": _core.num_threads(), "target": _core.active_target(),
                    "load_average": os.getloadavg()[0],
                    "torch": torch.__version__ if use_torch else None,
                    "torch_threads": torch.get_num_threads() if use_torch else None},
        "timing": config["timing"],
        "peaks": peaks,
        "rows": rows,
        "linear": linear,
        "note": "" if use_torch else ("torch comparison disabled (--no-torch)" if torch is not None
                                      else "torch unavailable: no PyTorch ratios"),
    }


# --- printing ----------------------------------------------------------------------------------------------

def _fmt(x, spec, missing="-"):
    return missing if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def _goal_text(row):
    if not row["goals"]:
        return ""
    results = [g["met"] for g in row["goals"]]
    if any(r is False for r in results):
        verdict = "target missed"
    elif all(r is True for r in results):
        verdict = "target met"
    else:
        verdict = "target n/a"
    detail = ", ".join(f"{g['goal']}{'' if g['met'] else (' n/a' if g['met'] is None else ' MISSED')}"
                       for g in row["goals"])
    return f"{verdict} ({detail})"


def format_table(doc):
    m, fma, mem = doc["machine"], doc["peaks"]["fma"], doc["peaks"]["memory"]
    torch_text = f"torch {m['torch']} ({m['torch_threads']} threads)" if m["torch"] else "no torch"
    lines = [
        f"attnzoo bench kernels ({doc['scale']}): {m['cpu']}, {m['threads']} threads, target {m['target']}, "
        f"{torch_text}, load average {m['load_average']:.1f}",
        f"peak f32 FMA    {fma['gflops']:8.1f} GFLOP/s  ({fma['gflops_per_thread']:.1f} per thread, "
        f"{fma['lanes']} lanes x {fma['chains']} chains, {fma['target']}, best of {fma['runs']} at start and "
        "end)",
        f"memory read     {mem['gbps']:8.1f} GB/s     ({mem['bytes'] >> 20} MiB, {mem['threads']} threads, "
        f"best of {mem['runs']} at start and end)",
    ] + ([f"peak bf16 dot   {doc['peaks']['bf16_dot']['gflops']:8.1f} GFLOP/s  (vdpbf16ps, the ceiling of "
          "'bf16 products' rows)"] if "bf16_dot" in doc["peaks"] else []) + [
        f"times: median of >= {doc['timing']['min_runs']} runs after {doc['timing']['warmup']} warm-up; "
        "'vs torch' = torch time / our time",
        "",
    ]
    header = ("kernel", "case", "shape", "ms", "rate", "of peak", "torch ms", "vs torch", "")
    table = [header]
    for r in doc["rows"]:
        if r["time_ms"] is None:
            table.append((r["kernel"], r["name"], r["shape"], "-", "-", "-", "-", "-", r["note"]))
            continue
        rate = f"{r['gflops']:.1f} GFLOP/s" if r["gflops"] is not None else f"{r['gbps']:.1f} GB/s"
        extra = " ".join(s for s in (_goal_text(r), r["note"]) if s)
        table.append((r["kernel"], r["name"], r["shape"], _fmt(r["time_ms"], ".2f"), rate,
                      _fmt(r["fraction_of_peak"], ".1%"), _fmt(r["torch_ms"], ".2f"),
                      _fmt(r["torch_ratio"], ".2f") + ("x" if r["torch_ratio"] is not None else ""), extra))
    widths = [max(len(row[i]) for row in table) for i in range(len(header) - 1)]
    right = {3, 4, 5, 6, 7}
    for row in table:
        cells = [row[i].rjust(widths[i]) if i in right else row[i].ljust(widths[i]) for i in range(len(widths))]
        lines.append("  ".join(cells + [row[-1]]).rstrip())
    if doc.get("linear"):
        from .bench_linear import format_linear
        lines += format_linear(doc["linear"])
    if doc["note"]:
        lines += ["", doc["note"]]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m attnzoo.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["kernels"], help="what to benchmark")
    parser.add_argument("--quick", action="store_true", help="smaller shapes, about a minute on 2 cores")
    parser.add_argument("--json", action="store_true", help="print a JSON document instead of the table")
    parser.add_argument("--no-torch", action="store_true", help="skip the PyTorch comparison")
    args = parser.parse_args(argv)
    progress = lambda s: print(f"  {s} ...", file=sys.stderr, flush=True)
    doc = run_kernels("quick" if args.quick else "full", use_torch=not args.no_torch, progress=progress)
    print(json.dumps(doc, indent=2) if args.json else format_table(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
