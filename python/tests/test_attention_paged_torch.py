"""attnzoo.attention over a KV cache (block_table + seqused_k, flash-attn's names) and attnzoo.write_kv_paged,
against torch: the paged cache is gathered through its block table in torch, then each sequence goes through
torch SDPA (or the explicit float64 softmax for softcap / sinks / ALiBi) over its own keys."""
import pytest
import torch

import attnzoo
from conftest import gather_paged, rel_rms, sdpa_reference, softmax_reference, to_paged, token_visibility

Q_LENS, K_LENS = [5, 64, 1, 130], [40, 64, 300, 200]


def make_inputs(q_lens, k_lens, Hq=8, Hkv=2, D=64, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    S_max = max(k_lens) + 3
    q = torch.randn(sum(q_lens), Hq, D, generator=g).to(dtype)
    k = torch.randn(len(k_lens), S_max, Hkv, D, generator=g).to(dtype)
    v = torch.randn(len(k_lens), S_max, Hkv, D, generator=g).to(dtype)
    return q, k, v


def cu(lens):
    return torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32)


def torch_paged(q, kp, vp, table, q_lens, k_lens, *, causal=True, window=None, explicit=False, **kw):
    """Per sequence: its keys gathered through the block table, queries the last Tq of them."""
    outs, start = [], 0
    for b, (tq, tk) in enumerate(zip(q_lens, k_lens)):
        k, v = gather_paged(kp, table, b, tk)[None], gather_paged(vp, table, b, tk)[None]
        qb = q[None, start:start + tq]
        vis = token_visibility(tq, tk, causal=causal, window=window)
        outs.append((softmax_reference(qb, k, v, vis, **kw) if explicit else sdpa_reference(qb, k, v, vis))[0])
        start += tq
    return torch.cat(outs)


@pytest.mark.parametrize("block_size", [16, 7, 48, 1])
def test_paged_varlen_matches_sdpa(block_size, torch_one_thread):
    q, k, v = make_inputs(Q_LENS, K_LENS, seed=block_size)
    kp, table = to_paged(k, block_size, seed=block_size)
    vp, _ = to_paged(v, block_size, seed=block_size)
    seqused = torch.tensor(K_LENS, dtype=torch.int32)
    got = attnzoo.attention(q, kp, vp, cu_seqlens=cu(Q_LENS), block_table=table, seqused_k=seqused)
    want = torch_paged(q, kp, vp, table, Q_LENS, K_LENS)
    assert got.shape == q.shape and got.dtype == torch.float32
    assert (got.double() - want).abs().max().item() <= 2e-5
    # The same keys packed contiguously (cu_seqlens_k): the very same arithmetic.
    k_packed = torch.cat([k[b, :n] for b, n in enumerate(K_LENS)])
    v_packed = torch.cat([v[b, :n] for b, n in enumerate(K_LENS)])
    flat = attnzoo.attention(q, k_packed, v_packed, cu_seqlens=cu(Q_LENS), cu_seqlens_k=cu(K_LENS))
    assert torch.equal(got, flat)
    if block_size == 7:  # the double-precision C++ reference reads the cache through the same arguments
        ref = attnzoo.attention_reference(q, kp, vp, cu_seqlens=cu(Q_LENS), block_table=table, seqused_k=seqused)
        assert (ref.double() - want).abs().max().item() <= 1e-5


def test_every_target(simd_target, torch_one_thread):
    q, k, v = make_inputs([20, 70], [90, 70], D=80, seed=3)
    kp, table = to_paged(k, 7, seed=3)
    vp, _ = to_paged(v, 7, seed=3)
    got = attnzoo.attention(q, kp, vp, cu_seqlens=cu([20, 70]), block_table=table,
                            seqused_k=torch.tensor([90, 70], dtype=torch.int32))
    assert (got.double() - torch_paged(q, kp, vp, table, [20, 70], [90, 70])).abs().max().item() <= 2e-5


@pytest.mark.parametrize("opts", [dict(causal=False), dict(window=50), dict(softcap=5.0),
                                  dict(sinks=[0.5, -1.0, 2.0, 0.0, 1.0, -2.0, 0.3, 0.1]),
                                  dict(alibi_slopes=[2.0 ** -i for i in range(1, 9)], window=64, softcap=20.0)])
