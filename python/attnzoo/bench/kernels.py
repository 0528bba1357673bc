"""Kernel benchmark: every kernel at realistic shapes, against this machine's measured peaks and PyTorch.

    python -m attnzoo.bench kernels [--quick] [--json] [--no-torch]

First measures the machine (f32 FMA throughput of the active SIMD target and streaming read bandwidth, on
every thread of attnzoo's pool), then times each benchmark case: our kernel and PyTorch's equivalent run on
the very same tensors in this process. Times are medians after warm-up (the policy is the C++ harness's,
see src/bench/timer.h). Compute-bound rows report GFLOP/s of useful work (masked-out pairs not counted) as a
fraction of the FMA peak; memory-bound rows report GB/s of cache bytes read as a fraction of the bandwidth.
Sections after the table time the AVX2 regrouped quantized rows with AVX-VNNI's vpdpbusd against vpmaddubsw
(avx_vnni.py), and regrouped rows decoded straight into the bf16 prefill GEMM's pairs against the f32 route
(bf16_pairs.py), the integer rows' activation quantization with every array against the arrays each route reads
(act_quant.py), each side by side, and JSON mode's / structured outputs' per-step mask beside a plain pass over
the logits row (json_mask.py).

Adding a kernel family = adding a function that returns BenchCase objects and listing it in CASE_BUILDERS.
"""
import argparse
import json
import math
import os
import sys

from .. import _core
from .act_quant import format_act_quant, run_act_quant
from .avx_vnni import format_avx_vnni, run_avx_vnni
from .bf16_pairs import format_bf16_pairs, run_bf16_pairs
from .json_mask import format_json_mask, run_json_mask
from .harness import SCALES, apply_goals, better_peaks, idle_note, machine_is_idle, measure_peaks, rate_row, run_case, \
    torch_module
from .s4 import s4_cases
from .single import single_form_cases
from .softmax import lsh_cases, softmax_decode_cases, softmax_prefill_cases

CASE_BUILDERS = [softmax_prefill_cases, softmax_decode_cases, lsh_cases, single_form_cases, s4_cases]


def run_kernels(scale="full", use_torch=True, progress=None, with_linear=True):
    """Measures the peaks, then every case; returns the document `--json` prints.

    scale: "full" (headline shapes), "quick" (about a minute on 2 cores) or "tiny" (tests only).
    progress: optional callable(str) told what is being measured.
    """
    if scale not in SCALES:
        raise ValueError(f"scale: expected one of {', '.join(SCALES)}, got {scale!r}")
    config = _core.bench_config(scale)
    idle, load, cores = machine_is_idle()  # before this run adds its own load
    torch = torch_module()
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
    avx_vnni = run_avx_vnni(scale, config["timing"], say)
    bf16_pairs = run_bf16_pairs(scale, config["timing"], say)
    act_quant = run_act_quant(scale, config["timing"], say)
    json_mask = run_json_mask(scale, config["timing"], say)
    linear = None
    if with_linear:
        from .linear import run_linear
        linear = run_linear(scale, config["timing"], peaks, say)
    say("measuring the peaks again")
    peaks = better_peaks(peaks, measure_peaks(config))
    rows = [rate_row(case, row, peaks) for case, row in zip(cases, timed)]
    if linear is not None:
        from .linear import rate_decode
        from .ssm import rate_mamba2
        rate_decode(linear["decode"], peaks, idle)
        rate_mamba2(linear["mamba2_shapes"], peaks, idle)
    apply_goals(cases, rows, idle)
    cpu = _core.cpu_info()
    return {
        "scale": scale,
        "machine": {"cpu": cpu["model"], "cpu_description": cpu["description"],
                    "microarchitecture": cpu["microarchitecture"], "threads": _core.num_threads(),
                    "target": _core.active_target(),
                    "load_average": os.getloadavg()[0], "load_average_at_start": load, "cores": cores,
                    "idle": idle, "blas": _core.blas_info(),
                    "torch": torch.__version__ if use_torch else None,
                    "torch_threads": torch.get_num_threads() if use_torch else None},
        "timing": config["timing"],
        "peaks": peaks,
        "rows": rows,
        "avx_vnni": avx_vnni,
        "bf16_pairs": bf16_pairs,
        "act_quant": act_quant,
        "json_mask": json_mask,
        "linear": linear,
        "note": "" if use_torch else ("torch comparison disabled (--no-torch)" if torch is not None
                                      else "torch unavailable: no PyTorch ratios"),
    }


# --- printing ----------------------------------------------------------------------------------------------

def _fmt(x, spec, missing="-"):
    return missing if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def _goal_text(row):
    """Only targets that were judged: met, or missed with what was measured instead (no verdict for n/a)."""
    judged = [g for g in row["goals"] if g["met"] is not None]
    missed = [g for g in judged if g["met"] is False]
    if missed:
        return "below target: " + "; ".join(f"{g['goal']} (measured {g['got']})" for g in missed)
    return f"target met ({', '.join(g['goal'] for g in judged)})" if judged else ""


def format_table(doc):
    m, fma, mem = doc["machine"], doc["peaks"]["fma"], doc["peaks"]["memory"]
    torch_text = f"torch {m['torch']} ({m['torch_threads']} threads)" if m["torch"] else "no torch"
    lines = [
        f"attnzoo bench kernels ({doc['scale']}): {m.get('cpu_description', m['cpu'])}, {m['threads']} threads, "
        f"target {m['target']}, "
        f"{torch_text}, load average {m['load_average']:.1f}",
        f"peak f32 FMA    {fma['gflops']:8.1f} GFLOP/s  ({fma['gflops_per_thread']:.1f} per thread, "
        f"{fma['lanes']} lanes x {fma['chains']} chains, {fma['target']}, best of {fma['runs']} at start and "
        "end)",
        f"memory read     {mem['gbps']:8.1f} GB/s     ({mem['bytes'] >> 20} MiB, {mem['threads']} threads, "
        f"best of {mem['runs']} at start and end)",
    ] + ([f"peak bf16 dot   {doc['peaks']['bf16_dot']['gflops']:8.1f} GFLOP/s  (vdpbf16ps, the ceiling of "
          "'bf16 products' rows without AMX)"] if "bf16_dot" in doc["peaks"] else []) + (
        [f"peak AMX bf16   {doc['peaks']['amx_bf16']['gflops']:8.1f} GFLOP/s  (tdpbf16ps 2x2 tile block, the "
         "ceiling of 'bf16 products' rows here)"] if "amx_bf16" in doc["peaks"] else []) + (
        [f"blas            {m['blas']['core']} kernels ({m['blas']['config']})"] if m.get("blas") else []) + [
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
    if doc.get("avx_vnni"):
        lines += format_avx_vnni(doc["avx_vnni"])
    if doc.get("bf16_pairs"):
        lines += format_bf16_pairs(doc["bf16_pairs"])
    if doc.get("act_quant"):
        lines += format_act_quant(doc["act_quant"])
    if doc.get("json_mask"):
        lines += format_json_mask(doc["json_mask"])
    if doc.get("linear"):
        from .linear import format_linear
        lines += format_linear(doc["linear"])
    blas = m.get("blas") or {}
    notes = [n for n in (idle_note(m["idle"], m["load_average_at_start"], m["cores"]), blas.get("note"),
                         blas.get("choice_note"), doc["note"]) if n]
    if notes:
        lines += [""] + notes
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

