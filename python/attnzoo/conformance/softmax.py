"""Softmax attention: prefill, decode, KV-cache writes (plain and quantized), MLA and LSH attention, each against
attention written out in torch (explicit masks, the math of transformers' modules)."""
import numpy as np

from . import check, compare, require, skipped

AREA = "softmax attention"


def _rand(torch, *shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def torch_attention(torch, q, k, v, *, causal=True, window=None, softcap=None, scale=None, q_offset=None):
    """q [B, Tq, Hq, D], k / v [B, Tk, Hkv, D] -> [B, Tq, Hq, Dv] in float64; queries bottom-right aligned."""
    q, k, v = (x.double() for x in (q, k, v))
    groups = q.shape[2] // k.shape[2]
    k, v = k.repeat_interleave(groups, dim=2), v.repeat_interleave(groups, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) * (scale if scale is not None else q.shape[-1] ** -0.5)
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    tq, tk = q.shape[1], k.shape[1]
    i = torch.arange(tq)[:, None] + (tk - tq if q_offset is None else q_offset)
    j = torch.arange(tk)[None, :]
    visible = torch.ones(tq, tk, dtype=torch.bool)
    if causal:
        visible &= j <= i
    if window:
        visible &= j > i - window
    s = s.masked_fill(~visible, float("-inf"))
    return torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, dim=-1), v)


@check(AREA, ["softmax prefill"])
def softmax_prefill(ctx):
    torch = require("torch")
    import attnzoo
    T = 37 if ctx.quick else 300
    q, k, v = _rand(torch, 2, T, 4, 32, seed=1), _rand(torch, 2, T, 2, 32, seed=2), _rand(torch, 2, T, 2, 32, seed=3)
    rows = []
    for name, kw in (("causal GQA", dict(causal=True)), ("non-causal", dict(causal=False)),
                     ("sliding window 8 + softcap 5", dict(causal=True, window=8, softcap=5.0))):
        rows.append(compare(AREA, "softmax prefill", f"attnzoo.attention {name}, T={T}, Hq=4, Hkv=2, D=32",
                            "torch (explicit mask, float64)", attnzoo.attention(q, k, v, **kw),
                            torch_attention(torch, q, k, v, **kw), 1e-5))
    return rows


@check(AREA, ["softmax decode", "KV cache writes"])
def softmax_decode(ctx):
    torch = require("torch")
    import attnzoo
    B, block, Hkv, D = 3, 16, 2, 32
    lengths = [5, 40, 23]
    blocks_per_seq = 3
    perm = torch.randperm(B * blocks_per_seq, generator=torch.Generator().manual_seed(0)).int()
    table = perm.reshape(B, blocks_per_seq)
    k_cache = torch.zeros(B * blocks_per_seq, block, Hkv, D)
    v_cache = torch.zeros_like(k_cache)
    k_rows = [_rand(torch, n, Hkv, D, seed=10 + b) for b, n in enumerate(lengths)]
    v_rows = [_rand(torch, n, Hkv, D, seed=20 + b) for b, n in enumerate(lengths)]
    slots = torch.cat([table[b, torch.arange(n) // block].long() * block + torch.arange(n) % block
                       for b, n in enumerate(lengths)])
    attnzoo.write_kv_paged(torch.cat(k_rows), torch.cat(v_rows), slots, k_cache, v_cache)
    want_k = torch.zeros_like(k_cache).reshape(-1, Hkv, D)
    want_k[slots] = torch.cat(k_rows)
    rows = [compare(AREA, "KV cache writes", f"write_kv_paged: {sum(lengths)} rows into shuffled 16-slot blocks",
                    "torch index assignment", k_cache.reshape(-1, Hkv, D), want_k, 0.0)]
    q = _rand(torch, B, 1, 4, D, seed=30)
    got = attnzoo.attention_decode(q, k_cache, v_cache, torch.tensor(lengths, dtype=torch.int32), block_table=table)
    want = torch.cat([torch_attention(torch, q[b:b + 1], k_rows[b][None], v_rows[b][None])
                      for b in range(B)])
    rows.append(compare(AREA, "softmax decode", f"attention_decode: paged cache, lengths {lengths}, GQA 4/2",
                        "torch over the gathered keys (float64)", got, want, 1e-5))
    return rows


@check(AREA, ["quantized KV cache"])
def quantized_kv_cache(ctx):
    torch = require("torch")
    import attnzoo
    T, block, Hkv, D = 40, 16, 2, 32
    k, v = _rand(torch, T, Hkv, D, seed=40), _rand(torch, T, Hkv, D, seed=41)
    q = _rand(torch, 1, 1, 4, D, seed=42)
    table = torch.arange(3, dtype=torch.int32)[None]
    want = torch_attention(torch, q, k[None], v[None])
    rows = []
    for dtype, tol in (("int8", 2e-2), ("fp8", 8e-2)):
        store = torch.int8 if dtype == "int8" else torch.uint8
        kc, vc = torch.zeros(3, block, Hkv, D, dtype=store), torch.zeros(3, block, Hkv, D, dtype=store)
        ks, vs = torch.zeros(3, block, Hkv), torch.zeros(3, block, Hkv)
        attnzoo.write_kv_paged(k, v, torch.arange(T), kc, vc, k_scale=ks, v_scale=vs, kv_cache_dtype=dtype)
        got = attnzoo.attention_decode(q, kc, vc, torch.tensor([T], dtype=torch.int32), block_table=table,
                                       k_scale=ks, v_scale=vs, kv_cache_dtype=dtype)
        rows.append(compare(AREA, "quantized KV cache", f"{dtype} cache (per-row scales), decode over {T} keys",
                            "torch f32 attention on the unquantized keys", got, want, tol))
    return rows


@check(AREA, ["MLA"])
def mla(ctx):
    torch = require("torch")
    import attnzoo
    B, T, H, r, nope, rope, dv = 1, 29, 4, 32, 16, 8, 16
    q = _rand(torch, B, T, H, nope + rope, seed=50)
    latent = _rand(torch, B, T, r + rope, seed=51)
    w_kv_b = _rand(torch, H * (nope + dv), r, seed=52) * r ** -0.5
    kv = (latent[..., :r] @ w_kv_b.T).reshape(B, T, H, nope + dv)
    k = torch.cat([kv[..., :nope], latent[..., None, r:].expand(B, T, H, rope)], dim=-1)
    want = torch_attention(torch, q, k, kv[..., nope:])
    got = attnzoo.mla_prefill(q, latent, w_kv_b, kv_lora_rank=r, qk_nope_head_dim=nope, qk_rope_head_dim=rope,
                              v_head_dim=dv)
    return [compare(AREA, "MLA", f"mla_prefill (naive form), T={T}, H={H}, rank {r}",
                    "torch: latent expanded through kv_b_proj as DeepseekV3Attention does", got, want, 1e-5)]


@check(AREA, ["LSH attention"])
def lsh(ctx):
    torch = require("torch")
    import attnzoo
    # With T <= chunk_length Reformer does not hash: every token sees every other one, its own position
    # scores -1e5, keys are the shared QK vectors length-normalised and the scores are
    # not scaled further (lsh_attention takes qk after transformers' projections).
    B, T, H, D = 1, 24, 2, 16
    qk, v = _rand(torch, B, T, H, D, seed=60), _rand(torch, B, T, H, D, seed=61)
    got = attnzoo.lsh_attention(qk, v, buckets=torch.zeros(B, H, 1, T, dtype=torch.int32), chunk_length=32)
    qd, vd = qk.double(), v.double()
    keys = qd / qd.norm(dim=-1, keepdim=True)
    s = torch.einsum("bqhd,bkhd->bhqk", qd, keys)
    s = s.masked_fill(torch.eye(T, dtype=torch.bool), -1e5)
    want = torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, dim=-1), vd)
    rows = [compare(AREA, "LSH attention", f"lsh_attention, T={T} within one chunk, shared QK, no self-attention",
                    "torch restatement of transformers' LSHSelfAttention scores", got, want, 1e-5)]
    return rows + [_lsh_against_reformer(torch, attnzoo)]


