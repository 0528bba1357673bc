"""Mamba selective scan against transformers' pure-torch mamba_selective_scan / mamba_selective_state_update
(modeling_mamba.py), plus packed sequences, initial states, bf16 and error handling."""
import numpy as np
import pytest
import torch

import attnzoo.linear as L
from conftest import rel_rms

mm = pytest.importorskip("transformers.models.mamba.modeling_mamba")


def make(B=2, D=24, Lt=70, N=16, G=None, dtype=torch.float32, seed=0, a_scale=1.0):
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(B, D, Lt, generator=g).to(dtype)
    delta = (torch.randn(B, D, Lt, generator=g) * 0.5).to(dtype)
    A = -torch.rand(D, N, generator=g) * a_scale
    shape = (B, N, Lt) if G is None else (B, G, N, Lt)
    Bm = (torch.randn(*shape, generator=g) * 0.5).to(dtype)
    Cm = (torch.randn(*shape, generator=g) * 0.5).to(dtype)
    Dv = torch.randn(D, generator=g)
    z = torch.randn(B, D, Lt, generator=g).to(dtype)
    bias = torch.randn(D, generator=g) * 0.3
    return u, delta, A, Bm, Cm, Dv, z, bias


def torch_ref(u, delta, A, Bm, Cm, Dv, z, bias):
    """transformers' scan, with groups expanded per channel (it supports only B, C of [B, N, L])."""
    if Bm.dim() == 4:  # [B, G, N, L]: run each group's channels separately
        G = Bm.shape[1]
        per = u.shape[1] // G
        outs, states = [], []
        for gi in range(G):
            ch = slice(gi * per, (gi + 1) * per)
            o, s = torch_ref(u[:, ch], delta[:, ch], A[ch], Bm[:, gi], Cm[:, gi], Dv[ch], z[:, ch], bias[ch])
            outs.append(o)
            states.append(s)
        return torch.cat(outs, 1), torch.cat(states, 1)
    return mm.mamba_selective_scan(u.float(), delta.float(), A, Bm.float(), Cm.float(), D=Dv, z=z.float(),
                                   delta_bias=bias, delta_softplus=True, return_last_state=True)


@pytest.mark.parametrize("D,Lt,N,G", [(24, 1, 16, None), (20, 63, 16, None), (48, 65, 8, 3), (100, 200, 16, None),
                                      (16, 130, 60, 2)])
def test_scan_matches_transformers(D, Lt, N, G):
    u, delta, A, Bm, Cm, Dv, z, bias = make(D=D, Lt=Lt, N=N, G=G)
    o_ref, s_ref = torch_ref(u, delta, A, Bm, Cm, Dv, z, bias)
    o, s = L.selective_scan_fn(u, delta, A, Bm, Cm, D=Dv, z=z, delta_bias=bias, delta_softplus=True,
                               return_last_state=True)
    assert isinstance(o, torch.Tensor) and o.dtype == torch.float32
    assert rel_rms(o, o_ref) <= 1e-4 and rel_rms(s, s_ref) <= 1e-4
    o_only = L.selective_scan_fn(u, delta, A, Bm, Cm, D=Dv, z=z, delta_bias=bias, delta_softplus=True)
    assert rel_rms(o_only, o_ref) <= 1e-4


def test_long_sequence_4097_numpy():
    u, delta, A, Bm, Cm, Dv, z, bias = make(B=1, D=16, Lt=4097, N=8)
    o_ref, s_ref = torch_ref(u, delta, A, Bm, Cm, Dv, z, bias)
    o, s = L.selective_scan_fn(u.numpy(), delta.numpy(), A.numpy(), Bm.numpy(), Cm.numpy(), D=Dv.numpy(),
                               z=z.numpy(), delta_bias=bias.numpy(), delta_softplus=True, return_last_state=True)
    assert isinstance(o, np.ndarray)
    assert rel_rms(o, o_ref) <= 1e-4 and rel_rms(s, s_ref) <= 1e-4


def test_initial_state_continues_a_split_sequence():
    u, delta, A, Bm, Cm, Dv, z, bias = make(B=2, D=20, Lt=100, N=16)
    kw = dict(D=Dv, delta_bias=bias, delta_softplus=True, return_last_state=True)
    o_all, s_all = L.selective_scan_fn(u, delta, A, Bm, Cm, z=z, **kw)
    o1, s1 = L.selective_scan_fn(u[..., :37], delta[..., :37], A, Bm[..., :37], Cm[..., :37], z=z[..., :37], **kw)
    o2, s2 = L.selective_scan_fn(u[..., 37:], delta[..., 37:], A, Bm[..., 37:], Cm[..., 37:], z=z[..., 37:],
                                 initial_state=s1, **kw)
    assert rel_rms(torch.cat([o1, o2], -1), o_all) <= 1e-5 and rel_rms(s2, s_all) <= 1e-5


