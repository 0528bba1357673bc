"""Section 8 - one layer, two computations: an S4D layer's convolution kernel next to its recurrence.

A diagonal state-space layer (S4D) is a linear time-invariant filter: its output is u convolved with a kernel K
that depends on the parameters only. The kernel view computes K[l] = 2 Re(sum_n C dB dA^l) by a Vandermonde
product (s4d_kernel) and convolves by FFT (s4d_conv); the recurrent view steps a complex state (s4d_recurrent),
and fed a unit impulse it plays K back one token at a time. Both views of the same layer are drawn overlaid,
then both run on a random input of a few thousand tokens.
"""
import math
import time

import numpy as np

from ..linear import s4d_conv, s4d_kernel, s4d_recurrent
from .page import Section, figure, table
from .svg import legend_html, line_chart

ID = "s4-two-views"
TITLE = "8. One layer, two computations: S4's kernel and its recurrence"

N = 16                                  # complex modes (state-spaces' d_state 32)
STEPS = (0.004, 0.02, 0.1)              # dt of the three channels drawn: long, medium and short memory
SHOWN = (400, 160, 48)                  # lags drawn per channel: about three of its decay times (2 / dt)
LENGTH = max(SHOWN)                     # kernel steps computed
RUN_T = 4096                            # the random-input run


def layer(seed=0):
    """An S4D layer at state-spaces' S4D-Lin initialization: A = -1/2 + i pi n, B = 1, C ~ CN(0, 1)."""
    rng = np.random.default_rng(seed)
    H = len(STEPS)
    A = (-0.5 + 1j * math.pi * np.arange(N))[None].repeat(H, 0).astype(np.complex64)
    C = ((rng.standard_normal((H, N)) + 1j * rng.standard_normal((H, N))) / math.sqrt(2)).astype(np.complex64)
    return dict(dt=np.array(STEPS, np.float32), A=A, B=np.ones((H, N), np.complex64), C=C)


def run(seed=0):
    p = layer(seed)
    H = len(STEPS)
    kernel = s4d_kernel(length=LENGTH, **p)
    impulse = np.zeros((1, LENGTH, H), np.float32)
    impulse[0, 0] = 1.0
    response, _ = s4d_recurrent(impulse, **p)          # the recurrence, fed a unit impulse, plays K back
    u = np.random.default_rng(seed + 1).standard_normal((1, RUN_T, H)).astype(np.float32)
    D = np.ones(H, np.float32)
    s4d_conv(u, D=D, **p)  # a first call sizes buffers and twiddle tables: not part of the computation
    t0 = time.perf_counter()
    y_conv, s_conv = s4d_conv(u, D=D, output_final_state=True, **p)
    t1 = time.perf_counter()
    y_rec, s_rec = s4d_recurrent(u, D=D, output_final_state=True, **p)
    t2 = time.perf_counter()
    rel = lambda a, b: float(np.sqrt(((a - b) ** 2).sum() / (b ** 2).sum()))
    return {"kernel": kernel, "response": response[0].T,
            "kernel_vs_impulse_max_abs_diff": float(np.abs(kernel - response[0].T).max()),
            "conv_vs_recurrent_rel_rms": rel(y_conv, y_rec), "final_state_rel_rms": rel(s_conv, s_rec),
            "conv_ms": (t1 - t0) * 1e3, "recurrent_ms": (t2 - t1) * 1e3}


def build(ctx):
    r = run()
    classes = ("c1", "c2", "c3")
    charts, series = [], []
    for h, (dt, cls, shown) in enumerate(zip(STEPS, classes, SHOWN)):
        line = {"name": f"kernel view, dt = {dt:g}", "cls": cls,
                "points": [(l, float(r["kernel"][h, l])) for l in range(shown)]}
        dots = [{"x": l, "y": float(r["response"][h, l]), "cls": cls,
                 "title": f"recurrent view, step {l}: {r['response'][h, l]:.4f}"} for l in range(0, shown, shown // 40)]
        series.append(line)
        plot = line_chart([line], width=300, height=230, xlabel="lag l (tokens)", ylabel="K[l]", markers=dots,
                          yfmt=lambda y: f"{y:.2g}", label=f"S4D channel with dt = {dt:g}: kernel and impulse response")
        charts.append(f'<div>{plot}<div class="sub">dt = {dt:g}</div></div>')
    chart = '<div class="row">' + "".join(charts) + "</div>"
    facts = {k: v for k, v in r.items() if k not in ("kernel", "response")}
    rows = [["convolution (Vandermonde kernel + FFT)", f"{r['conv_ms']:.2f} ms"],
            ["recurrence (complex state, token by token)", f"{r['recurrent_ms']:.2f} ms"],
            ["outputs: relative RMS difference", f'<span class="check">{r["conv_vs_recurrent_rel_rms"]:.1e}</span>'],
            ["final states: relative RMS difference", f'<span class="check">{r["final_state_rel_rms"]:.1e}</span>']]
    body = [f"<p>S4D keeps, per channel, {N} complex modes h[n] with h<sub>t</sub> = dA h<sub>t-1</sub> + dB "
            "u<sub>t</sub> and y<sub>t</sub> = 2 Re(Σ C h<sub>t</sub>) + D u<sub>t</sub>, where dA = exp(dt A) "
            "(zero-order hold). Nothing depends on the input, so the layer is a convolution: y = K * u + D u "
            "with K[l] = 2 Re(Σ<sub>n</sub> C dB dA<sup>l</sup>). Prefill computes K once (a Vandermonde product) "
            "and convolves by FFT in O(T log T); decode keeps the state and pays O(N) per token. The lines are the "
            "kernel view of three channels of one layer (state-spaces' S4D-Lin initialization; the step dt sets how "
            "long a channel remembers); the dots are the recurrent view: the same layer stepped token by token on a "
            "unit impulse, its outputs read back.</p>",
            figure(chart + legend_html(series),
                   "the dots sit on the lines: the recurrence fed an impulse replays the kernel; a small dt decays "
                   "slowly and oscillates for hundreds of tokens, a large one forgets within a few.",
                   caption=f"Max |kernel - impulse response| over the first {LENGTH} lags: "
                           f'<span class="check">{r["kernel_vs_impulse_max_abs_diff"]:.1e}</span>.'),
            f"<p>Both computations on {RUN_T} random tokens through the same {len(STEPS)} channels (timed once on "
            "this machine). With three channels the recurrence is the cheaper one: the FFT path runs a vector "
            "of channels at a time, mostly empty here. At model widths (256 channels) the FFT path wins from 1k "
            "tokens on; <code>attnzoo bench kernels</code> has the rows.</p>",
            table(["", ""], rows)]
    return Section(ID, TITLE, "".join(body), facts, figures=1)
