"""Section 3 - what each token costs to remember.

Curves come from attnzoo.explain.memory (the single set of formulas); the dots are the bytes of cache tensors this
section actually allocated and ran a decode step against, at a few context lengths.
"""
import numpy as np

from .. import attention_decode, mla_decode
from . import memory
from ..linear import causal_conv1d, chunk_gated_delta_rule, recurrent_gated_delta_rule
from .page import Section, figure, table
from .svg import esc, human_bytes, human_tokens, legend_html, line_chart

ID = "memory-per-token"
TITLE = "3. What each token costs to remember"

HQ, D = 32, 128
WINDOW = 1024
GDN = dict(num_heads=16, key_dim=128, value_dim=128)
GDN_CONV = dict(conv_channels=3 * 16 * 128, conv_width=4)  # q, k and v pass through the short conv
MLA = dict(kv_lora_rank=512, qk_rope_head_dim=64)


def layer_specs():
    gqa = memory.softmax_kv(8, D, dtype="float16", kind="GQA (8 kv heads)")
    gdn = memory.linear_state(**GDN, **GDN_CONV, kind="Gated DeltaNet")
    return {
        "MHA (32 kv heads)": memory.softmax_kv(32, D, dtype="float16", kind="MHA"),
        "GQA (8 kv heads)": gqa,
        "MQA (1 kv head)": memory.softmax_kv(1, D, dtype="float16", kind="MQA"),
        "MLA (r=512 + 64)": memory.mla_latent(**MLA, dtype="float16"),
        f"SWA (8 kv heads, W={WINDOW})": memory.softmax_kv(8, D, dtype="float16", window=WINDOW, kind="SWA"),
        "Gated DeltaNet (16x128x128)": gdn,
        "hybrid 3:1 (per layer)": memory.hybrid_stack(gdn, gqa, 4),
    }


def _bytes_at(spec, T):
    if isinstance(spec, list):
        return memory.stack_bytes(spec, T) / len(spec)
    return spec.bytes_at(T)


def _fill(shape, rng):
    """Small random f16 values without generating one random number per element."""
    block = (rng.standard_normal(4096) * 0.1).astype(np.float16)
    n = int(np.prod(shape))
    return np.resize(block, n).reshape(shape)


def measure_softmax(hkv, T, rng):
    k = _fill((1, T, hkv, D), rng)
    v = _fill((1, T, hkv, D), rng)
    q = _fill((1, HQ, D), rng)
    out = attention_decode(q, k, v, np.array([T], np.int32))
    assert np.all(np.isfinite(out.astype(np.float32)))
    return k.nbytes + v.nbytes


def measure_ring(hkv, T, rng):
    """A sliding-window layer keeps a ring of the last WINDOW tokens; decode over the ring (softmax does not
    care about slot order once keys carry their rotary position) equals windowed decode over the full cache."""
    keep = min(T, WINDOW)
    k = _fill((1, keep, hkv, D), rng)
    v = _fill((1, keep, hkv, D), rng)
    q = _fill((1, HQ, D), rng)
    attention_decode(q, k, v, np.array([keep], np.int32))
    return k.nbytes + v.nbytes


def ring_equals_window(rng, T=1536, hkv=2):
    k = rng.standard_normal((1, T, hkv, 64)).astype(np.float32)
    v = rng.standard_normal((1, T, hkv, 64)).astype(np.float32)
    q = rng.standard_normal((1, 4, 64)).astype(np.float32)
    full = attention_decode(q, k, v, np.array([T], np.int32), window=WINDOW)
    ring_k = np.empty((1, WINDOW, hkv, 64), np.float32)
    ring_v = np.empty_like(ring_k)
    for pos in range(T - WINDOW, T):  # slot = position % WINDOW, as a ring buffer writes them
        ring_k[0, pos % WINDOW], ring_v[0, pos % WINDOW] = k[0, pos], v[0, pos]
    ring = attention_decode(q, ring_k, ring_v, np.array([WINDOW], np.int32))
    return float(np.max(np.abs(full - ring)))


def measure_mla(T, rng):
    r, dr, dn, dv, H = MLA["kv_lora_rank"], MLA["qk_rope_head_dim"], 128, 128, 16
    cache = _fill((1, T, r + dr), rng)
    q = _fill((1, 1, H, dn + dr), rng)
    w = _fill((H * (dn + dv), r), rng)
    mla_decode(q, cache, np.array([T], np.int32), w, kv_lora_rank=r, qk_nope_head_dim=dn, qk_rope_head_dim=dr,
               v_head_dim=dv)
    return cache.nbytes