def test_packed_sequences_equal_separate_calls():
    lens = [5, 64, 1, 90]
    u, delta, A, Bm, Cm, Dv, z, bias = make(B=1, D=20, Lt=sum(lens), N=8)
    cu = np.cumsum([0] + lens).astype(np.int32)
    o, s = L.selective_scan_fn(u, delta, A, Bm, Cm, D=Dv, z=z, delta_bias=bias, delta_softplus=True,
                               return_last_state=True, cu_seqlens=cu)
    for i, (a, b) in enumerate(zip(cu[:-1], cu[1:])):
        sl = slice(int(a), int(b))
        oi, si = torch_ref(u[..., sl], delta[..., sl], A, Bm[..., sl], Cm[..., sl], Dv, z[..., sl], bias)
        assert rel_rms(o[..., sl], oi) <= 1e-4 and rel_rms(s[i:i + 1], si) <= 1e-4


def test_bf16_inputs():
    u, delta, A, Bm, Cm, Dv, z, bias = make(D=32, Lt=100, N=16, dtype=torch.bfloat16)
    o_ref, s_ref = torch_ref(u, delta, A, Bm, Cm, Dv, z, bias)
    o, s = L.selective_scan_fn(u, delta, A, Bm, Cm, D=Dv, z=z, delta_bias=bias, delta_softplus=True,
                               return_last_state=True)
    assert o.dtype == torch.bfloat16
    assert rel_rms(o.float(), o_ref) <= 1e-2 and rel_rms(s, s_ref) <= 1e-2


def test_state_update_matches_transformers():
    g = torch.Generator().manual_seed(3)
    Bn, D, N = 3, 40, 16
    state = torch.randn(Bn, D, N, generator=g)
    x, dt, z = (torch.randn(Bn, D, generator=g) for _ in range(3))
    A = -torch.rand(D, N, generator=g)
    Bm, Cm = torch.randn(Bn, N, generator=g), torch.randn(Bn, N, generator=g)
    Dv, bias = torch.randn(D, generator=g), torch.randn(D, generator=g)
    ref_state = state.clone()
    y_ref = mm.mamba_selective_state_update(ref_state, x, dt, A, Bm, Cm, D=Dv, dt_bias=bias, dt_softplus=True, z=z)
    y = L.selective_state_update(state, x, dt, A, Bm, Cm, D=Dv, z=z, dt_bias=bias, dt_softplus=True)
    assert rel_rms(y, y_ref) <= 1e-5 and rel_rms(state, ref_state) <= 1e-5


@pytest.mark.parametrize("a_scale", [8.0, 0.0])
def test_long_sequence_65536_stays_finite(a_scale):
    u, delta, A, Bm, Cm, Dv, z, bias = make(B=1, D=16, Lt=65536, N=4, a_scale=a_scale)
    o = L.selective_scan_fn(u, delta, A, Bm, Cm, delta_bias=bias, delta_softplus=True)
    assert torch.isfinite(o).all()


def test_errors_name_the_argument():
    u, delta, A, Bm, Cm, Dv, z, bias = make(D=20, Lt=10, N=8)
    with pytest.raises(ValueError, match="delta:"):
        L.selective_scan_fn(u, delta[..., :5], A, Bm, Cm)
    with pytest.raises(ValueError, match="B:"):
        L.selective_scan_fn(u, delta, A, torch.randn(2, 3, 8, 10), torch.randn(2, 3, 8, 10))
    with pytest.raises(ValueError, match="A:"):
        L.selective_scan_fn(u, delta, A[:5], Bm, Cm)
    bad = delta.clone()
    bad[0, 1, 2] = float("inf")
    with pytest.raises(ValueError, match="delta:"):
        L.selective_scan_fn(u, bad, A, Bm, Cm)
    with pytest.raises(TypeError, match="u:"):
        L.selective_scan_fn(u.to(torch.int32), delta, A, Bm, Cm, check_inputs=False)
    with pytest.raises(TypeError, match="state"):
        L.selective_state_update(torch.zeros(2, 20, 8, dtype=torch.float64), u[:, :, 0], delta[:, :, 0], A,
                                 Bm[..., 0], Cm[..., 0])
