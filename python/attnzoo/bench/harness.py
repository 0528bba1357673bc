"""The benchmark harness every table shares: cases, goals, inputs, the machine's peaks and the timing policy.

A case (BenchCase) allocates its inputs only when it runs and returns a Prepared pair: our kernel and PyTorch's
equivalent on the very same tensors. run_case times both with the C++ harness's median policy (src/bench/timer.h)
and rate_row turns a time into GFLOP/s or GB/s and a fraction of the measured peak.
"""
from dataclasses import dataclass, field
from typing import Callable, List, Optional

import numpy as np

from .. import _core

SCALES = ("full", "quick", "tiny")  # "tiny" exists for the tests: seconds, not minutes


@dataclass
class Goal:
    """A performance target printed beside a row. check(row, rows_by_key) -> True / False / None (n/a);
    got(row, rows_by_key): the measured value the target is about, said when it is missed. needs_idle: a fraction of
    the machine's peak means little while other work shares the cores, so it is judged only on an idle machine."""
    text: str
    check: Callable[[dict, dict], Optional[bool]]
    got: Callable[[dict, dict], str] = lambda row, rows: ""
    needs_idle: bool = False


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
    peak: str = ""      # compute rows rated against another peak than the f32 FMA one ("bf16_dot", "amx_bf16")
    goals: List[Goal] = field(default_factory=list)

    @property
    def key(self):
        return f"{self.kernel} {self.name}"


# --- goals -------------------------------------------------------------------------------------------------

def fraction_of_peak_at_least(x):
    return Goal(f">={x:.0%} of peak", lambda row, rows: None if row.get("fraction_of_peak") is None
                else row["fraction_of_peak"] >= x, lambda row, rows: f"{row['fraction_of_peak']:.1%}", True)


def torch_ratio_at_least(x):
    return Goal(f">={x:g}x torch", lambda row, rows: None if row.get("torch_ratio") is None
                else row["torch_ratio"] >= x, lambda row, rows: f"{row['torch_ratio']:.2f}x")


def time_within_of(other_key, tolerance):
    def check(row, rows):
        other = rows.get(other_key)
        if other is None or other.get("time_ms") is None or row.get("time_ms") is None:
            return None
        return row["time_ms"] <= other["time_ms"] * (1 + tolerance)

    def got(row, rows):
        return f"{row['time_ms'] / rows[other_key]['time_ms'] - 1:+.0%} time"
    return Goal(f"within {tolerance:.0%} of {other_key.split(' ', 2)[-1]}", check, got)


def faster_than(other_key, factor):
    def check(row, rows):
        other = rows.get(other_key)
        if other is None or other.get("time_ms") is None or row.get("time_ms") is None:
            return None
        return other["time_ms"] >= factor * row["time_ms"]

    def got(row, rows):
        return f"{rows[other_key]['time_ms'] / row['time_ms']:.2f}x"
    return Goal(f">={factor:g}x faster than {other_key.split(' ', 2)[-1]}", check, got)


def machine_is_idle():
    """(idle, load average, cores): idle when the 1-minute load average before a run is below half the cores (at
    least 1): peak fractions measured while others share the machine are not judged against targets."""
    import os
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    return load < max(1.0, cores / 2), load, cores


def idle_note(idle, load, cores):
    """The line a table prints when its peak-fraction targets were not judged."""
    if idle:
        return ""
    return (f"peak-fraction targets not judged: load average {load:.1f} on {cores} cores when the run began "
            "(they are set for an otherwise idle machine); the torch and relative targets still are")


# --- inputs ------------------------------------------------------------------------------------------------

def torch_module():
    try:
        import torch
        return torch
    except ImportError:
        return None


def length_text(T):
    """A sequence length as row names show it: 4k for 4096, else the number."""
    return f"{T // 1024}k" if T % 1024 == 0 else str(T)


def randn(shape, dtype, seed):
    """Inputs live in torch when it is installed (so both sides read the same memory), else numpy f32."""
    torch = torch_module()
    if torch is not None:
        g = torch.Generator().manual_seed(seed)
        return torch.randn(*shape, generator=g, dtype=torch.float32).to(getattr(torch, dtype))
    if dtype != "float32":
        raise RuntimeError(f"{dtype} inputs need PyTorch (numpy has no bfloat16)")
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def empty_like(x):
    return x.new_empty(x.shape) if hasattr(x, "new_empty") else np.empty_like(x)


def rel_rms(got, want):
    torch = torch_module()
    if torch is not None and isinstance(got, torch.Tensor):
        got, want = got.double(), want.double()
        return float(((got - want) ** 2).sum().sqrt() / max(float((want ** 2).sum().sqrt()), 1e-300))
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.sqrt(((got - want) ** 2).sum()) / max(np.sqrt((want ** 2).sum()), 1e-300))


# --- running -----------------------------------------------------------------------------------------------

def bf16_peak_name():
    """The peak bf16 products are rated against: their engine's ("amx_bf16" where AMX tiles multiply them,
    else "bf16_dot", vdpbf16ps)."""
    return "amx_bf16" if _core.bf16_tiles_engine() == "AMX tiles" else "bf16_dot"