def test_paged_mask_options(opts, torch_one_thread):
    q, k, v = make_inputs(Q_LENS, K_LENS, seed=5)
    kp, table = to_paged(k, 7, seed=5)
    vp, _ = to_paged(v, 7, seed=5)
    got = attnzoo.attention(q, kp, vp, cu_seqlens=cu(Q_LENS), block_table=table,
                            seqused_k=torch.tensor(K_LENS, dtype=torch.int32), **opts)
    kw = {name: torch.tensor(opts[name]) for name in ("sinks", "alibi_slopes") if name in opts}
    want = torch_paged(q, kp, vp, table, Q_LENS, K_LENS, causal=opts.get("causal", True),
                       window=opts.get("window"), explicit=True, softcap=opts.get("softcap"), **kw)
    assert (got.double() - want).abs().max().item() <= 2e-5


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_caches(dtype, torch_one_thread):
    q, k, v = make_inputs([33, 129], [100, 129], Hq=4, Hkv=2, D=128, dtype=dtype, seed=6)
    kp, table = to_paged(k, 16, seed=6)
    vp, _ = to_paged(v, 16, seed=6)
    got = attnzoo.attention(q, kp, vp, cu_seqlens=cu([33, 129]), block_table=table,
                            seqused_k=torch.tensor([100, 129], dtype=torch.int32))
    assert got.dtype == dtype
    assert rel_rms(got.float(), torch_paged(q, kp, vp, table, [33, 129], [100, 129])) <= 1e-2


def test_padded_queries_paged_and_contiguous_cache(torch_one_thread):
    """flash_attn_with_kvcache's form: q [B, Tq, Hq, D], cache_seqlens per sequence."""
    k_lens = [33, 90, 161]
    g = torch.Generator().manual_seed(9)
    q = torch.randn(3, 33, 8, 64, generator=g)
    _, k, v = make_inputs([1], k_lens, seed=9)
    lens = torch.tensor(k_lens, dtype=torch.int32)
    contiguous = attnzoo.attention(q, k, v, cache_seqlens=lens)
    kp, table = to_paged(k, 48, seed=9)
    vp, _ = to_paged(v, 48, seed=9)
    paged = attnzoo.attention(q, kp, vp, block_table=table, cache_seqlens=lens)
    assert torch.equal(paged, contiguous)
    want = torch_paged(q.reshape(-1, 8, 64), kp, vp, table, [33] * 3, k_lens).reshape(3, 33, 8, 64)
    assert (paged.double() - want).abs().max().item() <= 2e-5


def test_cache_argument_errors():
    q, k, v = make_inputs([4], [10], seed=1)
    kp, table = to_paged(k, 4)
    vp, _ = to_paged(v, 4)
    lens = torch.tensor([10], dtype=torch.int32)
    with pytest.raises(ValueError, match="^seqused_k: is required with block_table"):
        attnzoo.attention(q, kp, vp, cu_seqlens=cu([4]), block_table=table)
    with pytest.raises(ValueError, match="^cache_seqlens: give seqused_k or cache_seqlens"):
        attnzoo.attention(q, kp, vp, cu_seqlens=cu([4]), block_table=table, seqused_k=lens, cache_seqlens=lens)
    with pytest.raises(ValueError, match="^cache_seqlens: entry 0 is 3"):
        attnzoo.attention(q, kp, vp, cu_seqlens=cu([4]), block_table=table, seqused_k=torch.tensor([3]))
    bad = table.clone()
    bad[0, 1] = 1000
    with pytest.raises(ValueError, match=r"^block_table: entry \[0, 1\] = 1000"):
        attnzoo.attention(q, kp, vp, cu_seqlens=cu([4]), block_table=bad, seqused_k=lens)
    with pytest.raises(ValueError, match="^cu_seqlens_k: is not used with a KV cache"):
        attnzoo.attention(q, kp, vp, cu_seqlens=cu([4]), cu_seqlens_k=cu([10]), block_table=table, seqused_k=lens)
    with pytest.raises(ValueError, match="^seqused_k"):
        attnzoo.attention(q, kp, vp, cu_seqlens=cu([4]), block_table=table, seqused_k=torch.tensor([10, 10]))


