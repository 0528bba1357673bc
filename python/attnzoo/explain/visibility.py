"""Section 1 - who sees whom. Every matrix here is read back from a kernel run, not drawn from the rule.

The probe: with q = 0 every visible key scores the same, and with one-hot values (value of key j = e_j) the
output row of query i is the uniform distribution over exactly the keys it can see. So out[i, j] > 0 is the
visibility matrix the kernel applied. Head sharing is probed the same way with one-hot values per kv head.
"""
import numpy as np

from .. import attention, block_mask
from ..linear import chunk_linear_attn
from .page import Section, figure
from .svg import class_grid, legend, legend_width, short_label, svg, text

ID = "who-sees-whom"
TITLE = "1. Who sees whom"


def probe_visibility(T, **attention_kwargs):
    """[T, T] bool matrix: key j influenced query i in attnzoo.attention with these options."""
    q = np.zeros((1, T, 1, 16), np.float32)
    k = np.random.default_rng(0).standard_normal((1, T, 1, 16)).astype(np.float32)
    v = np.eye(T, dtype=np.float32)[None, :, None, :]
    out = attention(q, k, v, **attention_kwargs)[0, :, 0, :]
    return out > 0, out


def probe_head_sharing(num_q_heads, num_kv_heads, T=8):
    """[Hq, Hkv] bool: which kv head each query head read (one-hot value per kv head)."""
    rng = np.random.default_rng(1)
    q = rng.standard_normal((1, T, num_q_heads, 16)).astype(np.float32)
    k = rng.standard_normal((1, T, num_kv_heads, 16)).astype(np.float32)
    v = np.broadcast_to(np.eye(num_kv_heads, dtype=np.float32)[None, None], (1, T, num_kv_heads, num_kv_heads))
    out = attention(q, k, np.ascontiguousarray(v))[0]  # [T, Hq, Hkv]
    return np.all(out > 0.5, axis=0)


