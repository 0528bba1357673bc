"""RWKV-7 against flash-linear-attention's naive DPLR recurrence (fla/ops/generalized_delta_rule/dplr/naive.py,
loaded by path: the package's __init__ needs triton)."""
import numpy as np
import pytest
import torch

import attnzoo.linear as L
from conftest import rel_rms
import fla_naive

pytest.importorskip("fla")
naive = fla_naive.load("generalized_delta_rule/dplr")


def make(B=2, T=70, H=2, K=32, V=32, dtype=torch.float32, seed=0, w_value=None):
    """RWKV-7-shaped inputs: a = -kk, b = kk * iclr with kk unit-norm per head, w = -exp(.) log decays."""
    g = torch.Generator().manual_seed(seed)
    r = torch.randn(B, T, H, K, generator=g)
    w = -torch.exp(torch.randn(B, T, H, K, generator=g)) - 0.01 if w_value is None else torch.full((B, T, H, K), w_value)
    k = torch.randn(B, T, H, K, generator=g) / K ** 0.5
    v = torch.randn(B, T, H, V, generator=g)
    kk = torch.nn.functional.normalize(torch.randn(B, T, H, K, generator=g), dim=-1)
    iclr = torch.sigmoid(torch.randn(B, T, H, K, generator=g))
    h0 = torch.randn(B, H, K, V, generator=g)
    return [x.to(dtype) for x in (r, w, k, v, -kk, kk * iclr)] + [h0]


def fla_ref(r, w, k, v, a, b, scale, h0):
    K = r.shape[-1]
    tr = lambda x: x.float().transpose(1, 2)  # noqa: E731  [B, T, H, D] -> [B, H, T, D]
    # naive scales q by K ** -0.5 itself: undo it so `scale` is what applies.
    o, s = naive.dplr_recurrence(tr(r) * scale * K ** 0.5, tr(k), tr(v), tr(a), tr(b), tr(w), initial_state=h0,
                                 output_final_state=True)
    return o.transpose(1, 2), s


@pytest.mark.parametrize("T,K,V", [(1, 16, 16), (63, 60, 64), (65, 64, 100), (200, 128, 128)])
def test_matches_fla_naive(T, K, V):
    r, w, k, v, a, b, h0 = make(T=T, K=K, V=V)
    o_ref, s_ref = fla_ref(r, w, k, v, a, b, 1.0, h0)
    o, s = L.fused_recurrent_rwkv7(r, w, k, v, a, b, scale=1.0, initial_state=h0)
    assert rel_rms(o, o_ref) <= 1e-4 and rel_rms(s, s_ref) <= 1e-4


def test_default_scale_head_dim_256_numpy():
    r, w, k, v, a, b, h0 = make(B=1, T=20, H=1, K=256, V=64)
    o_ref, s_ref = fla_ref(r, w, k, v, a, b, 256 ** -0.5, h0)
    o, s = L.recurrent_rwkv7(*(x.numpy() for x in (r, w, k, v, a, b)), initial_state=h0.numpy())
    assert isinstance(o, np.ndarray)
    assert rel_rms(o, o_ref) <= 1e-4 and rel_rms(s, s_ref) <= 1e-4


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_inplace_final_state_decode_loop(framework):
    """Token by token into the caller's buffer (the engine's state slot) == one out-of-place call over the whole
    sequence; the buffer itself comes back."""
    r, w, k, v, a, b, h0 = make(B=3, T=6, H=2, K=32, V=48)
    o_ref, s_ref = L.recurrent_rwkv7(r, w, k, v, a, b, initial_state=h0)
    conv = (lambda x: x.numpy()) if framework == "numpy" else (lambda x: x)
    state = conv(h0.clone())
    for t in range(6):
        o, s = L.recurrent_rwkv7(*(conv(x[:, t:t + 1]).copy() if framework == "numpy" else x[:, t:t + 1]
                                   for x in (r, w, k, v, a, b)), initial_state=state, inplace_final_state=True)
        assert s is state
        assert rel_rms(o, o_ref[:, t:t + 1]) <= 1e-5
    assert rel_rms(torch.as_tensor(state), s_ref) <= 1e-5


def test_inplace_final_state_errors():
    r, w, k, v, a, b, h0 = make(B=2, T=1, H=2, K=16, V=16)
    with pytest.raises(ValueError, match="initial_state: inplace_final_state=True needs the state buffer"):
        L.recurrent_rwkv7(r, w, k, v, a, b, inplace_final_state=True)
    with pytest.raises(TypeError, match="initial_state: inplace_final_state=True needs float32"):
        L.recurrent_rwkv7(r, w, k, v, a, b, initial_state=h0.double(), inplace_final_state=True)
    with pytest.raises(ValueError, match="initial_state: expected shape"):
        L.recurrent_rwkv7(r, w, k, v, a, b, initial_state=h0[:1].clone(), inplace_final_state=True)
    with pytest.raises(ValueError, match="initial_state: expected shape"):
        L.recurrent_rwkv7(r, w, k, v, a, b, initial_state=h0[..., :8].clone(), inplace_final_state=True)


