"""attnzoo.attention_decode against plain torch: the paged cache is gathered through its block table in torch,
then each sequence is an explicit float64 softmax over its own keys (conftest.softmax_reference)."""
import numpy as np
import pytest
import torch

import attnzoo
from conftest import gather_paged, rel_rms, sdpa_reference, softmax_reference, to_paged, token_visibility


def make_cache(B, S_max, Hkv, D, dtype=torch.float32, seed=0, Dv=None):
    g = torch.Generator().manual_seed(seed)
    k = torch.randn(B, S_max, Hkv, D, generator=g).to(dtype)
    v = torch.randn(B, S_max, Hkv, Dv or D, generator=g).to(dtype)
    return k, v


def torch_decode(q, k_cache, v_cache, lens, block_table=None, causal=True, window=None, block_mask=None, **kw):
    """Reference decode in float64 torch, one sequence at a time over its own valid keys."""
    B, Tq = q.shape[:2]
    outs = []
    for b in range(B):
        L = int(lens[b])
        if block_table is None:
            k, v = k_cache[b, :L], v_cache[b, :L]
        else:
            k, v = gather_paged(k_cache, block_table, b, L), gather_paged(v_cache, block_table, b, L)
        vis = token_visibility(Tq, L, causal=causal, window=window, block_mask=block_mask)
        outs.append(softmax_reference(q[b:b + 1], k[None], v[None], vis, **kw))
    return torch.cat(outs)


LENS = [1, 8, 63, 65, 300, 2000]


@pytest.mark.parametrize("Tq", [1, 2, 8])
def test_contiguous_f32(Tq, torch_one_thread):
    lens = [max(L, Tq) for L in LENS]
    k, v = make_cache(len(lens), max(lens) + 5, 2, 64, seed=Tq)
    q = torch.randn(len(lens), Tq, 8, 64)
    seqlens = torch.tensor(lens, dtype=torch.int32)
    got = attnzoo.attention_decode(q, k, v, seqlens)
    want = torch_decode(q, k, v, lens)
    assert got.shape == (len(lens), Tq, 8, 64) and got.dtype == torch.float32
    assert (got.double() - want).abs().max().item() <= 2e-5


def test_every_target_and_sdpa(simd_target, torch_one_thread):
    Tq, lens = 3, [700, 5]
    k, v = make_cache(2, 700, 4, 80, seed=1)
    q = torch.randn(2, Tq, 8, 80)
    got = attnzoo.attention_decode(q, k, v, torch.tensor(lens, dtype=torch.int32))
    for b, L in enumerate(lens):
        want = sdpa_reference(q[b:b + 1], k[b:b + 1, :L], v[b:b + 1, :L], token_visibility(Tq, L))
        assert (got[b:b + 1].double() - want).abs().max().item() <= 2e-5


@pytest.mark.parametrize("block_size", [16, 5, 64])
def test_paged_matches_torch_and_contiguous(block_size, torch_one_thread):
    lens, Tq = [4, 65, 1000], 4
    k, v = make_cache(3, 1003, 2, 64, seed=block_size)
    kp, table = to_paged(k, block_size, seed=block_size)
    vp, _ = to_paged(v, block_size, seed=block_size)
    q = torch.randn(3, Tq, 4, 64)
    seqlens = torch.tensor(lens, dtype=torch.int32)
    paged = attnzoo.attention_decode(q, kp, vp, seqlens, block_table=table)
    want = torch_decode(q, kp, vp, lens, block_table=table)
    assert (paged.double() - want).abs().max().item() <= 2e-5
    assert torch.equal(paged, attnzoo.attention_decode(q, k, v, seqlens))


def test_block_table_padding_is_never_read(torch_one_thread):
    k, v = make_cache(2, 40, 1, 32)
    kp, table = to_paged(k, 16)
    vp, _ = to_paged(v, 16)
    table[0, 1:] = -1  # sequence 0 has 10 keys: only its first block is used
    q = torch.randn(2, 1, 2, 32)
    lens = [10, 40]
    got = attnzoo.attention_decode(q, kp, vp, torch.tensor(lens, dtype=torch.int32), block_table=table)
    assert (got.double() - torch_decode(q, kp, vp, lens, block_table=table)).abs().max().item() <= 2e-5


