"""RWKV-4 WKV against transformers' pure-torch rwkv_linear_attention_cpu (modeling_rwkv.py)."""
import numpy as np
import pytest
import torch

import attnzoo.linear as L
from conftest import rel_rms

rw = pytest.importorskip("transformers.models.rwkv.modeling_rwkv")


def make(B=2, T=70, C=48, dtype=torch.float32, seed=0, k_scale=1.0):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(C, generator=g)
    u = torch.randn(C, generator=g)
    k = (torch.randn(B, T, C, generator=g) * k_scale).to(dtype)
    v = torch.randn(B, T, C, generator=g).to(dtype)
    return w, u, k, v


def torch_ref(w, u, k, v, state=None):
    out, st = rw.rwkv_linear_attention_cpu(w, u, k.float(), v.float(), state=state, return_state=True)
    return out, torch.stack(st, 1)


@pytest.mark.parametrize("T,C", [(1, 16), (63, 60), (65, 100), (500, 64)])
def test_matches_transformers(T, C):
    w, u, k, v = make(T=T, C=C)
    o_ref, s_ref = torch_ref(w, u, k, v)
    o, s = L.rwkv4_wkv(w, u, k, v, output_final_state=True)
    assert rel_rms(o, o_ref) <= 1e-4 and rel_rms(s, s_ref) <= 1e-4


def test_initial_state_tuple_and_fla_signature():
    w, u, k, v = make(T=50)
    _, s0 = torch_ref(w, u, k[:, :10], v[:, :10])
    state_tuple = tuple(s0[:, i].clone() for i in range(3))
    o_ref, s_ref = torch_ref(w, u, k[:, 10:], v[:, 10:], state=[x.clone() for x in state_tuple])
    o, s = L.rwkv4_wkv(w, u, k[:, 10:], v[:, 10:], state=state_tuple, output_final_state=True)
    assert rel_rms(o, o_ref) <= 1e-4 and rel_rms(s, s_ref) <= 1e-4
    o2, s2 = L.fused_recurrent_rwkv4(w, u, k[:, 10:], v[:, 10:], s0[:, :, None])
    assert s2.shape == (2, 3, 1, 48)
    assert rel_rms(o2, o_ref) <= 1e-4 and rel_rms(s2[:, :, 0], s_ref) <= 1e-4


def test_packed_numpy_large_keys_and_4097():
    lens = [1, 64, 4032]
    w, u, k, v = make(B=1, T=sum(lens), C=32, k_scale=20.0)
    cu = np.cumsum([0] + lens).astype(np.int32)
    o, s = L.rwkv4_wkv(w.numpy(), u.numpy(), k.numpy(), v.numpy(), output_final_state=True, cu_seqlens=cu)
    assert isinstance(o, np.ndarray) and np.isfinite(o).all()
    for i, (a, b) in enumerate(zip(cu[:-1], cu[1:])):
        oi, si = torch_ref(w, u, k[:, a:b], v[:, a:b])
        assert rel_rms(o[:, a:b], oi) <= 1e-4 and rel_rms(s[i:i + 1], si) <= 1e-4


def test_bf16_inputs():
    w, u, k, v = make(T=100, dtype=torch.bfloat16)
    o_ref, _ = torch_ref(w, u, k, v)
    o, _ = L.rwkv4_wkv(w, u, k, v)
    assert o.dtype == torch.bfloat16 and rel_rms(o.float(), o_ref) <= 1e-2


@pytest.mark.parametrize("wv", [-8.0, 2.0])
def test_long_sequence_65536_stays_finite(wv):
    w, u, k, v = make(B=1, T=65536, C=16, k_scale=5.0)
    o, s = L.rwkv4_wkv(torch.full((16,), wv), u, k, v, output_final_state=True)
    assert torch.isfinite(o).all() and torch.isfinite(s).all()


def test_errors_name_the_argument():
    w, u, k, v = make(T=10)
    with pytest.raises(ValueError, match="u:"):
        L.rwkv4_wkv(w, u[:5], k, v)
    with pytest.raises(ValueError, match="v:"):
        L.rwkv4_wkv(w, u, k, v[:, :5])
    bad = k.clone()
    bad[0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="k:"):
        L.rwkv4_wkv(w, u, bad, v)
    with pytest.raises(ValueError, match="state"):
        L.rwkv4_wkv(w, u, k, v, state=(k[:, 0], k[:, 0]))
    with pytest.raises(TypeError, match="k:"):
        L.rwkv4_wkv(w, u, k.to(torch.int32), v, check_inputs=False)
