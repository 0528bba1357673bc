"""MLA (attnzoo.mla_prefill / mla_decode) against a plain-torch restatement of transformers' DeepseekV3Attention
math (kv_b_proj expansion, shared k_rot, softmax), and against the module itself for one end-to-end check."""
import math

import numpy as np
import pytest
import torch

import attnzoo
from conftest import rel_rms

SMALL = dict(kv_lora_rank=64, qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32)
DEEPSEEK = dict(kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128)


def torch_mla(q, kv_latent, w_kv_b, dims, scale=None, causal=True):
    """DeepseekV3Attention after its projections: expand_kv, then eager softmax attention, in float64.

    q [B, Tq, H, dn + dr]; kv_latent [B, Tk, r + dr]; queries are the last Tq of Tk positions."""
    r, dn, dr, dv = (dims[k] for k in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"))
    q, kv_latent, w = q.double(), kv_latent.double(), w_kv_b.double()
    B, Tq, H, _ = q.shape
    Tk = kv_latent.shape[1]
    kv_nope, k_rot = torch.split(kv_latent, [r, dr], dim=-1)
    kv = torch.nn.functional.linear(kv_nope, w).view(B, Tk, H, dn + dv)
    k_nope, v = torch.split(kv, [dn, dv], dim=-1)
    k = torch.cat([k_nope, k_rot[:, :, None, :].expand(B, Tk, H, dr)], dim=-1)
    scale = (dn + dr) ** -0.5 if scale is None else scale
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) * scale
    if causal:
        qpos = torch.arange(Tq)[:, None] + (Tk - Tq)
        s = s.masked_fill(torch.arange(Tk)[None, :] > qpos, float("-inf"))
    return torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, dim=-1), v)