@pytest.mark.parametrize("opts", [
    dict(causal=False),
    dict(window=1),
    dict(window=50),
    dict(softcap=5.0),
    dict(sinks=[0.5, -1.0, 2.0, 0.0]),
    dict(alibi_slopes=[0.5, 0.25, 0.125, 0.0625], window=300, softcap=20.0, scale=0.2),
    dict(block_mask="sparse"),
    dict(block_mask="sparse", causal=False, sinks=[1.0, 0.0, -1.0, 3.0]),
    dict(block_mask="nothing", sinks=[1.0, 0.0, -1.0, 3.0]),
])
def test_options(opts, torch_one_thread):
    opts = dict(opts)
    if opts.get("block_mask") == "sparse":
        opts["block_mask"] = attnzoo.block_mask(2100, block=32, local_blocks=2, global_tokens=20, stride=4,
                                                random_blocks=1, seed=3)
    elif opts.get("block_mask") == "nothing":  # no local band, no globals: every row sees nothing -> zeros
        opts["block_mask"] = attnzoo.block_mask(2100, block=16, local_blocks=0)
    lens, Tq = [5, 130, 2000], 5
    k, v = make_cache(3, 2000, 2, 64, seed=7)
    kp, table = to_paged(k, 16, seed=2)
    vp, _ = to_paged(v, 16, seed=2)
    q = torch.randn(3, Tq, 4, 64)
    seqlens = torch.tensor(lens, dtype=torch.int32)
    want = torch_decode(q, k, v, lens, **opts)
    got = attnzoo.attention_decode(q, k, v, seqlens, **opts)
    assert (got.double() - want).abs().max().item() <= 2e-5
    got_paged = attnzoo.attention_decode(q, kp, vp, seqlens, block_table=table, **opts)
    assert torch.equal(got, got_paged)


@pytest.mark.parametrize("kv_dtype", [torch.bfloat16, torch.float16])
def test_reduced_precision(kv_dtype, torch_one_thread):
    lens, Tq = [1000, 33], 2
    k, v = make_cache(2, 1000, 8, 128, dtype=kv_dtype, seed=4)
    q = torch.randn(2, Tq, 32, 128).to(torch.bfloat16)
    got = attnzoo.attention_decode(q, k, v, torch.tensor(lens, dtype=torch.int32))
    assert got.dtype == torch.bfloat16
    want = torch_decode(q, k, v, lens)
    assert rel_rms(got.float().numpy(), want.numpy()) <= 1e-2
    got32 = attnzoo.attention_decode(q.float(), k, v, torch.tensor(lens, dtype=torch.int32))
    assert got32.dtype == torch.float32
    assert rel_rms(got32.numpy(), want.numpy()) <= 1e-2


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_bad_cached_value_reaches_only_the_rows_that_see_it(dtype, simd_target, torch_one_thread):
    """The docstring's promise for a NaN / Inf in the cache: rows whose softmax hides its key (outside the window,
    a later new token's, past a cached prefill's query) keep the reference's values, the others turn non-finite.
    attnzoo's references skip hidden keys; the torch one above would multiply them by 0. Every value path of the
    kernels is held to this in kernels/softmax/hidden_values_test.cc."""
    from attnzoo.decode import attention_decode_reference
    k, v = make_cache(1, 100, 2, 32, dtype, seed=9)
    v[0, 90, 1, 3], v[0, 99, 1, 5] = float("nan"), float("inf")
    lens = torch.tensor([100], dtype=torch.int32)

    def same_reach(got, want):
        got, want = got.float(), want.float()
        assert torch.equal(torch.isfinite(got), torch.isfinite(want))
        assert torch.isfinite(want).any() and not torch.isfinite(want).all()
        seen = torch.isfinite(want)
        torch.testing.assert_close(got[seen], want[seen], atol=2e-2 if dtype == torch.bfloat16 else 1e-5, rtol=0)

    for Tq, window in [(1, 5), (1, 11), (4, None)]:
        q = torch.randn(1, Tq, 4, 32, generator=torch.Generator().manual_seed(Tq)).to(dtype)
        same_reach(attnzoo.attention_decode(q, k, v, lens, window=window),
                   attention_decode_reference(q, k, v, lens, window=window))
    q = torch.randn(1, 64, 4, 32, generator=torch.Generator().manual_seed(3)).to(dtype)
    k64, v64 = k[:, :64].clone(), v[:, :64].clone()
    v64[0, 40, 1, 3] = float("nan")
    same_reach(attnzoo.attention(q, k64, v64, seqused_k=torch.tensor([64], dtype=torch.int32)),
               attnzoo.attention_reference(q, k64, v64))