def measure_gdn(T, rng):
    """Prefill a prompt (at most 256 tokens: the state's size does not depend on how many), then decode one
    token from the carried state; the measured bytes are the state and conv tail the decode step returns."""
    H, K, V = GDN["num_heads"], GDN["key_dim"], GDN["value_dim"]
    C, W = GDN_CONV["conv_channels"], GDN_CONV["conv_width"]
    P = min(T, 256)
    x = rng.standard_normal((1, P + 1, C)).astype(np.float32)
    weight = rng.standard_normal((C, W)).astype(np.float32) * 0.3
    _, conv_prompt = causal_conv1d(x[:, :P], weight, output_final_state=True, activation="silu")
    _, conv_tail = causal_conv1d(x[:, P:], weight, initial_state=conv_prompt, output_final_state=True,
                                 activation="silu")
    q = rng.standard_normal((1, P + 1, H, K)).astype(np.float32)
    k = rng.standard_normal((1, P + 1, H, K)).astype(np.float32)
    v = rng.standard_normal((1, P + 1, H, V)).astype(np.float32)
    g = -np.abs(rng.standard_normal((1, P + 1, H))).astype(np.float32) * 0.1
    beta = np.full((1, P + 1, H), 0.5, np.float32)
    _, state = chunk_gated_delta_rule(q[:, :P], k[:, :P], v[:, :P], g[:, :P], beta[:, :P], output_final_state=True,
                                      use_qk_l2norm_in_kernel=True)
    _, state = recurrent_gated_delta_rule(q[:, P:], k[:, P:], v[:, P:], g[:, P:], beta[:, P:], initial_state=state,
                                          output_final_state=True, use_qk_l2norm_in_kernel=True)
    return state.nbytes + conv_tail.nbytes


def build(ctx):
    rng = np.random.default_rng(11)
    specs = layer_specs()
    Ts = [256, 1024, 4096] + ([16384] if ctx.full else [])
    names = list(specs)
    measured = {n: {} for n in names}
    for T in Ts:
        measured[names[0]][T] = measure_softmax(32, T, rng)
        measured[names[1]][T] = measure_softmax(8, T, rng)
        measured[names[2]][T] = measure_softmax(1, T, rng)
        measured[names[3]][T] = measure_mla(T, rng)
        measured[names[4]][T] = measure_ring(8, T, rng)
        measured[names[5]][T] = measure_gdn(T, rng)
        measured[names[6]][T] = (3 * measured[names[5]][T] + measured[names[1]][T]) / 4
    ring_diff = ring_equals_window(rng)
    facts = {"kinds": {n: {str(T): {"formula": _bytes_at(specs[n], T), "measured": measured[n][T]} for T in Ts}
                       for n in names},
             "ring_vs_window_max_abs_diff": ring_diff}
    xs = [2 ** e for e in range(8, 18)]
    series = []
    markers = []
    for i, n in enumerate(names):
        cls = f"c{i + 1}" if i < 7 else "c0"
        series.append({"name": n, "cls": cls, "points": [(x, max(_bytes_at(specs[n], x), 1)) for x in xs]})
        for T in Ts:
            markers.append({"x": T, "y": measured[n][T], "cls": cls,
                            "title": f"{n} at {T} tokens: measured {measured[n][T]:,.0f} B"})
    chart = line_chart(series, width=720, height=360, xlabel="context length (tokens)",
                       ylabel="bytes per sequence, per layer", xlog=True, ylog=True, xfmt=human_tokens,
                       yfmt=human_bytes, xticks=[4 ** e for e in range(4, 9)] + [131072],
                       yticks=[1024 * 16 ** e for e in range(6)], markers=markers, label="cache bytes vs context")
    rows = []
    for n in names:
        spec = specs[n]
        per_tok = (sum(s.bytes_per_token for s in spec) / len(spec)) if isinstance(spec, list) else spec.bytes_per_token
        fixed = (sum(s.fixed_bytes for s in spec) / len(spec)) if isinstance(spec, list) else spec.fixed_bytes
        cells = [esc(n), f"{per_tok:,.0f}", f"{fixed:,.0f}"]
        for T in Ts:
            f, m = _bytes_at(spec, T), measured[n][T]
            ok = abs(f - m) < 0.5
            cells.append(f'<span data-formula="{f:.0f}" data-measured="{m:.0f}">{human_bytes(m)}</span> '
                         f'<span class="{"ok" if ok else "bad"}">{"= formula" if ok else "!= " + human_bytes(f)}</span>')
        rows.append(cells)
    tbl = table(["layer", "bytes / token", "fixed bytes"] + [f"measured at {human_tokens(T)}" for T in Ts], rows)
    body = ["<p>Softmax attention must keep every past key and value: its cache grows by "
            "<code>2 · Hkv · D · bytes</code> per token. Sharing kv heads (GQA, MQA) divides that; MLA caches one "
            "compressed latent per token instead; a sliding window stops growing at W tokens; linear-attention "
            "and delta-rule layers keep a fixed matrix per head (plus a few tokens of short-convolution "
            "history) however long the context. Lines: the formulas in <code>attnzoo.explain.memory</code> "
            "(one layer, one sequence, f16 caches, f32 states). Dots: bytes of the cache tensors allocated here "
            "and read by a real decode call (<code>attention_decode</code>, <code>mla_decode</code>, "
            "<code>recurrent_gated_delta_rule</code> + <code>causal_conv1d</code>).</p>",
            figure(chart + legend_html(series) + tbl,
                   "at long context a GQA layer outweighs a Gated DeltaNet layer; the hybrid 3:1 stack grows at "
                   "a quarter of GQA's slope.",
                   caption=f"The SWA dots are a ring buffer of the last {WINDOW} tokens; decode over the ring "
                           f"matches windowed decode over the full cache to max |diff| = "
                           f"<span class=\"check\">{ring_diff:.1e}</span>.")]
    return Section(ID, TITLE, "".join(body), facts, figures=1)
