"""Section 2 - FlashAttention's tiles and the online softmax.

The tile grids come from _core.prefill_tile_grid, which walks the prefill kernel's own plan
(make_prefill_plan, visible_key_range, classify_tile). The online-softmax trace is recovered from real kernel
runs over growing key prefixes: attention over keys [0, k_end) ends in exactly the (m, l) state the kernel
holds after the tile ending at k_end. A sink logit s (which joins the denominator) plus a column of ones
in the values gives the absolute log-normaliser, and one-hot value columns give each key's weight, so
every raw score - hence m and l - can be read back from the outputs.
"""
import math

import numpy as np

from .. import _core, attention, block_mask
from .page import Section, animated_figure, figure, table
from .svg import class_grid, esc, legend, svg, text

ID = "flash-tiles"
TITLE = "2. FlashAttention's tiles"

VISIT_NAMES = ("never visited", "visited, skipped", "computed (full)", "computed, masked (partial)")
VISIT_CLASSES = ("c0", "c6", "c1", "c2")


def tile_grid(T, **mask):
    return _core.prefill_tile_grid(T, T, mask.get("causal", True), mask.get("window"), mask.get("block_mask"))


def _grid_svg(g, label, cell=12):
    grid = g["grid"]
    nq, nk = grid.shape
    order = {qb: i for i, qb in enumerate(g["task_order"])}
    cells = [[int(grid[i, j]) for j in range(nk)] for i in range(nq)]
    titles = {v: VISIT_NAMES[v] for v in range(4)}
    body = class_grid(cells, 30, 8, cell, VISIT_CLASSES, titles, gap=1)
    for i in range(nq):
        body += text(26, 8 + i * cell + cell * 0.8, f"#{order[i] + 1}", "small", "end")
    return svg(30 + nk * cell + 8, 8 + nq * cell + 6, body, label)


def _counts(g):
    grid = g["grid"]
    return {VISIT_NAMES[v]: int((grid == v).sum()) for v in range(4)}