def test_packed_sequences_and_4097():
    lens = [1, 64, 4032]
    r, w, k, v, a, b, _ = make(B=1, T=sum(lens), H=1, K=16, V=16)
    cu = torch.tensor(np.cumsum([0] + lens), dtype=torch.int32)
    o, s = L.recurrent_rwkv7(r, w, k, v, a, b, scale=1.0, cu_seqlens=cu)
    for i, (lo, hi) in enumerate(zip(cu[:-1].tolist(), cu[1:].tolist())):
        sl = slice(lo, hi)
        oi, si = fla_ref(r[:, sl], w[:, sl], k[:, sl], v[:, sl], a[:, sl], b[:, sl], 1.0, None)
        assert rel_rms(o[:, sl], oi) <= 1e-4 and rel_rms(s[i:i + 1], si) <= 1e-4


def test_bf16_inputs():
    r, w, k, v, a, b, h0 = make(T=100, dtype=torch.bfloat16)
    o_ref, s_ref = fla_ref(r, w, k, v, a, b, 1.0, h0)
    o, s = L.recurrent_rwkv7(r, w, k, v, a, b, scale=1.0, initial_state=h0)
    assert o.dtype == torch.bfloat16
    assert rel_rms(o.float(), o_ref) <= 1e-2 and rel_rms(s, s_ref) <= 1e-2


@pytest.mark.parametrize("wv", [-8.0, 0.0])
def test_long_sequence_65536_stays_finite(wv):
    r, w, k, v, a, b, _ = make(B=1, T=65536, H=1, K=16, V=16, w_value=wv)
    o, s = L.recurrent_rwkv7(r, w, k, v, a, b)
    assert torch.isfinite(o).all() and torch.isfinite(s).all()


def test_errors_name_the_argument():
    r, w, k, v, a, b, h0 = make(T=10)
    with pytest.raises(ValueError, match="b:"):
        L.recurrent_rwkv7(r, w, k, v, a, b[..., :5])
    with pytest.raises(ValueError, match="initial_state"):
        L.recurrent_rwkv7(r, w, k, v, a, b, initial_state=h0[:, :1])
    bad = w.clone()
    bad[0, 0, 0, 0] = float("-inf")
    with pytest.raises(ValueError, match="w:"):
        L.recurrent_rwkv7(r, bad, k, v, a, b)
    with pytest.raises(TypeError, match="k:"):
        L.recurrent_rwkv7(r, w, k.to(torch.int32), v, a, b, check_inputs=False)


# ---- chunked (DPLR) prefill: chunk_rwkv7 / chunk_dplr_delta_rule ----

@pytest.mark.parametrize("T,K,V,chunk_size", [(1, 16, 16, 64), (63, 60, 64, 16), (65, 64, 100, 32), (200, 128, 128, 64),
                                              (300, 32, 48, 128)])
@pytest.mark.parametrize("with_h0", [True, False])
def test_chunk_matches_fla_naive(T, K, V, chunk_size, with_h0):
    r, w, k, v, a, b, h0 = make(T=T, K=K, V=V)
    h0 = h0 if with_h0 else None
    o_ref, s_ref = fla_ref(r, w, k, v, a, b, 1.0, h0)
    o, s = L.chunk_rwkv7(r, w, k, v, a, b, initial_state=h0, output_final_state=True, chunk_size=chunk_size)
    assert rel_rms(o, o_ref) <= 1e-4 and rel_rms(s, s_ref) <= 1e-4
    o_rec, s_rec = L.recurrent_rwkv7(r, w, k, v, a, b, scale=1.0, initial_state=h0)
    assert rel_rms(o, o_rec) <= 1e-4 and rel_rms(s, s_rec) <= 1e-4


def test_chunk_matches_fla_naive_chunkwise():
    # fla's own chunked naive form (needs T a multiple of its chunk) as a second, independent reference.
    r, w, k, v, a, b, h0 = make(T=128, K=32, V=32)
    tr = lambda x: x.float().transpose(1, 2)  # noqa: E731
    o_ref, s_ref = naive.dplr_chunkwise(tr(r) * 32 ** 0.5, tr(k), tr(v), tr(a), tr(b), tr(w), initial_state=h0,
                                        output_final_state=True, chunk_size=32)
    o, s = L.chunk_rwkv7(r, w, k, v, a, b, initial_state=h0, output_final_state=True, chunk_size=32)
    assert rel_rms(o, o_ref.transpose(1, 2)) <= 1e-4 and rel_rms(s, s_ref) <= 1e-4


@pytest.mark.parametrize("wv", [0.0, -0.5, -8.0, "spread"])
def test_chunk_decay_range(wv):
    r, w, k, v, a, b, h0 = make(T=150, K=64, V=64, w_value=None if wv == "spread" else wv)
    if wv == "spread":  # every strength from none to e^-8 per step, channel by channel
        w = -8.0 * torch.rand(w.shape, generator=torch.Generator().manual_seed(1))
    o_ref, s_ref = fla_ref(r, w, k, v, a, b, 1.0, h0)
    for cs in (16, 32, 64, 128):
        o, s = L.chunk_rwkv7(r, w, k, v, a, b, initial_state=h0, output_final_state=True, chunk_size=cs)
        assert rel_rms(o, o_ref) <= 1e-4 and rel_rms(s, s_ref) <= 1e-4, cs