def measure_peaks(config, int8=False):
    """f32 FMA and memory read peaks, plus the bf16-product peaks: vdpbf16ps where the target has AVX-512-BF16,
    AMX tiles where they run; with `int8`, the 8-bit product peak (vpdpbusd) where the VNNI rows run."""
    p = config["probes"]
    peaks = {"fma": _core.measure_fma_peak(p["fma_seconds"], p["fma_runs"]),
             "memory": _core.measure_memory_bandwidth(p["memory_bytes"], p["memory_runs"])}
    if _core.active_target() == "avx512_bf16":
        peaks["bf16_dot"] = _core.measure_bf16_dot_peak(p["fma_seconds"], p["fma_runs"])
    if _core.bf16_tiles_engine() == "AMX tiles":
        peaks["amx_bf16"] = _core.measure_amx_bf16_peak(p["fma_seconds"], p["fma_runs"])
    if int8:
        peaks["vnni_int8"] = _core.measure_vnni_int8_peak(p["fma_seconds"], p["fma_runs"])
    return peaks


def better_peaks(first, second):
    """On a shared machine a probe can land in a busy moment: keep the better of two, at start and end."""
    fma = max(first["fma"], second["fma"], key=lambda d: d["gflops"])
    memory = max(first["memory"], second["memory"], key=lambda d: d["gbps"])
    fma["samples"] = [first["fma"]["gflops"], second["fma"]["gflops"]]
    memory["samples"] = [first["memory"]["gbps"], second["memory"]["gbps"]]
    out = {"fma": fma, "memory": memory}
    for key in ("bf16_dot", "amx_bf16", "vnni_int8", "avx2_int8", "avx_vnni_int8"):
        if key in first and key in second:
            out[key] = max(first[key], second[key], key=lambda d: d["gflops"])
    return out


def time_median(fn, timing):
    return _core.median_time(fn, timing["warmup"], timing["min_runs"], timing["max_runs"], timing["min_seconds"])


def round_time(fn, timing, rounds, share=1.0):
    """One round of a side-by-side section (two forms of a kernel timed in alternating rounds): the median over the
    round's part of the policy's run time, `share` of min_seconds / rounds. Such rows take 0.1-10 ms, so beyond
    the tiny scale up to ten times the policy's runs fit in that part."""
    max_runs = timing["max_runs"] * (1 if timing["min_seconds"] == 0 else 10)
    return _core.median_time(fn, timing["warmup"], timing["min_runs"], max_runs,
                             timing["min_seconds"] * share / rounds)["median_s"]


def settle_side_by_side(row, times, outputs, base, other, what, rate=True):
    """Fills a side-by-side row from its rounds' times ({form: [seconds per round]}, one or both forms): each form's
    median (ms, and GB/s of row["bytes"] where `rate`) and, where both ran, the ratio = the median of the rounds'
    `base` time / `other` time. The two forms are defined to give the same bits: outputs that differ leave the row
    without times, its note saying so (`what` names the forms: "forms", "routes")."""
    if len(times) == 2 and not np.array_equal(outputs[base], outputs[other]):
        row["note"] = f"error: the two {what}' outputs differ"
        return
    for form, rounds in times.items():
        seconds = float(np.median(rounds))
        row[f"{form}_ms"] = seconds * 1e3
        if rate:
            row[f"{form}_gbps"] = row["bytes"] / seconds * 1e-9
    if len(times) == 2:
        row["round_ratios"] = [a / b for a, b in zip(times[base], times[other])]
        row["ratio"] = float(np.median(row["round_ratios"]))


def run_case(case, peaks, timing, use_torch):
    """Times one case (ours, then torch on the same inputs); peaks=None leaves the rate columns empty."""
    row = {"kernel": case.kernel, "name": case.name, "shape": case.shape, "time_ms": None, "runs": 0,
           "gflops": None, "gbps": None, "peak": "memory" if case.bytes else (case.peak or "fma"),
           "fraction_of_peak": None,
           "torch_ms": None, "torch_ratio": None, "rel_error_vs_torch": None, "goals": [], "note": ""}
    try:
        prepared = case.setup()
        ours = time_median(prepared.ours, timing)
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
            theirs = time_median(prepared.torch, timing)
            row["torch_ms"] = theirs["median_s"] * 1e3
            row["torch_ratio"] = theirs["median_s"] / seconds
            row["rel_error_vs_torch"] = rel_rms(prepared.ours(), prepared.torch())
        except Exception as e:
            row["note"] = f"torch failed: {type(e).__name__}: {e}"
    return row if peaks is None else rate_row(case, row, peaks)


def rate_row(case, row, peaks):
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


def apply_goals(cases, rows, idle=True):
    """Judges every goal of every row ("met": True / False / None when it does not apply, "got": the measured
    value it is about); goals that need an idle machine are not judged when `idle` is False."""
    by_key = {c.key: r for c, r in zip(cases, rows)}
    for case, row in zip(cases, rows):
        row["goals"] = []
        for g in case.goals:
            met = None if (g.needs_idle and not idle) else g.check(row, by_key)
            row["goals"].append({"goal": g.text, "met": met, "got": g.got(row, by_key) if met is not None else ""})