def trace_online_softmax(T=512, D=64, tile=64, seed=3):
    """Runs attnzoo.attention on key prefixes [0, 64), [0, 128), ... for one query and returns the running
    max m, running sum l (relative to m) and every raw score, as the kernel's SoftmaxRow state after each
    tile. Also returns the scores computed directly (q . k * scale) to check the read-back."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(D).astype(np.float32)
    keys = rng.standard_normal((T, D)).astype(np.float32) * 0.8
    for pos, strength in ((40, 0.35), (150, 0.6), (300, 0.9), (470, 1.1)):  # a few keys the query likes more
        keys[pos] += strength * q
    scale = D ** -0.5
    direct = (keys.astype(np.float64) @ q.astype(np.float64)) * scale
    steps = []
    for k_end in range(tile, T + 1, tile):
        v = np.zeros((1, k_end, 1, k_end + 1), np.float32)
        v[0, :, 0, :k_end] = np.eye(k_end, dtype=np.float32)
        v[0, :, 0, k_end] = 1.0
        qq, kk = q[None, None, None, :], keys[None, :k_end, None, :]
        sink = 0.0
        for _ in range(2):  # the second pass puts the sink near log Z, where the read-back is most precise
            out = attention(qq, kk, v, causal=False, sinks=np.array([sink], np.float32))[0, 0, 0].astype(np.float64)
            ones = out[k_end]
            log_z = sink + math.log(max(ones, 1e-30)) - math.log(max(1.0 - ones, 1e-30))
            sink = log_z
        with np.errstate(divide="ignore"):
            scores = np.log(out[:k_end]) - math.log(ones) + log_z
        m = float(np.max(scores))
        steps.append({"k_end": k_end, "m": m, "l": math.exp(log_z - m), "log_z": log_z, "scores": scores})
    finite = np.isfinite(steps[-1]["scores"])
    err = float(np.max(np.abs(steps[-1]["scores"][finite] - direct[finite])))
    return steps, direct, err


def _softmax_frames(steps, direct, tile):
    T = len(direct)
    width, height, left, top = 720, 206, 40, 16
    ph = 120
    lo, hi = float(direct.min()), float(direct.max())
    fx = lambda j: left + (width - left - 10) * j / T
    fy = lambda s: top + ph - ph * (s - lo) / ((hi - lo) or 1)
    frames, captions = [], []
    prev_m = None
    for t, st in enumerate(steps):
        k_end = st["k_end"]
        body = [f'<rect x="{left}" y="{top}" width="{width - left - 10}" height="{ph}" class="plot-bg"/>']
        body.append(f'<rect x="{fx(k_end - tile):.1f}" y="{top}" width="{fx(k_end) - fx(k_end - tile):.1f}" '
                    f'height="{ph}" class="c7" fill-opacity="0.25"/>')
        pts = []
        for j in range(k_end):
            s = st["scores"][j]
            if np.isfinite(s):
                pts.append(f'M{fx(j):.1f} {fy(lo):.1f}V{fy(s):.1f}')
        body.append(f'<path d="{"".join(pts)}" stroke="var(--c1)" stroke-width="1.2"/>')
        body.append(f'<line x1="{left}" x2="{fx(k_end):.1f}" y1="{fy(st["m"]):.1f}" y2="{fy(st["m"]):.1f}" '
                    'stroke="var(--c4)" stroke-width="1.5"/>')
        # Right of the line's end while there is room; in the last tiles, left of it and above the line.
        m_label = f"m = {st['m']:.3f}"
        if fx(k_end) + 8 + 6.2 * len(m_label) <= width:
            body.append(text(fx(k_end) + 3, fy(st["m"]) + 3, m_label, "small"))
        else:
            body.append(text(fx(k_end) - 3, fy(st["m"]) - 4, m_label, "small", "end"))
        for x in range(0, T + 1, tile):
            body.append(text(fx(x), top + ph + 12, str(x), "small", "middle"))
        body.append(text(left + (width - left) / 2, top + ph + 26, "key position (raw score per key, read back "
                         "from the kernel)", "axis", "middle"))
        alpha = 1.0 if prev_m is None else math.exp(min(prev_m - st["m"], 0.0))
        if alpha > 1 - 1e-4:  # read-back rounding, not a new maximum
            alpha = 1.0
        body.append(text(left, height - 22, f"after tile {t + 1}: keys [0, {k_end})   running max m = "
                         f"{st['m']:.4f}   running sum l = {st['l']:.4f}", "big"))
        body.append(text(left, height - 6, f"old sum and partial output rescaled by exp(m_old - m_new) = "
                         f"{alpha:.4f}", ""))
        frames.append(svg(width, height, "".join(body), f"online softmax after tile {t + 1}"))
        captions.append(f"tile {t + 1}: m {'jumps' if alpha < 1 else 'stays'}" +
                        (f", old sum and output scaled by {alpha:.3f}" if alpha < 1 else ""))
        prev_m = st["m"]
    return frames, captions


def build(ctx):
    facts = {}
    T = 1024
    bm = block_mask(T, block=64, local_blocks=2, global_tokens=64, stride=4, random_blocks=1, seed=2)
    cases = [("dense causal", dict(causal=True)), ("sliding window 256", dict(causal=True, window=256)),
             ("block-sparse", dict(causal=True, block_mask=bm))]
    parts, rows = [], []
    for name, mask in cases:
        g = tile_grid(T, **mask)
        counts = _counts(g)
        visible = _core.count_visible_pairs(T, T, True, mask.get("window") or 0, mask.get("block_mask"))
        computed = (counts[VISIT_NAMES[2]] + counts[VISIT_NAMES[3]]) * g["block_q"] * g["block_k"]
        facts[name] = dict(counts, visible_pairs=int(visible), computed_pairs=int(computed),
                           block_q=g["block_q"], block_k=g["block_k"])
        rows.append([esc(name)] + [str(counts[n]) for n in VISIT_NAMES] +
                    [f"{visible:,}", f"{computed / (T * T):.0%}", f"{visible / max(computed, 1):.0%}"])
        parts.append(f'<div>{_grid_svg(g, name + " tile grid")}<div class="sub">{esc(name)}</div></div>')
    leg = svg(700, 18, legend(list(zip(VISIT_CLASSES, VISIT_NAMES)), 4, 13, step=170), "legend")
    grid_fig = figure('<div class="row">' + "".join(parts) + "</div>" + leg +
                      table(["mask"] + list(VISIT_NAMES) + ["visible pairs", "of T² computed", "useful in computed"],
                            rows),
                      "only tiles on the mask's edge pay for element-wise masking; whole tiles outside it are "
                      "never loaded.",
                      caption=f"T = {T}, {g['block_q']}-query blocks x {g['block_k']}-key tiles. Row labels give "
                              "the order the plan hands query blocks to threads (heaviest first).")
    body = ["<p>The prefill kernel cuts the score matrix into tiles: a block of 64 queries against 64 keys at a "
            "time, so Q, K and V tiles stay in cache and the T x T matrix never exists. Before touching a tile "
            "it asks the mask: nothing visible (skip), everything visible (no masking work), or some (mask "
            "element by element). These grids are produced by the kernel's own planning code "
            "(<code>make_prefill_plan</code>, <code>visible_key_range</code>, <code>classify_tile</code>), "
            "exposed as <code>attnzoo._core.prefill_tile_grid</code>.</p>", grid_fig]

    tile = 64
    steps, direct, err = trace_online_softmax(T=512, tile=tile)
    facts["online_softmax"] = {"m": [s["m"] for s in steps], "l": [s["l"] for s in steps],
                               "score_readback_max_abs_err": err}
    frames, captions = _softmax_frames(steps, direct, tile)
    body.append("<h3>Online softmax: one query row as the tiles stream by</h3><p>The kernel never sees all "
                "scores at once. For each row it keeps the largest score so far (m) and the sum of "
                "exp(score - m) so far (l). When a new tile brings a larger score, the old sum and the partial "
                "output are multiplied by exp(m_old - m_new) and work continues: one pass, exact result. Each "
                "frame below is a real <code>attnzoo.attention</code> run over the keys seen so far; m and l "
                "were read back from its outputs (a sink logit plus one-hot value columns), and the read-back "
                f"scores match q·k/√d computed directly to <span class=\"check\">{err:.1e}</span>.</p>")
    body.append(animated_figure(frames, "m only moves when a tile holds a new maximum; then the running sum "
                                        "shrinks by exp(m_old - m_new) before the new tile is added.", captions))
    return Section(ID, TITLE, "".join(body), facts, figures=2)