def probe_chunked_linear(T, chunk):
    """Linear attention o_t = sum_{s<=t} (q_t . k_s) v_s through the chunked kernel with q = k = e_0 and
    one-hot values: o[t, s] = 1 exactly when key s reached query t. Also runs the second half alone from the
    carried state to show the state holds everything earlier chunks contributed."""
    q = np.zeros((1, T, 1, 16), np.float32)
    q[..., 0] = 1.0
    k = q.copy()
    v = np.eye(T, dtype=np.float32)[None, :, None, :]
    o, _ = chunk_linear_attn(q, k, v, scale=1.0, normalize=False, chunk_size=chunk)
    half = (T // 2 // chunk) * chunk
    _, state = chunk_linear_attn(q[:, :half], k[:, :half], v[:, :half], scale=1.0, normalize=False,
                                 output_final_state=True, chunk_size=chunk)
    o2, _ = chunk_linear_attn(q[:, half:], k[:, half:], v[:, half:], scale=1.0, normalize=False,
                              initial_state=state, chunk_size=chunk)
    carried_diff = float(np.max(np.abs(o2 - o[:, half:])))
    return o[0, :, 0, :] > 0.5, carried_diff, state.shape, half


def _matrix_svg(mask, classes_of, label, cell, labels=None, legend_items=()):
    n = mask.shape[0]
    shown = [short_label(s) for s in labels] if labels else []
    longest = max((len(s) for s in shown), default=0)
    # Room for the longest label: about 6 px a character to the left, and its -60 degree slant above.
    left = max(28, int(8 + 6 * longest)) if labels else 6
    top = max(28, int(8 + 5.2 * longest)) if labels else 6
    cells = [[classes_of(i, j, mask[i, j]) for j in range(mask.shape[1])] for i in range(n)]
    body = class_grid(cells, left, top, cell, ("c0", "c1", "c2", "c3", "c4", "c5"))
    for i, s in enumerate(shown):
        body += text(left - 3, top + i * cell + cell * 0.75, s, "small", "end")
        body += text(left + i * cell + cell * 0.7, top - 3, s, "small", rotate=-60)
    h = top + n * cell + (18 if legend_items else 6)
    min_width = max(220, 6 + legend_width(legend_items) + 6) if legend_items else 220
    if legend_items:
        body += legend(legend_items, 6, h - 4)
    return svg(max(left + mask.shape[1] * cell + 6, min_width), h, body, label)


def build(ctx):
    facts = {}
    T = 24
    words = (ctx.prompt or "").split()
    labels = (words + [f"t{i}" for i in range(len(words), T)])[:T] if words else None
    causal, _ = probe_visibility(T, causal=True)
    W = 6
    window, _ = probe_visibility(T, causal=True, window=W)
    facts["causal_visible_pairs"] = int(causal.sum())
    facts["window_visible_pairs"] = int(window.sum())
    facts["window"] = W
    cell = 9
    vis = lambda i, j, on: 1 if on else 0
    fig1 = ('<div class="row"><div>' +
            _matrix_svg(causal, vis, "dense causal visibility", cell, labels) +
            f'<div class="sub">dense causal: {int(causal.sum())} of {T * T} pairs</div></div><div>' +
            _matrix_svg(window, vis, "sliding window visibility", cell, labels) +
            f'<div class="sub">sliding window W={W}: {int(window.sum())} pairs</div></div></div>')
    body = ["<p>A row is a query, a column a key; a filled cell means the key's value reached that query's "
            "output. Each matrix was read back from <code>attnzoo.attention</code>: with q = 0 every visible "
            "key gets the same weight, and with one-hot values (key j carries e<sub>j</sub>) the output row "
            "<i>is</i> the set of keys the kernel let through.</p>",
            figure(fig1, "the window keeps each row to its last W keys, so its cost stops growing with position.")]

    # Head sharing: MHA / GQA / MQA.
    parts = []
    for name, hkv in (("MHA", 8), ("GQA", 2), ("MQA", 1)):
        share = probe_head_sharing(8, hkv)
        facts[f"{name.lower()}_kv_head_of_q_head"] = [int(np.argmax(r)) for r in share]
        cells = [[(1 + j % 5) if share[i, j] else 0 for j in range(hkv)] for i in range(8)]
        c = 14
        body_svg = class_grid(cells, 40, 20, c, ("c0", "c1", "c2", "c3", "c4", "c5"), gap=1)
        for i in range(8):
            body_svg += text(36, 20 + i * c + 10, f"q{i}", "small", "end")
        body_svg += text(40, 9, "kv head", "small")
        for j in range(hkv):
            body_svg += text(40 + j * c + 7, 18, str(j), "small", "middle")
        parts.append(f'<div>{svg(max(48 + hkv * c + 20, 90), 20 + 8 * c + 6, body_svg, name + " head sharing")}'
                     f'<div class="sub">{name}: 8 q heads, {hkv} kv head{"s" if hkv > 1 else ""}</div></div>')
    body.append("<h3>Head sharing: MHA, GQA, MQA</h3><p>Every kv head carried a one-hot value naming itself; "
                "the output of each query head shows which kv head it actually read.</p>")
    body.append(figure('<div class="row">' + "".join(parts) + "</div>",
                       "GQA lets 4 query heads share one kv head: the cache holds 4x fewer K/V rows than MHA."))

    # Block-sparse.
    T2, B = 256, 16
    bm = block_mask(T2, block=B, local_blocks=2, global_tokens=B, stride=4, random_blocks=1, seed=5)
    sparse, _ = probe_visibility(T2, causal=True, block_mask=bm)
    blocks = bm.blocks().astype(bool)
    expect = np.kron(blocks, np.ones((B, B), bool))[:T2, :T2] & np.tril(np.ones((T2, T2), bool))
    facts["block_sparse_agrees_with_blocks"] = bool(np.array_equal(sparse, expect))
    facts["block_sparse_density"] = float(bm.density())
    facts["block_sparse_visible_pairs"] = int(sparse.sum())
    nb = blocks.shape[0]

    def kind(i, j, on):
        if not on:
            return 0
        qb, kb = i // B, j // B
        if abs(qb - kb) < 2:
            return 1  # local band
        if qb == 0 or kb == 0:
            return 2  # global
        if kb % 4 == 3:
            return 3  # strided summary
        return 4      # random
    fig3 = _matrix_svg(sparse, kind, "block-sparse visibility", 2,
                       legend_items=[("c1", "local"), ("c2", "global"), ("c3", "strided"), ("c4", "random")])
    body.append(f"<h3>Block-sparse: local + global + strided + random</h3><p><code>attnzoo.block_mask({T2}, "
                f"block={B}, local_blocks=2, global_tokens={B}, stride=4, random_blocks=1)</code>: "
                f"{nb}x{nb} blocks, density {bm.density():.0%} before the causal mask. The probed token-level "
                f"matrix {'equals' if facts['block_sparse_agrees_with_blocks'] else 'DIFFERS FROM'} "
                "<code>blocks()</code> expanded to tokens and cut by causality.</p>")
    body.append(figure(fig3, "whole 16-token blocks are on or off, so the kernel skips whole tiles; the colours "
                             "say which rule let each block through."))

    # Chunked linear attention.
    T3, C = 32, 16
    seen, carried_diff, state_shape, half = probe_chunked_linear(T3, C)
    facts["linear_carried_state_max_abs_diff"] = carried_diff
    facts["linear_causal_agrees"] = bool(np.array_equal(seen, np.tril(np.ones((T3, T3), bool))))
    lin = lambda i, j, on: 0 if not on else (1 if i // C == j // C else 2)
    fig4 = _matrix_svg(seen, lin, "chunked linear attention", 8,
                       legend_items=[("c1", "intra-chunk (quadratic, in-chunk)"), ("c2", "through the carried state")])
    body.append("<h3>Chunked linear attention: in the chunk vs through the state</h3>"
                f"<p><code>chunk_linear_attn</code> with chunk_size={C}: a query sees every earlier key, but only "
                "keys of its own chunk are compared with it directly; everything before arrives folded into a "
                f"state of shape {list(state_shape)[1:]} (heads, K, V) whatever the length. Running tokens "
                f"{half}..{T3 - 1} alone from the state carried out of tokens 0..{half - 1} reproduces the full run "
                f"to max |diff| = <span class=\"check\">{carried_diff:.2e}</span>.</p>")
    body.append(figure(fig4, "the same causal triangle as softmax, but the orange part costs a fixed-size "
                             "state, not a growing cache."))
    return Section(ID, TITLE, "".join(body), facts, figures=4)
