"""Linear attention, retention, simple GLA and GLA against flash-linear-attention's naive PyTorch references
(fla.ops.<family>.naive), every SIMD target for the fast paths."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attnzoo
from attnzoo import linear
from conftest import rel_rms
import fla_naive


naive_recurrent_gla = fla_naive.load("gla").naive_recurrent_gla
naive_recurrent_linear_attn = fla_naive.load("linear_attn").naive_recurrent_linear_attn
naive_retention = fla_naive.load("retention").naive_retention
naive_recurrent_simple_gla = fla_naive.load("simple_gla").naive_recurrent_simple_gla

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def rnd(*shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


def qkv(B, T, H, K, V, HV=None, seed=0, dtype=torch.float32):
    HV = HV or H
    return rnd(B, T, H, K, seed=seed, dtype=dtype), rnd(B, T, H, K, seed=seed + 1, dtype=dtype), \
        rnd(B, T, HV, V, seed=seed + 2, dtype=dtype)


def expand_heads(x, HV):
    """GVA for references without it: key head h serves value heads h * G ... h * G + G - 1."""
    return x.repeat_interleave(HV // x.shape[2], dim=2)


def check(got, want, tol=1e-4):
    assert rel_rms(got.float(), want.float()) <= tol


# --- simple GLA ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("T,K,V,HV", [(1, 64, 64, 2), (63, 60, 100, 2), (200, 64, 32, 4)])
def test_simple_gla_matches_fla_naive(simd_target, T, K, V, HV):
    q, k, v = qkv(2, T, 2, K, V, HV)
    g = F.logsigmoid(rnd(2, T, HV, seed=5)) / 4
    h0 = rnd(2, HV, K, V, seed=6)
    want, want_h = naive_recurrent_simple_gla(expand_heads(q, HV), expand_heads(k, HV), v, g, initial_state=h0,
                                              output_final_state=True)
    for fn in (linear.chunk_simple_gla, linear.recurrent_simple_gla):
        o, ht = fn(q, k, v, g, initial_state=h0, output_final_state=True)
        assert o.dtype == torch.float32 and o.shape == (2, T, HV, V)
        check(o, want)
        check(ht, want_h)


def test_simple_gla_g_gamma_strong_decay_and_bf16():
    q, k, v = qkv(1, 130, 2, 64, 64)
    gamma = torch.tensor([-0.05, -8.0])
    g = gamma.expand(1, 130, 2).contiguous()
    want, want_h = naive_recurrent_simple_gla(q, k, v, g, output_final_state=True)
    o, ht = linear.chunk_simple_gla(q, k, v, g_gamma=gamma, output_final_state=True)
    check(o, want)
    check(ht, want_h)
    qb, kb, vb = (x.to(torch.bfloat16) for x in (q, k, v))
    want_b, _ = naive_recurrent_simple_gla(qb.float(), kb.float(), vb.float(), g)
    o_b, _ = linear.chunk_simple_gla(qb, kb, vb, g.to(torch.bfloat16).float())
    assert o_b.dtype == torch.bfloat16
    check(o_b, want_b, 1e-2)


def test_simple_gla_varlen_and_state_v_first():
    cu = torch.tensor([0, 17, 17, 100, 164], dtype=torch.int32)
    q, k, v = qkv(1, 164, 2, 32, 32)
    g = F.logsigmoid(rnd(1, 164, 2, seed=3))
    h0 = rnd(4, 2, 32, 32, seed=4)
    o, ht = linear.chunk_simple_gla(q, k, v, g, initial_state=h0.transpose(-1, -2), output_final_state=True,
                                    state_v_first=True, cu_seqlens=cu)
    for n in range(4):
        s, e = int(cu[n]), int(cu[n + 1])
        want, want_h = naive_recurrent_simple_gla(q[:, s:e], k[:, s:e], v[:, s:e], g[:, s:e],
                                                  initial_state=h0[n:n + 1], output_final_state=True)
        if e > s:
            check(o[:, s:e], want)
        check(ht[n:n + 1].transpose(-1, -2), want_h)


def test_simple_gla_reverse_numpy():
    q, k, v = (x.numpy() for x in qkv(2, 50, 1, 16, 16))
    g = F.logsigmoid(rnd(2, 50, 1, seed=7)).numpy()
    o, ht = linear.recurrent_simple_gla(q, k, v, g, reverse=True, output_final_state=True)
    assert isinstance(o, np.ndarray) and isinstance(ht, np.ndarray)
    flip = lambda x: torch.from_numpy(np.ascontiguousarray(x[:, ::-1]))
    want, want_h = naive_recurrent_simple_gla(flip(q), flip(k), flip(v), flip(g), output_final_state=True)
    check(torch.from_numpy(np.ascontiguousarray(o[:, ::-1])), want)
    check(torch.from_numpy(ht), want_h)


# --- GLA -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("T,K,V,g_scale", [(65, 64, 64, 1.0), (200, 100, 60, 8.0), (64, 16, 16, 0.0)])
def test_gla_matches_fla_naive(simd_target, T, K, V, g_scale):
    q, k, v = qkv(1, T, 2, K, V)
    g = -g_scale * torch.rand(1, T, 2, K, generator=torch.Generator().manual_seed(9))  # down to -8 per step
    h0 = rnd(1, 2, K, V, seed=6)
    want, want_h = naive_recurrent_gla(q, k, v, g, initial_state=h0, output_final_state=True)
    o, ht = linear.chunk_gla(q, k, v, g, initial_state=h0, output_final_state=True)
    check(o, want)
    check(ht, want_h)
    o, ht = linear.fused_recurrent_gla(q, k, v, gk=g, initial_state=h0, output_final_state=True)
    check(o, want)
    check(ht, want_h)


def test_gla_head_dim_256_bf16_and_gva():
    q, k, v = qkv(1, 70, 1, 256, 256)
    g = F.logsigmoid(rnd(1, 70, 1, 256, seed=2))
    want, _ = naive_recurrent_gla(q, k, v, g)
    check(linear.chunk_gla(q, k, v, g)[0], want)
    qb, kb, vb, gb = (x.to(torch.bfloat16) for x in (q, k, v, g))
    want_b, _ = naive_recurrent_gla(qb.float(), kb.float(), vb.float(), gb.float())
    check(linear.chunk_gla(qb, kb, vb, gb)[0], want_b, 1e-2)
    q, k, v = qkv(1, 90, 2, 32, 16, HV=4)
    g = F.logsigmoid(rnd(1, 90, 4, 32, seed=3))
    want, _ = naive_recurrent_gla(expand_heads(q, 4), expand_heads(k, 4), v, g)
    check(linear.chunk_gla(q, k, v, g)[0], want)


def test_gla_long_t4097():
    q, k, v = qkv(1, 4097, 1, 32, 32)
    g = F.logsigmoid(rnd(1, 4097, 1, 32, seed=2) + 3)
    want, want_h = naive_recurrent_gla(q, k, v, g, output_final_state=True)
    o, ht = linear.chunk_gla(q, k, v, g, output_final_state=True)
    check(o, want)
    check(ht, want_h)


# --- retention -------------------------------------------------------------------------------------------

def test_retention_three_forms_match_fla_naive(simd_target):
    q, k, v = qkv(2, 150, 4, 32, 48)
    want = naive_retention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)
    check(linear.chunk_retention(q, k, v)[0], want)
    check(linear.fused_recurrent_retention(q, k, v)[0], want)
    o, attn = linear.parallel_retention(q, k, v)
    assert attn is None
    check(o, want)


def test_retention_state_carries_across_calls():
    q, k, v = qkv(1, 200, 2, 32, 32)
    full, h_full = linear.chunk_retention(q, k, v, output_final_state=True)
    first, h1 = linear.chunk_retention(q[:, :120], k[:, :120], v[:, :120], output_final_state=True)
    second, h2 = linear.recurrent_retention(q[:, 120:], k[:, 120:], v[:, 120:], initial_state=h1,
                                            output_final_state=True)
    check(torch.cat([first, second], 1), full, 1e-5)
    check(h2, h_full, 1e-5)


# --- linear attention ------------------------------------------------------------------------------------

PHI = {None: lambda x: x, "identity": lambda x: x, "relu": F.relu, "elu": lambda x: F.elu(x) + 1}


@pytest.mark.parametrize("feature_map", [None, "relu", "elu"])
def test_linear_attn_unnormalised(simd_target, feature_map):
    q, k, v = qkv(2, 100, 2, 32, 32)
    h0 = rnd(2, 2, 32, 32, seed=4)
    phi = PHI[feature_map]
    want, want_h = naive_recurrent_linear_attn(phi(q), phi(k), v, initial_state=h0, output_final_state=True)
    for fn in (linear.chunk_linear_attn, linear.fused_recurrent_linear_attn):
        o, ht = fn(q, k, v, initial_state=h0, output_final_state=True, normalize=False, feature_map=feature_map)
        check(o, want)
        check(ht, want_h)


def test_linear_attn_normalised_with_z_state(simd_target):
    q, k, v = qkv(1, 130, 2, 64, 64)
    phi = PHI["elu"]
    S0 = rnd(1, 2, 64, 64, seed=4)
    z0 = torch.rand(1, 1, 2, 64, generator=torch.Generator().manual_seed(5)) + 0.5
    want, (want_S, want_z) = naive_recurrent_linear_attn(phi(q), phi(k), v, initial_state=(S0, z0),
                                                         output_final_state=True, normalize=True)
    for fn in (linear.chunk_linear_attn, linear.recurrent_linear_attn):
        o, (S, z) = fn(q, k, v, initial_state=(S0, z0), output_final_state=True, normalize=True, feature_map="elu")
        check(o, want)
        check(S, want_S)
        check(z, want_z, 1e-5)


def test_linear_attn_defaults_mirror_fla():
    import inspect
    assert inspect.signature(linear.chunk_linear_attn).parameters["normalize"].default is True
    assert inspect.signature(linear.fused_recurrent_linear_attn).parameters["normalize"].default is False
    q, k, v = qkv(1, 40, 1, 16, 16)
    o, state = linear.chunk_linear_attn(q, k, v, feature_map="elu")  # normalized by default
    want, _ = naive_recurrent_linear_attn(PHI["elu"](q), PHI["elu"](k), v, normalize=True)
    check(o, want)
    assert state is None


# --- errors ----------------------------------------------------------------------------------------------

def test_bad_arguments():
    q, k, v = qkv(1, 8, 2, 16, 16, HV=3)
    g = torch.zeros(1, 8, 3)
    with pytest.raises(ValueError, match="^v"):
        linear.chunk_simple_gla(q, k, v, g)  # 3 value heads over 2 key heads
    q, k, v = qkv(1, 8, 2, 16, 16)
    with pytest.raises(ValueError, match="chunk_size"):
        linear.chunk_simple_gla(q, k, v, torch.zeros(1, 8, 2), chunk_size=48)
    with pytest.raises(ValueError, match="^g"):
        linear.chunk_simple_gla(q, k, v, torch.full((1, 8, 2), float("nan")))
    with pytest.raises(ValueError, match="^g"):
        linear.chunk_gla(q, k, v, torch.zeros(1, 8, 2))
    with pytest.raises(ValueError, match="^k"):
        linear.chunk_gla(q, k[..., :8], v, torch.zeros(1, 8, 2, 16))
    with pytest.raises(ValueError, match="^initial_state"):
        linear.chunk_retention(q, k, v, initial_state=torch.zeros(2, 2, 16, 16))
    with pytest.raises(ValueError, match="^q"):
        linear.chunk_retention(q.clone().fill_(float("inf")), k, v)
    with pytest.raises(ValueError, match="feature_map"):
        linear.chunk_linear_attn(q, k, v, feature_map="softmax")
    with pytest.raises(ValueError, match="cu_seqlens"):
        linear.chunk_retention(q, k, v, cu_seqlens=torch.tensor([0, 3, 9], dtype=torch.int32))
    with pytest.raises(TypeError, match="^q"):
        linear.chunk_retention(q.to(torch.int32), k, v)
    with pytest.raises(ValueError, match="gv"):
        linear.fused_recurrent_gla(q, k, v, gv=torch.zeros(1, 8, 2, 16))


# --- the decode path: in place, without the value scans --------------------------------------------------------

@pytest.mark.parametrize("family", ["simple_gla", "simple_gla_gamma", "gla"])
@pytest.mark.parametrize("T", [1, 3])
def test_inplace_final_state_equals_out_of_place(family, T):
    B, H, HV, K, V = 2, 1, 2, 32, 48
    q, k, v = qkv(B, T, H, K, V, HV=HV, seed=21)
    h0 = rnd(B, HV, K, V, seed=4) * 0.3
    g = -torch.rand(B, T, HV, generator=torch.Generator().manual_seed(1))
    gk = -torch.rand(B, T, HV, K, generator=torch.Generator().manual_seed(2))
    call = {"simple_gla": lambda **kw: linear.recurrent_simple_gla(q, k, v, g=g, **kw),
            "simple_gla_gamma": lambda **kw: linear.recurrent_simple_gla(q, k, v, g_gamma=torch.tensor([-0.1, -1.0]),
                                                                         **kw),
            "gla": lambda **kw: linear.recurrent_gla(q, k, v, gk=gk, **kw)}[family]
    o_ref, s_ref = call(initial_state=h0.clone(), output_final_state=True)
    for check_inputs in (True, False):
        buf = h0.clone()
        o, s = call(initial_state=buf, inplace_final_state=True, check_inputs=check_inputs)
        assert s is buf
        assert torch.equal(o, o_ref) and torch.equal(buf, s_ref)
    if family == "gla":  # and the independent reference
        o_n, s_n = naive_recurrent_gla(expand_heads(q, HV), expand_heads(k, HV), v, gk, initial_state=h0,
                                       output_final_state=True)
        check(o_ref, o_n)
        check(s_ref, s_n)


def test_inplace_numpy_and_errors():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 1, 2, 16), dtype=np.float32) for _ in range(3))
    state = rng.standard_normal((1, 2, 16, 16), dtype=np.float32)
    o_ref, s_ref = linear.recurrent_simple_gla(q, k, v, initial_state=state, output_final_state=True)
    o, s = linear.recurrent_simple_gla(q, k, v, initial_state=state, inplace_final_state=True)
    assert s is state
    np.testing.assert_array_equal(o, o_ref)
    np.testing.assert_array_equal(state, s_ref)
    with pytest.raises(ValueError, match="initial_state"):
        linear.recurrent_gla(q, k, v, inplace_final_state=True)
    with pytest.raises(TypeError, match="initial_state"):
        linear.recurrent_gla(q, k, v, initial_state=state.astype(np.float64), inplace_final_state=True)
    with pytest.raises(ValueError, match="initial_state"):
        linear.recurrent_gla(q, k, v, initial_state=np.swapaxes(state, -1, -2), inplace_final_state=True)
    with pytest.raises(ValueError, match="state_v_first"):
        linear.recurrent_simple_gla(q, k, v, initial_state=state, inplace_final_state=True, state_v_first=True)
    bad = q.copy()
    bad[0, 0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="q"):
        linear.recurrent_simple_gla(bad, k, v, initial_state=state, inplace_final_state=True)
    o, _ = linear.recurrent_simple_gla(bad, k, v, initial_state=state, inplace_final_state=True, check_inputs=False)
    assert np.isnan(o[0, 0, 0]).all() and np.isfinite(o[0, 0, 1]).all()
