"""Softmax prefill (attnzoo.attention) against PyTorch: SDPA with explicit boolean masks for the mask family,
an explicit float64 softmax for softcap / sinks / ALiBi, on every SIMD target."""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import attnzoo
from conftest import rel_rms, sdpa_reference, softmax_reference, token_visibility

pytestmark = pytest.mark.usefixtures("torch_one_thread")

F32_ATOL = 2e-5
BF16_RTOL = 1e-2


def randn(*shape, seed, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float32).to(dtype)


def qkv(B, Tq, Tk, Hq, Hkv, D, Dv=None, seed=0, dtype=torch.float32):
    return (randn(B, Tq, Hq, D, seed=seed, dtype=dtype), randn(B, Tk, Hkv, D, seed=seed + 1, dtype=dtype),
            randn(B, Tk, Hkv, Dv or D, seed=seed + 2, dtype=dtype))


def max_abs(got, want):
    return float((torch.as_tensor(got).to(torch.float64) - torch.as_tensor(want).to(torch.float64)).abs().max())


def alibi_slopes(H):
    return torch.tensor([2.0 ** (-8.0 * (h + 1) / H) for h in range(H)])


# (name, Tq, Tk, attention kwargs builder). Block masks are built per case so each has its own pattern.
MASK_CASES = {
    "dense": (33, 33, lambda: dict(causal=False)),
    "causal": (65, 65, lambda: dict(causal=True)),
    "bottom_right_causal": (7, 70, lambda: dict(causal=True)),
    "window": (130, 130, lambda: dict(causal=True, window=17)),
    "window_tq_lt_tk": (20, 90, lambda: dict(causal=True, window=5)),
    "window_one": (40, 40, lambda: dict(causal=True, window=1)),
    "window_not_causal": (50, 50, lambda: dict(causal=False, window=9)),
    "block_sparse": (100, 100, lambda: dict(causal=False, block_mask=attnzoo.block_mask(
        100, block=16, local_blocks=2, global_tokens=16, stride=3))),
    "block_sparse_causal": (129, 129, lambda: dict(causal=True, block_mask=attnzoo.block_mask(
        129, block=32, local_blocks=1, global_tokens=1, random_blocks=1, seed=3))),
    "causal_window_block_tq_lt_tk": (40, 120, lambda: dict(causal=True, window=50, block_mask=attnzoo.block_mask(
        128, block=16, local_blocks=2, global_tokens=20))),
}


@pytest.mark.parametrize("case", sorted(MASK_CASES))
def test_masks_match_sdpa(case, simd_target):
    Tq, Tk, make_kwargs = MASK_CASES[case]
    kw = make_kwargs()
    q, k, v = qkv(2, Tq, Tk, 4, 2, 64, seed=11)
    out = attnzoo.attention(q, k, v, **kw)
    visible = token_visibility(Tq, Tk, causal=kw["causal"], window=kw.get("window"),
                               block_mask=kw.get("block_mask"))
    assert visible.any(axis=1).all() and not visible.all() or case == "dense"
    assert max_abs(out, sdpa_reference(q, k, v, visible)) <= F32_ATOL


@pytest.mark.parametrize("T", [1, 7, 63, 64, 65, 257])
def test_ragged_lengths_causal(T, simd_target):
    q, k, v = qkv(1, T, T, 2, 1, 64, seed=T)
    out = attnzoo.attention(q, k, v, causal=True)
    assert max_abs(out, sdpa_reference(q, k, v, token_visibility(T, T))) <= F32_ATOL


def test_long_sequence_with_window_and_gqa():
    T = 1000
    q, k, v = qkv(1, T, T, 4, 2, 64, seed=5)
    out = attnzoo.attention(q, k, v, causal=True, window=300)
    assert max_abs(out, sdpa_reference(q, k, v, token_visibility(T, T, window=300))) <= F32_ATOL


@pytest.mark.parametrize("D", [64, 80, 96, 128, 192, 256, 1, 60, 100, 512])
def test_head_dims(D, simd_target):
    q, k, v = qkv(1, 37, 37, 2, 2, D, seed=D)
    out = attnzoo.attention(q, k, v, causal=True)
    assert out.shape == (1, 37, 2, D)
    assert max_abs(out, sdpa_reference(q, k, v, token_visibility(37, 37))) <= F32_ATOL


