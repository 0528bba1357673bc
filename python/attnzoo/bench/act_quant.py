"""The integer rows' 8-bit activation quantization (src/kernels/quant/gemv_kernels.cc) side by side: every array
as each VNNI / AVX2 call wrote it before the routes took only theirs (the int16 copy, the 8-bit rows, the per-lane
scales and, in a second pass, the lane sums: "all") against what the regrouped rows read (the 8-bit rows and the
block sums: "regrouped", a model's matrices whose rows are a multiple of 16) and what the rows over GGUF blocks read
(no int16 copy: "gguf"). Shapes: a prefill chunk of T tokens at SmolLM2-135M's hidden size (K = 576, q/k/v and
gate/up) and its MLP width (K = 1536, down). The forms run in alternating rounds (the order swapped each round); the
ratio is the median of the rounds' "all" time / the form's time (above 1: cheaper), and the forms' common arrays
(8-bit rows, d, sums) are compared bit for bit. Without AVX2 the 8-bit rows do not run and the rows say so.
"""
import numpy as np

from .. import _core
from .harness import round_time, settle_side_by_side

FORMS = ("regrouped", "gguf")


def _shapes(scale):
    if scale == "tiny":
        return [(8, 64)]
    return [(64, 576), (512, 576), (64, 1536)]


def _rounds(scale):
    return {"full": 11, "quick": 7}.get(scale, 2)


def run_act_quant(scale, timing, progress=lambda s: None):
    """{"rounds", "rows": [one per (shape, form)]}: "all" and the form's time, their ratio, or the row's note."""
    rounds = _rounds(scale)
    rows = []
    for T, K in _shapes(scale):
        for form in FORMS:
            row = {"form": form, "shape": f"T={T} K={K}", "bytes": 4.0 * T * K, "all_ms": None, f"{form}_ms": None,
                   "all_gbps": None, f"{form}_gbps": None, "ratio": None, "round_ratios": [], "note": ""}
            rows.append(row)
            progress(f"timing the activation quantization, {row['shape']}: all vs {form}")
            try:
                x = np.random.default_rng(93).standard_normal((T, K), dtype=np.float32)
                quantizer = _core.ActivationQuantizer(T, K)
                times, outputs = {"all": [], form: []}, {}
                for r in range(rounds):
                    for f in (("all", form) if r % 2 == 0 else (form, "all")):
                        times[f].append(round_time(lambda: quantizer.run(x, f), timing, rounds, share=0.25))
                        outputs[f] = np.frombuffer(quantizer.common(), np.uint8)
                settle_side_by_side(row, times, outputs, "all", form, "forms")
            except ValueError as e:  # no 8-bit rows on this target
                row["note"] = f"skipped: {e}"
            except Exception as e:  # one broken row must not hide the others
                row["note"] = f"error: {type(e).__name__}: {e}"
    return {"rounds": rounds, "rows": rows}


def _fmt(x, spec):
    return "-" if x is None else format(x, spec)


def format_act_quant(section):
    """The section's lines for the kernel table."""
    lines = ["", "8-bit activation quantization of the integer rows: every array (as before) against the arrays a "
             f"route reads, {section['rounds']} alternated rounds; ratio = 'all' time / the route's time (median of "
             "the rounds); GB/s of f32 activations read"]
    table = [("route", "shape", "all ms", "GB/s", "route ms", "GB/s", "ratio", "")]
    for r in section["rows"]:
        f = r["form"]
        table.append((f, r["shape"], _fmt(r["all_ms"], ".4f"), _fmt(r["all_gbps"], ".1f"), _fmt(r[f"{f}_ms"], ".4f"),
                      _fmt(r[f"{f}_gbps"], ".1f"), _fmt(r["ratio"], ".2f") + ("x" if r["ratio"] is not None else ""),
                      r["note"]))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]) - 1)]
    for row in table:
        cells = [row[i].rjust(widths[i]) if i >= 2 else row[i].ljust(widths[i]) for i in range(len(widths))]
        lines.append("  ".join(cells + [row[-1]]).rstrip())
    return lines