def test_head_dims_and_narrow_values(torch_one_thread):
    for D, Dv in [(60, 60), (96, 96), (256, 256), (96, 64)]:
        k, v = make_cache(1, 300, 1, D, Dv=Dv, seed=D)
        q = torch.randn(1, 2, 4, D)
        got = attnzoo.attention_decode(q, k, v, torch.tensor([290], dtype=torch.int32))
        assert got.shape == (1, 2, 4, Dv)
        assert (got.double() - torch_decode(q, k, v, [290])).abs().max().item() <= 2e-5


def test_numpy_single_token_and_out(torch_one_thread):
    k, v = make_cache(2, 50, 2, 32)
    q = torch.randn(2, 4, 32)  # [B, Hq, D]: one new token per sequence
    lens = np.array([50, 20], dtype=np.int64)
    want = torch_decode(q[:, None], k, v, lens)[:, 0]
    got = attnzoo.attention_decode(q.numpy(), k.numpy(), v.numpy(), lens)
    assert isinstance(got, np.ndarray) and got.shape == (2, 4, 32)
    assert np.abs(got - want.numpy()).max() <= 2e-5
    out = torch.zeros(2, 1, 4, 32)
    res = attnzoo.attention_decode(q[:, None], k, v, torch.from_numpy(lens), out=out)
    assert res is out and (out[:, 0].double() - want).abs().max().item() <= 2e-5


def _error(exc, fragment, *args, **kw):
    with pytest.raises(exc) as info:
        attnzoo.attention_decode(*args, **kw)
    assert fragment in str(info.value), str(info.value)


def test_errors_name_the_argument():
    k, v = make_cache(2, 20, 2, 16)
    q = torch.randn(2, 2, 4, 16)
    lens = torch.tensor([10, 20], dtype=torch.int32)
    _error(ValueError, "q: new_tokens", torch.randn(2, 9, 4, 16), k, v, lens)
    _error(ValueError, "q: head count 3", torch.randn(2, 2, 3, 16), k, v, lens)
    _error(ValueError, "q: contains NaN", torch.full((2, 2, 4, 16), float("nan")), k, v, lens)
    _error(ValueError, "cache_seqlens: entry 1 is 21", q, k, v, torch.tensor([10, 21], dtype=torch.int32))
    _error(ValueError, "cache_seqlens: entry 0 is 1", q, k, v, torch.tensor([1, 20], dtype=torch.int32))
    _error(ValueError, "cache_seqlens: must have 2 entries", q, k, v, torch.tensor([10], dtype=torch.int32))
    _error(TypeError, "cache_seqlens", q, k, v, torch.tensor([10.0, 20.0]))
    _error(ValueError, "v_cache: dtype", q, k, v.to(torch.bfloat16), lens)
    _error(TypeError, "k_cache", q, k.to(torch.int32), v.to(torch.int32), lens)
    _error(ValueError, "k_cache: head_dim", torch.randn(2, 2, 4, 8), k, v, lens)
    _error(ValueError, "sinks", q, k, v, lens, sinks=[0.0, 1.0])
    _error(ValueError, "window", q, k, v, lens, window=0)
    _error(TypeError, "window: expected an int, got float", q, k, v, lens, window=2.5)
    _error(ValueError, "block_mask: covers 16", q, k, v, lens, block_mask=attnzoo.block_mask(16, block=16))
    kp, table = to_paged(k, 4)
    vp, _ = to_paged(v, 4)
    bad = table.clone()
    bad[1, 3] = kp.shape[0]
    _error(ValueError, "block_table: entry [1, 3]", q, kp, vp, lens, block_table=bad)
    _error(TypeError, "block_table", q, kp, vp, lens, block_table=table.float())
    _error(ValueError, "block_table: has 1 rows", q, kp, vp, lens, block_table=table[:1])
    _error(ValueError, "beyond the cache capacity of 8", q, kp, vp, lens, block_table=table[:, :2].contiguous())