def test_value_head_dim_may_differ_from_key_head_dim(simd_target):
    q, k, v = qkv(1, 45, 45, 4, 4, 192, Dv=128, seed=2)
    out = attnzoo.attention(q, k, v, causal=True, scale=0.1)
    assert out.shape == (1, 45, 4, 128)
    assert max_abs(out, sdpa_reference(q, k, v, token_visibility(45, 45), scale=0.1)) <= F32_ATOL


@pytest.mark.parametrize("Hq,Hkv", [(8, 2), (8, 1), (4, 4), (6, 3)])
def test_head_grouping(Hq, Hkv, simd_target):
    q, k, v = qkv(2, 30, 50, Hq, Hkv, 32, seed=Hq * 10 + Hkv)
    out = attnzoo.attention(q, k, v, causal=True)
    assert max_abs(out, sdpa_reference(q, k, v, token_visibility(30, 50))) <= F32_ATOL


# Score transforms that SDPA cannot express: the float64 explicit softmax is the yardstick.
TRANSFORM_CASES = {
    "softcap": lambda H: dict(softcap=5.0, scale=0.5),
    "sinks": lambda H: dict(sinks=randn(H, seed=9) * 2),
    "sinks_large": lambda H: dict(sinks=torch.full((H,), 8.0)),
    "alibi": lambda H: dict(alibi_slopes=alibi_slopes(H)),
    "alibi_window_not_causal": lambda H: dict(alibi_slopes=alibi_slopes(H), causal=False, window=20),
    "all": lambda H: dict(softcap=3.0, scale=0.4, sinks=randn(H, seed=4), alibi_slopes=alibi_slopes(H),
                          window=25),
}


@pytest.mark.parametrize("case", sorted(TRANSFORM_CASES))
@pytest.mark.parametrize("Tq,Tk", [(70, 70), (9, 75)])
def test_score_transforms_match_explicit_softmax(case, Tq, Tk, simd_target):
    H = 4
    kw = dict(causal=True)
    kw.update(TRANSFORM_CASES[case](H))
    q, k, v = qkv(1, Tq, Tk, H, 2, 64, seed=len(case) + Tq)
    out = attnzoo.attention(q, k, v, **kw)
    visible = token_visibility(Tq, Tk, causal=kw["causal"], window=kw.get("window"))
    want = softmax_reference(q, k, v, visible, scale=kw.get("scale"), softcap=kw.get("softcap"),
                             sinks=kw.get("sinks"), alibi_slopes=kw.get("alibi_slopes"))
    assert max_abs(out, want) <= F32_ATOL


def test_sinks_lower_the_output_magnitude():
    # Guards the reference itself: a sink only takes probability mass away from the values.
    q, k, v = qkv(1, 20, 20, 2, 2, 16, seed=1)
    v = torch.ones_like(v)
    out = attnzoo.attention(q, k, v, sinks=torch.tensor([0.0, 30.0]))
    assert float(out[:, :, 0].min()) < 1.0 and float(out[:, :, 1].max()) < 1e-6


def test_fully_masked_rows_give_zeros(simd_target):
    # Summary blocks are key blocks 3, 7, ...: under a causal mask query blocks 0..2 see no key at all.
    bm = attnzoo.block_mask(128, block=16, local_blocks=0, stride=4)
    q, k, v = qkv(1, 128, 128, 2, 1, 32, seed=3)
    for kw in (dict(), dict(sinks=torch.tensor([0.5, -1.0])), dict(softcap=2.0, alibi_slopes=alibi_slopes(2))):
        out = attnzoo.attention(q, k, v, causal=True, block_mask=bm, **kw)
        visible = token_visibility(128, 128, block_mask=bm)
        hidden = ~visible.any(axis=1)
        assert hidden.sum() == 48 and not hidden[48:].any()
        assert torch.equal(out[:, torch.as_tensor(hidden)], torch.zeros_like(out[:, torch.as_tensor(hidden)]))
        want = softmax_reference(q, k, v, visible, softcap=kw.get("softcap"), sinks=kw.get("sinks"),
                                 alibi_slopes=kw.get("alibi_slopes"))
        assert max_abs(out, want) <= F32_ATOL