def reformer_lsh_module(torch, H, D, num_hashes, num_buckets, chunk, causal, seed):
    """transformers' LSHSelfAttention taking hidden = [qk | v] (identity projections pick each half unchanged),
    hashing with the rotations it draws after seeding with hash_seed = `seed`. ImportError without transformers'
    Reformer."""
    from transformers import ReformerConfig
    from transformers.models.reformer.modeling_reformer import LSHSelfAttention
    config = ReformerConfig(attn_layers=["lsh"], hidden_size=2 * H * D, num_attention_heads=H, attention_head_size=D,
                            num_buckets=num_buckets, num_hashes=num_hashes, lsh_attn_chunk_length=chunk,
                            lsh_num_chunks_before=1, lsh_num_chunks_after=0, is_decoder=causal, hash_seed=seed,
                            lsh_attention_probs_dropout_prob=0.0)
    module = LSHSelfAttention(config, layer_idx=0).eval()
    eye, zero = torch.eye(H * D), torch.zeros(H * D, H * D)
    with torch.no_grad():
        module.query_key.weight.copy_(torch.cat([eye, zero], 1))
        module.value.weight.copy_(torch.cat([zero, eye], 1))
    return module


def _lsh_against_reformer(torch, attnzoo):
    """Hashed chunks and rounds: transformers' LSHSelfAttention with identity projections (hidden = [qk | v]) and
    the rotations it draws after seeding with hash_seed, run in float64 on its own float32 buckets."""
    compared = "lsh_attention: T=64, chunks of 16, 2 hash rounds, 4 buckets, causal"
    B, T, H, D, hashes, buckets, chunk, seed = 1, 64, 2, 16, 2, 4, 16, 7
    try:
        module = reformer_lsh_module(torch, H, D, hashes, buckets, chunk, True, seed)
    except ImportError as e:
        return skipped(AREA, "LSH attention", compared, "transformers LSHSelfAttention",
                       f"skipped: transformers' Reformer not available ({e})")
    qk, v = _rand(torch, B, T, H, D, seed=62), _rand(torch, B, T, H, D, seed=63)
    hidden = torch.cat([qk.reshape(B, T, H * D), v.reshape(B, T, H * D)], -1)
    with torch.no_grad():
        theirs32 = module(hidden)
        want = module.double()(hidden.double(), buckets=theirs32.buckets).hidden_states
    torch.manual_seed(seed)  # the draw LSHSelfAttention makes after seeding with hash_seed
    rotations = torch.randn(H, D, hashes, buckets // 2)
    got = attnzoo.lsh_attention(qk, v, rotations, chunk_length=chunk, causal=True)
    return compare(AREA, "LSH attention", compared, "transformers LSHSelfAttention (float64 on its buckets)",
                   got.reshape(B, T, H * D), want, 1e-5)
