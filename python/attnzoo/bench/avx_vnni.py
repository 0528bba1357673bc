"""The AVX2 regrouped rows' two forms side by side: lane sums by AVX-VNNI's vpdpbusd against vpmaddubsw +
vpmaddwd, over the same prepared (regrouped) weights, for the block formats those rows serve (Q4_0, Q4_1, Q8_0,
Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS) at one token and at four (the group kernels' widest pass), on a decode projection's N = 3K x K.

On an AVX-512 VNNI CPU the default target runs the AVX-512 rows, so these rows run inside _core.Avx2GroupRows:
the avx2 target for them alone, given back as it was afterwards (see src/kernels/quant/avx2_group_rows_scope.h for
why that is safe with the thread pool). The two forms are timed in alternating rounds (the order swapped each
round), so a change of load or clock falls on both; the ratio is the median of the rounds' vpmaddubsw time /
vpdpbusd time (above 1: vpdpbusd is faster). Each round checks that the form named ran (the vpdpbusd task count),
and the two forms' outputs are compared bit for bit. The weights (1.7-3.3 MB at K = 1024) mostly stay in L2 and L3: this is the
kernels' compute speed, not a read from memory. Where the CPU has no AVX-VNNI (or ATTNZOO_AVX_VNNI=0 turned it
off) the rows time vpmaddubsw alone and say why vpdpbusd is skipped; without AVX2 they say that.
"""
import numpy as np

from .. import _core
from .gguf_blocks import random_weights, type_id, weight_bytes
from .harness import round_time, settle_side_by_side

FORMATS = ("Q4_0", "Q4_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS")
TOKENS = (1, 4)
FORMS = ("vpmaddubsw", "vpdpbusd")


def _shape(scale):
    K = 256 if scale == "tiny" else 1024
    return 3 * K, K


def _rounds(scale):
    """Many short rounds: on a shared machine another process can hold the core for a few of them, and the
    median of the rounds' ratios then passes over those."""
    return {"full": 11, "quick": 7}.get(scale, 2)


def _empty_row(qtype, T, N, K):
    return {"format": qtype, "tokens": T, "shape": f"T={T} N={N} K={K}", "bytes": float(weight_bytes(qtype, N, K)),
            "vpmaddubsw_ms": None, "vpdpbusd_ms": None, "vpmaddubsw_gbps": None, "vpdpbusd_gbps": None,
            "ratio": None, "round_ratios": [], "note": ""}


def _measure(rows_scope, row, weights, x, timing, rounds, forms):
    """Times the forms in alternating rounds; fills the row, or its note where a form did not run as named."""
    out = {f: np.empty((x.shape[0], weights.n), np.float32) for f in forms}
    times = {f: [] for f in forms}
    for r in range(rounds):
        for form in (forms if r % 2 == 0 else forms[::-1]):
            rows_scope.use(form)
            before = _core.quant_avx_vnni_tasks()
            times[form].append(round_time(lambda: weights.matmul(x, out[form]), timing, rounds))
            ran_dpbusd = _core.quant_avx_vnni_tasks() > before
            if ran_dpbusd != (form == "vpdpbusd"):
                row["note"] = f"error: the rows {'took' if ran_dpbusd else 'did not take'} vpdpbusd under {form}"
                return
    settle_side_by_side(row, times, out, "vpmaddubsw", "vpdpbusd", "forms")


def run_avx_vnni(scale, timing, progress=lambda s: None):
    """{"shape", "support", "rounds", "rows": [one per (format, tokens)]}: the AVX2 regrouped rows on vpmaddubsw
    and on vpdpbusd, or the reason a form is skipped in each row's note."""
    from .. import quant
    N, K = _shape(scale)
    rounds = _rounds(scale)
    support = _core.Avx2GroupRows.support()
    rows = [_empty_row(q, T, N, K) for q in FORMATS for T in TOKENS]
    doc = {"shape": f"N={N} K={K}", "support": support, "rounds": rounds, "rows": rows}
    if not support["avx2"]:
        for row in rows:
            row["note"] = f"skipped: {support['skipped']}"
        return doc
    forms = FORMS if support["vpdpbusd"] else FORMS[:1]
    with _core.Avx2GroupRows() as rows_scope:
        for row in rows:
            qtype, T = row["format"], row["tokens"]
            progress(f"timing the AVX2 regrouped rows, {qtype} T={T}: {' vs '.join(forms)}")
            try:
                w = random_weights(qtype, N, K, 91)
                weights = quant.prepare(w, type_id(qtype), N, K, path="int8")
                if not weights.owned_bytes:
                    row["note"] = "error: the weights were not regrouped"
                    continue
                x = np.random.default_rng(92).standard_normal((T, K), dtype=np.float32)
                _measure(rows_scope, row, weights, x, timing, rounds, forms)
            except Exception as e:  # one broken row must not hide the others
                row["note"] = f"error: {type(e).__name__}: {e}"
                continue
            if len(forms) == 1 and not row["note"]:
                row["note"] = f"vpdpbusd skipped: {support['skipped']}"
    return doc


def _fmt(x, spec):
    return "-" if x is None else format(x, spec)


def format_avx_vnni(section):
    """The section's lines for the kernel table."""
    lines = ["", f"AVX2 regrouped rows, lane sums by vpdpbusd (AVX-VNNI) against vpmaddubsw: {section['shape']}, "
             f"the same regrouped weights, {section['rounds']} alternated rounds; "
             "ratio = vpmaddubsw time / vpdpbusd time (median of the rounds)"]
    table = [("format", "tokens", "vpmaddubsw ms", "GB/s", "vpdpbusd ms", "GB/s", "ratio", "")]
    for r in section["rows"]:
        table.append((r["format"], str(r["tokens"]), _fmt(r["vpmaddubsw_ms"], ".3f"),
                      _fmt(r["vpmaddubsw_gbps"], ".1f"), _fmt(r["vpdpbusd_ms"], ".3f"), _fmt(r["vpdpbusd_gbps"], ".1f"),
                      _fmt(r["ratio"], ".2f") + ("x" if r["ratio"] is not None else ""), r["note"]))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]) - 1)]
    for row in table:
        cells = [row[i].rjust(widths[i]) if i >= 1 else row[i].ljust(widths[i]) for i in range(len(widths))]
        lines.append("  ".join(cells + [row[-1]]).rstrip())
    return lines
