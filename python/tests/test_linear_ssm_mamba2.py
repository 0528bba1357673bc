"""Mamba-2 (SSD) against transformers' pure-torch reference (modeling_mamba2.mamba2_chunk_scan and
mamba2_selective_state_update), plus chunk == recurrent, packed sequences, bf16 and error handling."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attnzoo.linear as L
from conftest import rel_rms

m2 = pytest.importorskip("transformers.models.mamba2.modeling_mamba2")


def make(B=1, T=70, H=4, P=16, G=2, N=16, dtype=torch.float32, seed=0, a_scale=1.0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, H, P, generator=g).to(dtype)
    dt = (torch.randn(B, T, H, generator=g) * 0.5).to(dtype)
    A = -torch.rand(H, generator=g) * a_scale - 0.1
    Bm = (torch.randn(B, T, G, N, generator=g) * 0.5).to(dtype)
    Cm = (torch.randn(B, T, G, N, generator=g) * 0.5).to(dtype)
    D = torch.randn(H, generator=g)
    z = torch.randn(B, T, H, P, generator=g).to(dtype)
    dt_bias = torch.randn(H, generator=g) * 0.3
    h0 = torch.randn(B, H, P, N, generator=g)
    return x, dt, A, Bm, Cm, D, z, dt_bias, h0


def torch_ref(x, dt, A, Bm, Cm, D, z, dt_bias, h0, dt_limit=(0.0, float("inf"))):
    y, s = m2.mamba2_chunk_scan(x.float(), dt.float(), A, Bm.float(), Cm.float(), chunk_size=16, D=D,
                                dt_bias=dt_bias, initial_states=h0, dt_softplus=True, dt_limit=dt_limit,
                                return_final_states=True)
    if z is not None:
        y = y * F.silu(z.float())
    return y, s


@pytest.mark.parametrize("T,P,N,G,chunk", [(1, 16, 16, 1, 64), (63, 60, 16, 2, 64), (65, 64, 100, 1, 32),
                                           (200, 100, 128, 4, 128), (130, 16, 16, 2, 16)])
def test_chunk_and_recurrent_match_transformers(T, P, N, G, chunk):
    x, dt, A, Bm, Cm, D, z, dt_bias, h0 = make(T=T, P=P, N=N, G=G, H=4)
    y_ref, s_ref = torch_ref(x, dt, A, Bm, Cm, D, z, dt_bias, h0)
    for fn, kw in ((L.mamba2_chunk_scan, {"chunk_size": chunk}), (L.mamba2_recurrent, {})):
        y, s = fn(x, dt, A, Bm, Cm, D=D, z=z, dt_bias=dt_bias, dt_softplus=True, dt_limit=(0.0, float("inf")),
                  initial_state=h0, output_final_state=True, **kw)
        assert isinstance(y, torch.Tensor) and y.dtype == torch.float32
        assert rel_rms(y, y_ref) <= 1e-4
        assert rel_rms(s, s_ref) <= 1e-4


def test_head_dim_256_and_dt_limit_and_numpy():
    x, dt, A, Bm, Cm, D, z, dt_bias, h0 = make(T=40, H=2, P=256, G=1, N=32)
    lim = (0.05, 0.6)
    y_ref, s_ref = torch_ref(x, dt, A, Bm, Cm, D, None, dt_bias, h0, dt_limit=lim)
    y, s = L.mamba2_chunk_scan(x.numpy(), dt.numpy(), A.numpy(), Bm.numpy(), Cm.numpy(), D=D.numpy(),
                               dt_bias=dt_bias.numpy(), dt_softplus=True, dt_limit=lim, initial_state=h0.numpy(),
                               output_final_state=True)
    assert isinstance(y, np.ndarray) and isinstance(s, np.ndarray)
    assert rel_rms(y, y_ref) <= 1e-4 and rel_rms(s, s_ref) <= 1e-4


def test_long_sequence_4097_against_reference():
    x, dt, A, Bm, Cm, D, z, dt_bias, h0 = make(T=4097, H=2, P=16, G=1, N=16)
    kw = dict(D=D, z=z, dt_bias=dt_bias, dt_softplus=True, initial_state=h0, output_final_state=True)
    y_ref, s_ref = torch_ref(x, dt, A, Bm, Cm, D, z, dt_bias, h0)
    y, s = L.mamba2_chunk_scan(x, dt, A, Bm, Cm, **kw)
    assert rel_rms(y, y_ref) <= 1e-4 and rel_rms(s, s_ref) <= 1e-4


def test_packed_sequences_equal_separate_calls():
    lens = [5, 64, 1, 130]
    x, dt, A, Bm, Cm, D, z, dt_bias, _ = make(T=sum(lens), H=4, P=16, G=2, N=16)
    h0 = torch.randn(len(lens), 4, 16, 16)
    cu = torch.tensor(np.cumsum([0] + lens), dtype=torch.int32)
    kw = dict(D=D, z=z, dt_bias=dt_bias, dt_softplus=True)
    y, s = L.mamba2_chunk_scan(x, dt, A, Bm, Cm, initial_state=h0, output_final_state=True, cu_seqlens=cu, **kw)
    for i, (a, b) in enumerate(zip(cu[:-1].tolist(), cu[1:].tolist())):
        sl = slice(a, b)
        yi, si = torch_ref(x[:, sl], dt[:, sl], A, Bm[:, sl], Cm[:, sl], D, z[:, sl], dt_bias, h0[i:i + 1])
        assert rel_rms(y[:, sl], yi) <= 1e-4
        assert rel_rms(s[i:i + 1], si) <= 1e-4


def test_bf16_inputs():
    x, dt, A, Bm, Cm, D, z, dt_bias, h0 = make(B=2, T=100, H=4, P=32, G=2, N=16, dtype=torch.bfloat16)
    y_ref, s_ref = torch_ref(x, dt, A, Bm, Cm, D, z, dt_bias, h0)
    y, s = L.mamba2_chunk_scan(x, dt, A, Bm, Cm, D=D, z=z, dt_bias=dt_bias, dt_softplus=True, initial_state=h0,
                               output_final_state=True)
    assert y.dtype == torch.bfloat16
    assert rel_rms(y.float(), y_ref) <= 1e-2 and rel_rms(s, s_ref) <= 1e-2


def test_state_update_matches_transformers_and_chains_with_prefill():
    x, dt, A, Bm, Cm, D, z, dt_bias, h0 = make(B=3, T=9, H=4, P=16, G=2, N=16)
    # Prefill 8 tokens, then decode the 9th with the in-place step: equals the 9-token scan.
    y_all, s_all = L.mamba2_chunk_scan(x, dt, A, Bm, Cm, D=D, z=z, dt_bias=dt_bias, dt_softplus=True,
                                       initial_state=h0, output_final_state=True)
    _, state = L.mamba2_chunk_scan(x[:, :8], dt[:, :8], A, Bm[:, :8], Cm[:, :8], D=D, z=z[:, :8], dt_bias=dt_bias,
                                   dt_softplus=True, initial_state=h0, output_final_state=True)
    ref_state = state.clone()
    y_ref = m2.mamba2_selective_state_update(ref_state, x[:, 8], dt[:, 8, :, None].expand(3, 4, 16), A[:, None, None].expand(4, 16, 16),
                                             Bm[:, 8], Cm[:, 8], D=D[:, None].expand(4, 16),
                                             dt_bias=dt_bias[:, None].expand(4, 16), dt_softplus=True, z=z[:, 8])
    y = L.mamba2_state_update(state, x[:, 8], dt[:, 8], A, Bm[:, 8], Cm[:, 8], D=D, z=z[:, 8], dt_bias=dt_bias,
                              dt_softplus=True)
    assert rel_rms(y, y_ref) <= 1e-5 and rel_rms(state, ref_state) <= 1e-5
    assert rel_rms(y, y_all[:, 8]) <= 1e-4 and rel_rms(state, s_all) <= 1e-4


@pytest.mark.parametrize("a", [-8.0, 0.0])
def test_long_sequence_65536_stays_finite(a):
    T = 65536
    g = torch.Generator().manual_seed(1)
    x = torch.randn(1, T, 1, 16, generator=g)
    dt = torch.ones(1, T, 1)
    A = torch.tensor([a])
    Bm, Cm = torch.randn(1, T, 1, 16, generator=g) * 0.25, torch.randn(1, T, 1, 16, generator=g) * 0.25
    yc, sc = L.mamba2_chunk_scan(x, dt, A, Bm, Cm, output_final_state=True)
    yr, sr = L.mamba2_recurrent(x, dt, A, Bm, Cm, output_final_state=True)
    assert torch.isfinite(yc).all() and torch.isfinite(sc).all()
    assert rel_rms(yc, yr) <= 1e-4 and rel_rms(sc, sr) <= 1e-4


def test_errors_name_the_argument():
    x, dt, A, Bm, Cm, D, z, dt_bias, h0 = make(T=10, H=4, G=2)
    with pytest.raises(ValueError, match="chunk_size"):
        L.mamba2_chunk_scan(x, dt, A, Bm, Cm, chunk_size=48)
    with pytest.raises(ValueError, match="B:"):
        L.mamba2_chunk_scan(x, dt, A, torch.randn(1, 10, 3, 16), torch.randn(1, 10, 3, 16))
    with pytest.raises(ValueError, match="dt:"):
        L.mamba2_chunk_scan(x, dt[:, :5], A, Bm, Cm)
    with pytest.raises(ValueError, match="D:"):
        L.mamba2_recurrent(x, dt, A, Bm, Cm, D=torch.randn(3))
    bad = x.clone()
    bad[0, 3, 1, 2] = float("nan")
    with pytest.raises(ValueError, match="x:"):
        L.mamba2_chunk_scan(bad, dt, A, Bm, Cm)
    with pytest.raises(ValueError, match="cu_seqlens"):
        L.mamba2_chunk_scan(x, dt, A, Bm, Cm, cu_seqlens=torch.tensor([0, 4, 9], dtype=torch.int32))
    with pytest.raises(TypeError, match="x:"):
        L.mamba2_chunk_scan(x.to(torch.int32), dt, A, Bm, Cm, check_inputs=False)
    with pytest.raises(TypeError, match="state"):
        L.mamba2_state_update(h0.double(), x[:, 0], dt[:, 0], A, Bm[:, 0], Cm[:, 0])