def test_mask_that_hides_everything_gives_all_zeros(simd_target):
    bm = attnzoo.block_mask(64, block=8, local_blocks=0)
    q, k, v = qkv(2, 50, 64, 4, 2, 24, seed=8)
    for causal in (True, False):
        out = attnzoo.attention(q, k, v, causal=causal, block_mask=bm, sinks=torch.zeros(4))
        assert torch.count_nonzero(out) == 0


def split_reference(q, k, v, cu_q, cu_k, **kw):
    """Runs every packed sequence through sdpa / explicit softmax separately; q/k/v are [total, H, D]."""
    parts = []
    for s in range(len(cu_q) - 1):
        qs, ks, vs = q[cu_q[s]:cu_q[s + 1]][None], k[cu_k[s]:cu_k[s + 1]][None], v[cu_k[s]:cu_k[s + 1]][None]
        visible = token_visibility(qs.shape[1], ks.shape[1], causal=kw.get("causal", True), window=kw.get("window"))
        parts.append(softmax_reference(qs, ks, vs, visible, sinks=kw.get("sinks"))[0])
    return torch.cat(parts, dim=0)


@pytest.mark.parametrize("layout", ["3d", "4d"])
def test_varlen_packed_matches_per_sequence(layout, simd_target):
    lens = [1, 7, 65, 0, 30]
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    total = int(cu[-1])
    q, k, v = (randn(total, H, 48, seed=i) for i, H in enumerate((6, 3, 3)))
    wrap = (lambda x: x) if layout == "3d" else (lambda x: x[None])
    out = attnzoo.attention(wrap(q), wrap(k), wrap(v), causal=True, cu_seqlens=cu)
    assert out.shape == wrap(q).shape
    want = split_reference(q, k, v, cu, cu)
    assert max_abs(out.reshape(total, 6, 48), want) <= F32_ATOL
    # The sequences do not see each other: padded single-sequence calls agree with the packed call.
    alone = attnzoo.attention(q[cu[2]:cu[3]][None], k[cu[2]:cu[3]][None], v[cu[2]:cu[3]][None])
    assert max_abs(alone[0], out.reshape(total, 6, 48)[cu[2]:cu[3]]) <= F32_ATOL


@pytest.mark.parametrize("layout", ["3d", "4d"])
def test_varlen_with_longer_keys(layout, simd_target):
    lens_q, lens_k = [3, 10, 1, 0], [7, 10, 40, 5]
    cu_q = torch.tensor(np.concatenate([[0], np.cumsum(lens_q)]), dtype=torch.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)])  # int64 numpy: converted by the wrapper
    q, k, v = randn(sum(lens_q), 4, 40, seed=1), randn(sum(lens_k), 2, 40, seed=2), randn(sum(lens_k), 2, 40, seed=3)
    wrap = (lambda x: x) if layout == "3d" else (lambda x: x[None])
    for kw in (dict(causal=True), dict(causal=True, window=4, sinks=randn(4, seed=7)), dict(causal=False)):
        out = attnzoo.attention(wrap(q), wrap(k), wrap(v), cu_seqlens=cu_q, cu_seqlens_k=cu_k, **kw)
        want = split_reference(q, k, v, cu_q.tolist(), cu_k.tolist(), **kw)
        assert max_abs(out.reshape(q.shape), want) <= F32_ATOL


def test_numpy_in_numpy_out_and_torch_in_torch_out():
    q, k, v = qkv(1, 20, 20, 2, 2, 16, seed=4)
    out_t = attnzoo.attention(q, k, v)
    out_n = attnzoo.attention(q.numpy(), k.numpy(), v.numpy())
    assert isinstance(out_t, torch.Tensor) and out_t.dtype == torch.float32
    assert isinstance(out_n, np.ndarray) and out_n.dtype == np.float32
    assert np.array_equal(out_t.numpy(), out_n)
    ref = attnzoo.attention_reference(q.numpy(), k.numpy(), v.numpy())
    assert isinstance(ref, np.ndarray) and max_abs(ref, out_n) <= F32_ATOL
    half = attnzoo.attention(q.numpy().astype(np.float16), k.numpy().astype(np.float16), v.numpy().astype(np.float16))
    assert half.dtype == np.float16
    want = sdpa_reference(*(torch.from_numpy(x.numpy().astype(np.float16)) for x in (q, k, v)), token_visibility(20, 20))
    assert rel_rms(half.astype(np.float32), want) <= 2e-3