@pytest.mark.parametrize("cache_dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_write_kv_paged_matches_torch_scatter(cache_dtype):
    T, H, D, Dv, num_blocks, bs = 100, 2, 64, 32, 12, 16
    g = torch.Generator().manual_seed(0)
    k_new, v_new = torch.randn(T, H, D, generator=g), torch.randn(T, H, Dv, generator=g)
    slots = torch.randperm(num_blocks * bs, generator=g)[:T]
    slots[::7] = -1  # padding tokens are skipped
    k_cache = torch.randn(num_blocks, bs, H, D, generator=g).to(cache_dtype)
    v_cache = torch.randn(num_blocks, bs, H, Dv, generator=g).to(cache_dtype)
    k_want, v_want = k_cache.clone(), v_cache.clone()
    keep = slots >= 0
    k_want.view(-1, H, D)[slots[keep]] = k_new[keep].to(cache_dtype)  # torch rounds to nearest even too
    v_want.view(-1, H, Dv)[slots[keep]] = v_new[keep].to(cache_dtype)
    attnzoo.write_kv_paged(k_new, v_new, slots, k_cache, v_cache)
    assert torch.equal(k_cache, k_want) and torch.equal(v_cache, v_want)


def test_write_then_attend_round_trip(torch_one_thread):
    """A prefill chunk written with write_kv_paged is what attention then reads through the same table."""
    Hkv, D, bs, prefix, chunk = 2, 64, 7, 30, 12
    g = torch.Generator().manual_seed(4)
    num_blocks = 10
    table = torch.randperm(num_blocks, generator=g)[:7].to(torch.int32)[None]
    k_cache = torch.zeros(num_blocks, bs, Hkv, D, dtype=torch.bfloat16)
    v_cache = torch.zeros_like(k_cache)
    k_all, v_all = torch.randn(prefix + chunk, Hkv, D, generator=g), torch.randn(prefix + chunk, Hkv, D, generator=g)
    pos = torch.arange(prefix + chunk)
    slots = table[0, pos // bs].long() * bs + pos % bs
    attnzoo.write_kv_paged(k_all[:prefix], v_all[:prefix], slots[:prefix], k_cache, v_cache)
    attnzoo.write_kv_paged(k_all[prefix:], v_all[prefix:], slots[prefix:], k_cache, v_cache)
    q = torch.randn(chunk, 8, D, generator=g)
    got = attnzoo.attention(q, k_cache, v_cache, cu_seqlens=cu([chunk]), block_table=table,
                            seqused_k=torch.tensor([prefix + chunk], dtype=torch.int32))
    k_ref, v_ref = k_all.to(torch.bfloat16).float()[None], v_all.to(torch.bfloat16).float()[None]
    want = sdpa_reference(q[None], k_ref, v_ref, token_visibility(chunk, prefix + chunk))[0]
    assert (got.double() - want).abs().max().item() <= 2e-5


def test_write_kv_paged_errors():
    k_new = torch.randn(4, 2, 8)
    cache = torch.zeros(2, 4, 2, 8, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="^v_cache: is k_cache"):  # the values would overwrite the keys
        attnzoo.write_kv_paged(k_new, k_new + 1, torch.tensor([0, 1, 2, 3]), cache, cache)
    assert not cache.any()
    both = torch.zeros(2, 2, 4, 2, 8, dtype=torch.bfloat16)  # FlashInfer's [num_blocks, 2, ...]: interleaved, distinct
    attnzoo.write_kv_paged(k_new, k_new + 1, torch.tensor([0, 1, 2, 3]), both[:, 0], both[:, 1])
    assert torch.equal(both[0, 0], k_new.bfloat16()) and torch.equal(both[0, 1], (k_new + 1).bfloat16())
    with pytest.raises(ValueError, match="^v_scale: is only used with v_new"):
        attnzoo._core.write_kv_paged(k_new, None, torch.tensor([0, 1, 2, 3]), cache, None, None,
                                     torch.zeros(2, 4, 2), "auto")
    with pytest.raises(ValueError, match="^slot_mapping: entry 2 = 8 is past"):
        attnzoo.write_kv_paged(k_new, k_new, torch.tensor([0, 1, 8, 2]), cache, cache.clone())
    assert not cache.any()
    with pytest.raises(TypeError, match="^slot_mapping"):
        attnzoo.write_kv_paged(k_new, k_new, torch.tensor([0.0, 1, 2, 3]), cache, cache.clone())
    with pytest.raises(ValueError, match="^slot_mapping: must be 1-D with 4 entries"):
        attnzoo.write_kv_paged(k_new, k_new, torch.tensor([0, 1]), cache, cache.clone())
    with pytest.raises(ValueError, match="^v_cache: dtype float16"):
        attnzoo.write_kv_paged(k_new, k_new, torch.tensor([0, 1, 2, 3]), cache, cache.to(torch.float16))


def test_write_kv_paged_takes_empty_caches():
    """torch gives every empty tensor a null data pointer, so two empty caches look like one array."""
    attnzoo.write_kv_paged(torch.randn(0, 2, 8), torch.randn(0, 2, 8), torch.zeros(0, dtype=torch.int64),
                           torch.zeros(0, 16, 2, 8), torch.zeros(0, 16, 2, 8))