def make_inputs(B, Tq, Tk, H, dims, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    r, dn, dr, dv = (dims[k] for k in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"))
    q = torch.randn(B, Tq, H, dn + dr, generator=g).to(dtype)
    kv_latent = torch.randn(B, Tk, r + dr, generator=g).to(dtype)
    w = (torch.randn(H * (dn + dv), r, generator=g) / math.sqrt(r)).to(dtype)
    return q, kv_latent, w


@pytest.mark.parametrize("B,Tq,Tk,H,causal", [(2, 37, 37, 4, True), (1, 64, 64, 4, False), (2, 9, 50, 3, True)])
def test_prefill_f32(B, Tq, Tk, H, causal):
    q, lat, w = make_inputs(B, Tq, Tk, H, SMALL)
    got = attnzoo.mla_prefill(q, lat, w, causal=causal, **SMALL)
    want = torch_mla(q, lat, w, SMALL, causal=causal)
    assert got.shape == (B, Tq, H, SMALL["v_head_dim"]) and got.dtype == torch.float32
    assert (got.double() - want).abs().max().item() <= 2e-5


def test_prefill_deepseek_dims_and_scale():
    q, lat, w = make_inputs(1, 20, 20, 2, DEEPSEEK, seed=1)
    got = attnzoo.mla_prefill(q, lat, w, scale=0.07, **DEEPSEEK)
    assert (got.double() - torch_mla(q, lat, w, DEEPSEEK, scale=0.07)).abs().max().item() <= 2e-5


def test_prefill_bf16_and_numpy():
    q, lat, w = make_inputs(1, 50, 50, 4, SMALL, dtype=torch.bfloat16, seed=2)
    got = attnzoo.mla_prefill(q, lat, w, **SMALL)
    assert got.dtype == torch.bfloat16
    assert rel_rms(got.float().numpy(), torch_mla(q, lat, w, SMALL).numpy()) <= 1e-2
    q, lat, w = make_inputs(1, 10, 10, 4, SMALL, seed=3)
    got = attnzoo.mla_prefill(q.numpy(), lat.numpy(), w.numpy(), **SMALL)
    assert isinstance(got, np.ndarray)
    assert np.abs(got - torch_mla(q, lat, w, SMALL).numpy()).max() <= 2e-5


def test_prefill_varlen_matches_per_sequence():
    lens = [5, 31, 1, 20]
    H = 4
    qs, lats = [], []
    _, _, w = make_inputs(1, 1, 1, H, SMALL, seed=10)
    for i, n in enumerate(lens):
        q, lat, _ = make_inputs(1, n, n, H, SMALL, seed=20 + i)
        qs.append(q[0])
        lats.append(lat[0])
    cu = torch.tensor([0] + list(np.cumsum(lens)), dtype=torch.int32)
    got = attnzoo.mla_prefill(torch.cat(qs), torch.cat(lats), w, cu_seqlens=cu, **SMALL)
    for i, n in enumerate(lens):
        want = torch_mla(qs[i][None], lats[i][None], w, SMALL)[0]
        assert (got[cu[i]:cu[i + 1]].double() - want).abs().max().item() <= 2e-5


def make_cache(lens, S_max, dims, dtype=torch.float32, seed=5):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(len(lens), S_max, dims["kv_lora_rank"] + dims["qk_rope_head_dim"], generator=g).to(dtype)


def to_paged(cache, block_size, seed=7):
    """The same rows in shuffled blocks of a paged cache, unused rows NaN (a wrong read would show)."""
    B, S_max, L = cache.shape
    nblk = -(-S_max // block_size)
    perm = torch.randperm(B * nblk + 2, generator=torch.Generator().manual_seed(seed))
    table = perm[: B * nblk].view(B, nblk).to(torch.int32)
    paged = torch.full((B * nblk + 2, block_size, L), float("nan"), dtype=cache.dtype)
    for b in range(B):
        for j in range(S_max):
            paged[table[b, j // block_size], j % block_size] = cache[b, j]
    return paged, table


@pytest.mark.parametrize("block_size", [16, 7, 48])
def test_prefill_over_paged_latent_pool(block_size):
    """Chunked prefill on a KV pool: latent rows written with write_paged_rows into [num_blocks, block_size, 1,
    r + dr] through a shuffled block table, packed queries of different lengths, the naive form over the pool."""
    lens, q_lens, H = [50, 23, 7], [10, 23, 1], 4
    L = SMALL["kv_lora_rank"] + SMALL["qk_rope_head_dim"]
    g = torch.Generator().manual_seed(block_size)
    latents = [torch.randn(n, L, generator=g) for n in lens]
    per_seq = -(-max(lens) // block_size)
    num_blocks = len(lens) * per_seq + 2
    table = torch.randperm(num_blocks, generator=g)[: len(lens) * per_seq].view(len(lens), per_seq).to(torch.int32)
    pool = torch.full((num_blocks, block_size, 1, L), float("nan"))
    for b, n in enumerate(lens):
        pos = torch.arange(n)
        attnzoo.write_paged_rows(latents[b][:, None], table[b, pos // block_size].long() * block_size + pos % block_size,
                                 pool)
    _, _, w = make_inputs(1, 1, 1, H, SMALL, seed=11)
    qs = [make_inputs(1, t, t, H, SMALL, seed=30 + i)[0][0] for i, t in enumerate(q_lens)]
    cu = torch.tensor([0] + list(np.cumsum(q_lens)), dtype=torch.int32)
    got = attnzoo.mla_prefill(torch.cat(qs), pool, w, cu_seqlens=cu, cache_seqlens=torch.tensor(lens),
                              block_table=table, **SMALL)
    for b, n in enumerate(lens):
        want = torch_mla(qs[b][None], latents[b][None], w, SMALL)[0]
        assert (got[cu[b]:cu[b + 1]].double() - want).abs().max().item() <= 2e-5


# Absorption computes q_nope . (W_UK c_kv) as (W_UK^T q_nope) . c_kv and W_UV (sum p c_kv) instead of
# sum p (W_UV c_kv): the same sums in another order, so f32 results move by ~1e-6, well inside 2e-5.
@pytest.mark.parametrize("dims,H,lens,Tq", [(SMALL, 4, [37, 64, 1], 1), (SMALL, 4, [90, 8], 4),
                                            (SMALL, 16, [300], 1), (SMALL, 4, [40, 20], 12),
                                            (DEEPSEEK, 2, [45, 3], 2)])
def test_decode_matches_torch_and_prefill(dims, H, lens, Tq):
    S_max = max(lens) + 5
    cache = make_cache(lens, S_max, dims)
    q, _, w = make_inputs(len(lens), Tq, Tq, H, dims, seed=6)
    seqlens = torch.tensor(lens, dtype=torch.int32)
    got = attnzoo.mla_decode(q, cache, seqlens, w, **dims)
    paged, table = to_paged(cache, 16)
    got_paged = attnzoo.mla_decode(q, paged, seqlens, w, block_table=table, **dims)
    assert (got_paged - got).abs().max().item() <= 1e-6
    for b, n in enumerate(lens):
        want = torch_mla(q[b:b + 1], cache[b:b + 1, :n], w, dims)[0]
        assert (got[b].double() - want).abs().max().item() <= 2e-5
        naive = attnzoo.mla_prefill(q[b:b + 1], cache[b:b + 1, :n], w, **dims)[0]
        assert (got[b] - naive).abs().max().item() <= 2e-5


def test_decode_bf16():
    lens = [77, 120]
    cache = make_cache(lens, 128, SMALL, dtype=torch.bfloat16)
    q, _, w = make_inputs(2, 1, 1, 4, SMALL, dtype=torch.bfloat16, seed=8)
    got = attnzoo.mla_decode(q, cache, torch.tensor(lens, dtype=torch.int32), w, **SMALL)
    assert got.dtype == torch.bfloat16
    for b, n in enumerate(lens):
        want = torch_mla(q[b:b + 1], cache[b:b + 1, :n], w, SMALL)[0]
        assert rel_rms(got[b].float().numpy(), want.numpy()) <= 1e-2


def test_matches_transformers_deepseek_v3_attention():
    """End to end: DeepseekV3Attention's own projections and RoPE feed our kernel; its o_proj reads our output."""
    from transformers import DeepseekV3Config
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as ds

    cfg = DeepseekV3Config(hidden_size=64, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=None,
                           kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
                           rope_interleave=False, attn_implementation="eager")
    torch.manual_seed(0)
    attn = ds.DeepseekV3Attention(cfg, layer_idx=0).eval()
    rope = ds.DeepseekV3RotaryEmbedding(cfg)
    B, T, H = 2, 12, cfg.num_attention_heads
    dims = dict(kv_lora_rank=cfg.kv_lora_rank, qk_nope_head_dim=cfg.qk_nope_head_dim,
                qk_rope_head_dim=cfg.qk_rope_head_dim, v_head_dim=cfg.v_head_dim)
    x = torch.randn(B, T, cfg.hidden_size)
    pos = torch.arange(T)[None].expand(B, T)
    cos, sin = rope(x, pos)
    mask = torch.full((T, T), float("-inf")).triu(1)[None, None].expand(B, 1, T, T)
    with torch.no_grad():
        want, _ = attn(x, (cos, sin), mask)
        # The module's own steps up to attention, as its forward performs them.
        q = attn.q_proj(x).view(B, T, H, -1).transpose(1, 2)
        q_pass, q_rot = torch.split(q, [cfg.qk_nope_head_dim, cfg.qk_rope_head_dim], dim=-1)
        kv_nope, k_rot = torch.split(attn.kv_a_proj_with_mqa(x), [cfg.kv_lora_rank, cfg.qk_rope_head_dim], dim=-1)
        kv_nope = attn.kv_a_layernorm(kv_nope)
        q_rot, k_rot = ds.apply_rotary_pos_emb(q_rot, k_rot.view(B, 1, T, -1), cos, sin)
        q = torch.cat([q_pass, q_rot], dim=-1).transpose(1, 2).contiguous()
        latent = torch.cat([kv_nope, k_rot[:, 0]], dim=-1).contiguous()
        w = attn.kv_b_proj.weight
        o = attnzoo.mla_prefill(q, latent, w, scale=attn.scaling, **dims)
        got = attn.o_proj(o.reshape(B, T, -1))
        assert (got - want).abs().max().item() <= 2e-5
        o_dec = attnzoo.mla_decode(q[:, -2:].contiguous(), latent, torch.full((B,), T, dtype=torch.int32), w,
                                   scale=attn.scaling, **dims)
        got_dec = attn.o_proj(o_dec.reshape(B, 2, -1))
        assert (got_dec - want[:, -2:]).abs().max().item() <= 2e-5


def test_reference_agrees():
    q, lat, w = make_inputs(1, 15, 15, 4, SMALL, seed=9)
    got = attnzoo.mla.mla_prefill_reference(q, lat, w, **SMALL)
    assert (got.double() - torch_mla(q, lat, w, SMALL)).abs().max().item() <= 2e-6


def test_decode_refuses_a_non_finite_q_by_name():
    """As mla_prefill does: a NaN query would otherwise come back as a silent row of zeros."""
    q, _, w = make_inputs(1, 4, 4, 4, SMALL)
    cache, lens = make_cache([8], 8, SMALL), torch.tensor([8], dtype=torch.int32)
    bad = q.clone()
    bad[0, 1, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="q: contains NaN or Inf"):
        attnzoo.mla_decode(bad, cache, lens, w, **SMALL)
    attnzoo.mla_decode(bad, cache, lens, w, check_inputs=False, **SMALL)  # skipped on request
    assert torch.isfinite(attnzoo.mla_decode(q, cache, lens, w, **SMALL)).all()


def test_errors_name_the_argument():
    q, lat, w = make_inputs(1, 4, 4, 4, SMALL)
    with pytest.raises(ValueError, match="w_kv_b"):
        attnzoo.mla_prefill(q, lat, w[:-1], **SMALL)
    with pytest.raises(ValueError, match="kv_latent"):
        attnzoo.mla_prefill(q, lat[..., :-1], w, **SMALL)
    with pytest.raises(ValueError, match="q"):
        attnzoo.mla_prefill(q[..., :-1], lat, w, **SMALL)
    with pytest.raises(ValueError, match="v_head_dim"):
        attnzoo.mla_prefill(q, lat, w, **{**SMALL, "v_head_dim": 0})
    with pytest.raises(ValueError, match="scale"):
        attnzoo.mla_prefill(q, lat, w, scale=-1.0, **SMALL)
    with pytest.raises(ValueError, match="kv_latent"):
        attnzoo.mla_prefill(q, lat.clone().fill_(float("nan")), w, **SMALL)
    with pytest.raises(ValueError, match="cu_seqlens"):
        attnzoo.mla_prefill(q[0], lat[0], w, cu_seqlens=torch.tensor([0, 3], dtype=torch.int32), **SMALL)
    with pytest.raises(TypeError, match="kv_latent"):
        attnzoo.mla_prefill(q, lat.to(torch.int32), w, **SMALL)
    cache = make_cache([8], 8, SMALL)
    with pytest.raises(ValueError, match="cache_seqlens"):
        attnzoo.mla_decode(q, cache, torch.tensor([3], dtype=torch.int32), w, **SMALL)
    with pytest.raises(ValueError, match="cache_seqlens"):
        attnzoo.mla_decode(q, cache, torch.tensor([9], dtype=torch.int32), w, **SMALL)
    with pytest.raises(ValueError, match="cache_seqlens"):
        attnzoo.mla_decode(q, cache, torch.tensor([8, 8], dtype=torch.int32), w, **SMALL)
    with pytest.raises(ValueError, match="latent_cache"):
        attnzoo.mla_decode(q, cache[..., :-1], torch.tensor([8], dtype=torch.int32), w, **SMALL)
    with pytest.raises(ValueError, match="block_table"):
        attnzoo.mla_decode(q, cache, torch.tensor([8], dtype=torch.int32), w,
                           block_table=torch.tensor([[4]], dtype=torch.int32), **SMALL)
    with pytest.raises(TypeError, match="block_table"):
        attnzoo.mla_decode(q, cache, torch.tensor([8], dtype=torch.int32), w,
                           block_table=torch.tensor([[0.0]]), **SMALL)