def test_out_argument_is_filled_and_returned():
    q, k, v = qkv(1, 10, 10, 2, 2, 16, seed=6)
    out = torch.full((1, 10, 2, 16), float("nan"), dtype=torch.bfloat16)
    got = attnzoo.attention(q, k, v, out=out)
    assert got is out
    assert rel_rms(out.float(), sdpa_reference(q, k, v, token_visibility(10, 10))) <= BF16_RTOL
    # A strided out ([B, H, T, D] storage seen as [B, T, H, D]) is written through its strides.
    storage = torch.full((1, 2, 10, 16), float("nan"))
    got = attnzoo.attention(q, k, v, out=storage.transpose(1, 2))
    assert max_abs(storage.transpose(1, 2), sdpa_reference(q, k, v, token_visibility(10, 10))) <= F32_ATOL


def test_non_contiguous_torch_inputs(simd_target):
    B, T, H, D = 2, 37, 4, 32
    q_bhtd = randn(B, H, T, D, seed=1)
    qkv_fused = randn(B, T, 3, H, D, seed=2)         # one projection, sliced into q/k/v views
    k_one_head = randn(B, T, 1, D, seed=3)
    cases = [
        (q_bhtd.transpose(1, 2), qkv_fused[:, :, 1], qkv_fused[:, :, 2]),
        (qkv_fused[:, :, 0], k_one_head.expand(B, T, H, D), qkv_fused[:, :, 2]),  # head stride 0
        (randn(B, 2 * T, H, D, seed=4)[:, ::2], qkv_fused[:, :, 1], qkv_fused[:, :, 2]),
    ]
    for q, k, v in cases:
        assert not q.is_contiguous() or not k.is_contiguous()
        out = attnzoo.attention(q, k, v, causal=True)
        assert out.is_contiguous() and out.shape == (B, T, H, D)
        assert torch.equal(out, attnzoo.attention(q.contiguous(), k.contiguous(), v.contiguous(), causal=True))
        assert max_abs(out, sdpa_reference(q, k, v, token_visibility(T, T))) <= F32_ATOL


def test_non_contiguous_packed_inputs():
    qkv_fused = randn(50, 3, 4, 16, seed=5)
    cu = np.array([0, 20, 50], dtype=np.int32)
    q, k, v = qkv_fused[:, 0], qkv_fused[:, 1], qkv_fused[:, 2]
    out = attnzoo.attention(q, k, v, cu_seqlens=cu)
    assert max_abs(out, split_reference(q, k, v, cu, cu)) <= F32_ATOL


@pytest.mark.parametrize("Tq,Tk,kw", [
    (64, 64, dict(causal=True)),
    (33, 97, dict(causal=True, window=40)),
    (50, 50, dict(causal=False, softcap=4.0, sinks=torch.tensor([0.3, -0.2, 1.0, 0.0]))),
])
def test_bf16_inputs(Tq, Tk, kw, simd_target):
    q, k, v = qkv(2, Tq, Tk, 4, 2, 128, seed=Tq, dtype=torch.bfloat16)
    out = attnzoo.attention(q, k, v, **kw)
    assert out.dtype == torch.bfloat16
    want = softmax_reference(q.float(), k.float(), v.float(),
                             token_visibility(Tq, Tk, causal=kw["causal"], window=kw.get("window")),
                             softcap=kw.get("softcap"), sinks=kw.get("sinks")).float()
    assert rel_rms(out.float(), want) <= BF16_RTOL
    # Mixed precision: f32 queries against a bf16 cache, f32 result.
    out32 = attnzoo.attention(q.float(), k, v, **kw)
    assert out32.dtype == torch.float32 and rel_rms(out32, want) <= BF16_RTOL


@pytest.mark.parametrize("D,Dv", [(1, 1), (3, 5), (60, 60), (65, 33), (100, 100), (512, 512)])
def test_bf16_odd_head_dims(D, Dv, simd_target):
    # The AVX-512-BF16 tiles pair up elements along head_dim and keys: odd sizes leave a half-filled pair.
    q, k, v = qkv(1, 19, 27, 4, 1, D, Dv=Dv, seed=D, dtype=torch.bfloat16)
    for kw in (dict(causal=True), dict(causal=False, window=6, scale=0.7)):
        out = attnzoo.attention(q, k, v, **kw)
        want = softmax_reference(q, k, v, token_visibility(19, 27, causal=kw["causal"], window=kw.get("window")),
                                 scale=kw.get("scale")).float()
        assert out.dtype == torch.bfloat16 and rel_rms(out.float(), want) <= BF16_RTOL