def test_chunk_packed_sequences_4097_and_state_aliasing():
    lens = [1, 64, 4032]
    r, w, k, v, a, b, _ = make(B=1, T=sum(lens), H=1, K=16, V=16)
    h0 = torch.randn(3, 1, 16, 16, generator=torch.Generator().manual_seed(3))
    cu = torch.tensor(np.cumsum([0] + lens), dtype=torch.int32)
    o, s = L.chunk_rwkv7(r, w, k, v, a, b, initial_state=h0, output_final_state=True, cu_seqlens=cu)
    for i, (lo, hi) in enumerate(zip(cu[:-1].tolist(), cu[1:].tolist())):
        sl = slice(lo, hi)
        oi, si = fla_ref(r[:, sl], w[:, sl], k[:, sl], v[:, sl], a[:, sl], b[:, sl], 1.0, h0[i:i + 1])
        assert rel_rms(o[:, sl], oi) <= 1e-4 and rel_rms(s[i:i + 1], si) <= 1e-4


def test_chunk_head_dim_256_numpy_and_default_scale():
    r, w, k, v, a, b, h0 = make(B=1, T=40, H=1, K=256, V=64)
    o_ref, s_ref = fla_ref(r, w, k, v, a, b, 1.0, h0)  # chunk_rwkv7's default scale is 1.0, as in fla
    o, s = L.chunk_rwkv7(*(x.numpy() for x in (r, w, k, v, a, b)), initial_state=h0.numpy(), output_final_state=True)
    assert isinstance(o, np.ndarray)
    assert rel_rms(o, o_ref) <= 1e-4 and rel_rms(s, s_ref) <= 1e-4


def test_chunk_defaults_and_dplr_alias():
    r, w, k, v, a, b, h0 = make(T=50)
    o, s = L.chunk_rwkv7(r, w, k, v, a, b)
    assert s is None  # fla's chunk_rwkv7: output_final_state=False
    o_ref, _ = fla_ref(r, w, k, v, a, b, 1.0, None)
    assert rel_rms(o, o_ref) <= 1e-4
    # chunk_dplr_delta_rule(q, k, v, a, b, gk): fla's order, default scale K ** -0.5.
    o2, s2 = L.chunk_dplr_delta_rule(r, k, v, a, b, w, initial_state=h0, output_final_state=True)
    o2_ref, s2_ref = fla_ref(r, w, k, v, a, b, 32 ** -0.5, h0)
    assert rel_rms(o2, o2_ref) <= 1e-4 and rel_rms(s2, s2_ref) <= 1e-4


def test_chunk_bf16_inputs():
    r, w, k, v, a, b, h0 = make(T=100, dtype=torch.bfloat16)
    o_ref, s_ref = fla_ref(r, w, k, v, a, b, 1.0, h0)
    o, s = L.chunk_rwkv7(r, w, k, v, a, b, initial_state=h0, output_final_state=True)
    assert o.dtype == torch.bfloat16
    assert rel_rms(o.float(), o_ref) <= 1e-2 and rel_rms(s, s_ref) <= 1e-2


@pytest.mark.parametrize("wv", [-8.0, 0.0])
def test_chunk_long_sequence_65536_matches_recurrent(wv):
    r, w, k, v, a, b, _ = make(B=1, T=65536, H=1, K=16, V=16, w_value=wv)
    o, s = L.chunk_rwkv7(r, w, k, v, a, b, output_final_state=True)
    assert torch.isfinite(o).all() and torch.isfinite(s).all()
    o_rec, s_rec = L.recurrent_rwkv7(r, w, k, v, a, b, scale=1.0)
    assert rel_rms(o, o_rec) <= 1e-4 and rel_rms(s, s_rec) <= 1e-4


def test_chunk_errors_name_the_argument():
    r, w, k, v, a, b, h0 = make(T=10)
    for bad_size in (0, 8, 48, 256, 64.0, "64"):
        with pytest.raises(ValueError, match="chunk_size"):
            L.chunk_rwkv7(r, w, k, v, a, b, chunk_size=bad_size)
    bad = w.clone()
    bad[0, 3, 1, 2] = float("nan")
    with pytest.raises(ValueError, match="w:"):
        L.chunk_rwkv7(r, bad, k, v, a, b)
    with pytest.raises(ValueError, match="a:"):
        L.chunk_rwkv7(r, w, k, v, a[..., :5], b)
    with pytest.raises(ValueError, match="initial_state"):
        L.chunk_rwkv7(r, w, k, v, a, b, initial_state=h0[:, :1])
    with pytest.raises(TypeError, match="v:"):
        L.chunk_rwkv7(r, w, k, v.to(torch.int32), a, b, check_inputs=False)