def test_bf16_fully_masked_rows_give_zeros(simd_target):
    bm = attnzoo.block_mask(96, block=16, local_blocks=0, stride=3)  # query blocks 0, 1 see nothing (causal)
    q, k, v = qkv(1, 96, 96, 2, 2, 64, seed=13, dtype=torch.bfloat16)
    for kw in (dict(), dict(sinks=torch.tensor([1.0, -1.0]))):
        out = attnzoo.attention(q, k, v, causal=True, block_mask=bm, **kw)
        assert torch.count_nonzero(out[:, :32]) == 0
        want = softmax_reference(q, k, v, token_visibility(96, 96, block_mask=bm), sinks=kw.get("sinks")).float()
        assert rel_rms(out.float(), want) <= BF16_RTOL


def test_mixed_input_dtypes(simd_target):
    q, k, v = qkv(1, 30, 30, 4, 2, 64, seed=21)
    want = sdpa_reference(q.half(), k.bfloat16(), v.bfloat16(), token_visibility(30, 30)).float()
    out = attnzoo.attention(q.half(), k.bfloat16(), v.bfloat16())
    assert out.dtype == torch.float16 and rel_rms(out.float(), want) <= 2e-3


def test_reference_agrees_with_torch():
    """attention_reference is the yardstick of the fuzz tests, so it is held to torch too."""
    H = 4
    q, k, v = qkv(1, 21, 40, H, 2, 24, Dv=16, seed=12)
    bm = attnzoo.block_mask(40, block=8, local_blocks=2, global_tokens=3)
    kw = dict(causal=True, window=15, softcap=2.5, scale=0.3, sinks=randn(H, seed=1), alibi_slopes=alibi_slopes(H),
              block_mask=bm)
    got = attnzoo.attention_reference(q, k, v, **kw)
    want = softmax_reference(q, k, v, token_visibility(21, 40, window=15, block_mask=bm), scale=0.3, softcap=2.5,
                             sinks=kw["sinks"], alibi_slopes=kw["alibi_slopes"])
    assert max_abs(got, want) <= 1e-6
    assert max_abs(attnzoo.attention(q, k, v, **kw), want) <= F32_ATOL


def test_requires_grad_inputs_are_accepted():
    q, k, v = (x.requires_grad_() for x in qkv(1, 8, 8, 2, 2, 8, seed=3))
    out = attnzoo.attention(q, k, v)
    assert not out.requires_grad
    assert max_abs(out, sdpa_reference(q.detach(), k.detach(), v.detach(), token_visibility(8, 8))) <= F32_ATOL


_BF16_PREFILL = """
import sys, numpy as np, torch, attnzoo
g = torch.Generator().manual_seed(5)
q, k, v = (torch.randn(1, 200, H, 128, generator=g).bfloat16() for H in (4, 2, 2))
np.save(sys.argv[1], attnzoo.attention(q, k, v, causal=True).float().numpy())
"""


def test_bf16_prefill_takes_the_amx_tiles_by_default(tmp_path):
    """Where AMX runs, bf16 prefill multiplies on the tiles under the default rule, which on Intel widens the
    vdpbf16ps paths to f32: its output is the bits of ATTNZOO_BF16_DOT=1 (the tiles too), not those of ATTNZOO_AMX=0
    (widened)."""
    from attnzoo import _core
    if not _core.amx_bf16_enabled():
        pytest.skip("no AMX-BF16 tiles in this process")

    def run(name, **env):
        path = tmp_path / f"{name}.npy"
        full = {k: val for k, val in os.environ.items() if k not in ("ATTNZOO_BF16_DOT", "ATTNZOO_AMX")}
        subprocess.run([sys.executable, "-c", _BF16_PREFILL, str(path)], env={**full, **env}, check=True)
        return np.load(path)

    default = run("default", ATTNZOO_BF16_DOT="0")
    tiles = run("tiles", ATTNZOO_BF16_DOT="1")
    widened = run("widened", ATTNZOO_BF16_DOT="0", ATTNZOO_AMX="0")
    assert np.array_equal(default, tiles)
    assert not np.array_equal(default, widened)
    assert rel_rms(default, widened) < BF16_RTOL
