"""The delta-rule family (DeltaNet, Gated DeltaNet, KDA) against independent references: fla's naive PyTorch
code (fla.ops.*.naive) and transformers' Qwen3-Next pure-torch gated delta rule."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attnzoo
import attnzoo.linear as L
from conftest import rel_rms
import fla_naive


delta_rule_recurrence = fla_naive.load("delta_rule").delta_rule_recurrence
naive_chunk_gated_delta_rule = fla_naive.load("gated_delta_rule").naive_chunk_gated_delta_rule
naive_recurrent_gated_delta_rule = fla_naive.load("gated_delta_rule").naive_recurrent_gated_delta_rule
naive_chunk_kda = fla_naive.load("kda").naive_chunk_kda
naive_recurrent_kda = fla_naive.load("kda").naive_recurrent_kda
from transformers.models.qwen3_next.modeling_qwen3_next import (torch_chunk_gated_delta_rule,
                                                                  torch_recurrent_gated_delta_rule)

F32_TOL, BF16_TOL = 1e-4, 1e-2


def make(B=1, T=100, H=2, HV=2, K=32, V=32, gate="head", g_low=-1.0, beta_max=1.0, unit_keys=True, seed=0,
         dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, T, H, K, generator=gen)
    k = torch.randn(B, T, H, K, generator=gen)
    if unit_keys:
        k = F.normalize(k, dim=-1)
    v = torch.randn(B, T, HV, V, generator=gen)
    beta = torch.rand(B, T, HV, generator=gen) * beta_max
    g = None
    if gate == "head":
        g = torch.rand(B, T, HV, generator=gen) * g_low
    elif gate == "channel":
        g = torch.rand(B, T, HV, K, generator=gen) * g_low
    cast = lambda x: None if x is None else x.to(dtype)
    return cast(q), cast(k), cast(v), cast(g), cast(beta)


def l2norm(x):
    """fla's l2norm: x / sqrt(|x|^2 + 1e-6)."""
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6)


def check(got, want, tol):
    assert rel_rms(got.float(), want.float()) <= tol, rel_rms(got.float(), want.float())


# --- DeltaNet ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("T", [1, 63, 65, 200])
def test_delta_rule_matches_fla_naive(T):
    q, k, v, _, beta = make(T=T, gate=None)
    s0 = torch.randn(1, 2, 32, 32)
    t = lambda x: x.transpose(1, 2).contiguous()  # fla's delta_rule naive wants [B, H, T, K]
    want_o, want_s = delta_rule_recurrence(t(q), t(k), t(v), t(beta), initial_state=s0.clone(),
                                           output_final_state=True)
    for fn in (L.chunk_delta_rule, L.recurrent_delta_rule, L.fused_recurrent_delta_rule):
        o, s = fn(q, k, v, beta, initial_state=s0, output_final_state=True)
        check(o, t(want_o), F32_TOL)
        check(s, want_s, F32_TOL)


def test_delta_rule_negative_eigenvalues_and_l2norm():
    q, k, v, _, beta = make(T=150, gate=None, beta_max=2.0, unit_keys=False)
    t = lambda x: x.transpose(1, 2).contiguous()
    want_o, want_s = delta_rule_recurrence(t(l2norm(q)), t(l2norm(k)), t(v),
                                           t(beta), output_final_state=True)
    o, s = L.chunk_delta_rule(q, k, v, beta, use_qk_l2norm_in_kernel=True, output_final_state=True, chunk_size=32)
    check(o, t(want_o), F32_TOL)
    check(s, want_s, F32_TOL)


# --- Gated DeltaNet ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("T,K,V,g_low", [(1, 32, 32, -1.0), (65, 60, 100, -1.0), (300, 64, 64, -8.0),
                                         (200, 128, 128, -0.1)])
def test_gated_delta_rule_matches_fla_naive(T, K, V, g_low):
    q, k, v, g, beta = make(T=T, K=K, V=V, g_low=g_low)
    s0 = torch.randn(1, 2, K, V) * 0.5
    want_o, want_s = naive_recurrent_gated_delta_rule(q, k, v, beta, g, scale=0.3, initial_state=s0.clone(),
                                                      output_final_state=True)
    for fn in (L.chunk_gated_delta_rule, L.recurrent_gated_delta_rule):
        o, s = fn(q, k, v, g, beta, scale=0.3, initial_state=s0, output_final_state=True)
        check(o, want_o, F32_TOL)
        check(s, want_s, F32_TOL)
    o, s = L.fused_recurrent_gated_delta_rule(q, k, v, g=g, beta=beta, scale=0.3, initial_state=s0,
                                              output_final_state=True)
    check(o, want_o, F32_TOL)


def test_gated_delta_rule_matches_fla_naive_chunk():
    q, k, v, g, beta = make(T=256, K=64, V=64)
    want_o, want_s = naive_chunk_gated_delta_rule(q, k, v, g, beta, chunk_size=64, output_final_state=True)
    o, s = L.chunk_gated_delta_rule(q, k, v, g, beta, output_final_state=True)
    check(o, want_o, F32_TOL)
    check(s, want_s, F32_TOL)


@pytest.mark.parametrize("chunk_size", [16, 64, 128])
def test_gated_delta_rule_matches_transformers_gva_l2norm(chunk_size):
    # Qwen3-Next layout: more value heads than key heads, q/k L2-normalised in the kernel, scale K^-0.5.
    q, k, v, g, beta = make(B=2, T=130, H=2, HV=4, K=64, V=48, unit_keys=False, seed=3)
    s0 = torch.randn(2, 4, 64, 48) * 0.5
    want_o, want_s = torch_recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=s0, output_final_state=True,
                                                      use_qk_l2norm_in_kernel=True)
    want_c, _ = torch_chunk_gated_delta_rule(q, k, v, g, beta, chunk_size=64, initial_state=s0,
                                             output_final_state=True, use_qk_l2norm_in_kernel=True)
    check(want_c, want_o, F32_TOL)  # the two references agree
    for fn, kw in ((L.chunk_gated_delta_rule, {"chunk_size": chunk_size}), (L.recurrent_gated_delta_rule, {})):
        o, s = fn(q, k, v, g, beta, initial_state=s0, output_final_state=True, use_qk_l2norm_in_kernel=True, **kw)
        check(o, want_o, F32_TOL)
        check(s, want_s, F32_TOL)


def test_gated_delta_rule_varlen_equals_separate_sequences():
    lengths = [1, 64, 0, 135, 40]
    cu = np.cumsum([0] + lengths).astype(np.int32)
    q, k, v, g, beta = make(T=int(cu[-1]), H=1, HV=2, K=32, V=40, seed=5)
    s0 = torch.randn(len(lengths), 2, 32, 40) * 0.5
    o, s = L.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=s0, output_final_state=True,
                                    cu_seqlens=torch.from_numpy(cu))
    o_r, s_r = L.recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=s0, output_final_state=True,
                                            cu_seqlens=cu)
    for n in range(len(lengths)):
        a, b = int(cu[n]), int(cu[n + 1])
        sl = lambda x: x[:, a:b]
        want_o, want_s = torch_recurrent_gated_delta_rule(sl(q), sl(k), sl(v), sl(g), sl(beta),
                                                          initial_state=s0[n:n + 1], output_final_state=True)
        if b > a:
            check(o[:, a:b], want_o, F32_TOL)
            check(o_r[:, a:b], want_o, F32_TOL)
        check(s[n], want_s[0], F32_TOL)
        check(s_r[n], want_s[0], F32_TOL)


def test_gated_delta_rule_bf16_inputs():
    q, k, v, g, beta = make(T=200, K=64, V=64, dtype=torch.bfloat16)
    want_o, want_s = naive_recurrent_gated_delta_rule(q.float(), k.float(), v.float(), beta.float(), g.float(),
                                                      output_final_state=True)
    for fn in (L.chunk_gated_delta_rule, L.recurrent_gated_delta_rule):
        o, s = fn(q, k, v, g, beta, output_final_state=True)
        assert o.dtype == torch.bfloat16 and s.dtype == torch.float32
        check(o, want_o, BF16_TOL)
        check(s, want_s, BF16_TOL)


def test_gated_delta_rule_head_dim_256_and_odd_length():
    q, k, v, g, beta = make(T=4097, H=1, HV=1, K=256, V=256, seed=7)
    o, s = L.chunk_gated_delta_rule(q, k, v, g, beta, output_final_state=True)
    o_r, s_r = L.recurrent_gated_delta_rule(q, k, v, g, beta, output_final_state=True)
    check(o, o_r, F32_TOL)
    check(s, s_r, F32_TOL)
    want_o, want_s = naive_recurrent_gated_delta_rule(q[:, :300], k[:, :300], v[:, :300], beta[:, :300],
                                                      g[:, :300], output_final_state=True)
    check(o[:, :300], want_o, F32_TOL)


@pytest.mark.parametrize("g_value", [0.0, -8.0])
def test_long_sequence_stable(g_value):
    T = 65536
    q, k, v, g, beta = make(T=T, H=1, HV=1, K=16, V=16, seed=11)
    g = torch.full_like(g, g_value)
    o, s = L.chunk_gated_delta_rule(q, k, v, g, beta, output_final_state=True)
    o_r, s_r = L.recurrent_gated_delta_rule(q, k, v, g, beta, output_final_state=True)
    assert torch.isfinite(o).all() and torch.isfinite(s).all()
    check(o, o_r, F32_TOL)
    check(s, s_r, F32_TOL)
    gk = torch.full((1, T, 1, 16), g_value)
    o, s = L.chunk_kda(q, k, v, gk, beta, output_final_state=True)
    o_r, s_r = L.recurrent_kda(q, k, v, gk, beta, output_final_state=True)
    assert torch.isfinite(o).all() and torch.isfinite(s).all()
    check(o, o_r, F32_TOL)
    check(s, s_r, F32_TOL)


# --- KDA --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("T,H,HV,K,V,g_low", [(1, 2, 2, 32, 32, -1.0), (63, 1, 2, 60, 100, -1.0),
                                              (300, 2, 4, 64, 64, -8.0), (200, 2, 2, 128, 128, -20.0)])
def test_kda_matches_fla_naive_recurrent(T, H, HV, K, V, g_low):
    q, k, v, g, beta = make(T=T, H=H, HV=HV, K=K, V=V, gate="channel", g_low=g_low, beta_max=1.5)
    s0 = torch.randn(1, HV, K, V) * 0.5
    want_o, want_s = naive_recurrent_kda(q, k, v, g, beta, initial_state=s0.clone(), output_final_state=True)
    for fn in (L.chunk_kda, L.recurrent_kda, L.fused_recurrent_kda):
        o, s = fn(q, k, v, g, beta, initial_state=s0, output_final_state=True)
        check(o, want_o, F32_TOL)
        check(s, want_s, F32_TOL)


def test_kda_matches_fla_naive_chunk_and_l2norm():
    q, k, v, g, beta = make(T=192, H=2, HV=4, K=64, V=32, gate="channel", unit_keys=False, seed=2)
    qn, kn = l2norm(q), l2norm(k)
    want_o, want_s = naive_chunk_kda(qn, kn, v, g, beta, output_final_state=True, chunk_size=64)
    o, s = L.chunk_kda(q, k, v, g, beta, output_final_state=True, use_qk_l2norm_in_kernel=True)
    check(o, want_o, F32_TOL)
    check(s, want_s, F32_TOL)
    o, s = L.fused_recurrent_gated_delta_rule(q, k, v, gk=g, beta=beta, output_final_state=True,
                                              use_qk_l2norm_in_kernel=True)
    check(o, want_o, F32_TOL)


def test_kda_bf16_and_varlen():
    cu = np.array([0, 17, 17, 150], dtype=np.int32)
    q, k, v, g, beta = make(T=150, H=1, HV=2, K=64, V=64, gate="channel", dtype=torch.bfloat16, seed=9)
    o, s = L.chunk_kda(q, k, v, g, beta, output_final_state=True, cu_seqlens=cu)
    assert o.dtype == torch.bfloat16
    for n in range(3):
        a, b = int(cu[n]), int(cu[n + 1])
        want_o, want_s = naive_recurrent_kda(q[:, a:b].float(), k[:, a:b].float(), v[:, a:b].float(),
                                             g[:, a:b].float(), beta[:, a:b].float(), output_final_state=True)
        if b > a:
            check(o[:, a:b], want_o, BF16_TOL)
        check(s[n], want_s[0], BF16_TOL)


# --- Arrays, targets and errors ---------------------------------------------------------------------------------

def test_numpy_in_numpy_out_on_every_target():
    q, k, v, g, beta = (x.numpy() for x in make(T=70, H=1, HV=2, K=16, V=32, gate="channel"))
    want_o, _ = naive_recurrent_kda(*(torch.from_numpy(x) for x in (q, k, v, g, beta)))
    before = attnzoo.active_target()
    try:
        for target in attnzoo.supported_targets():
            attnzoo.set_target(target)
            o, s = L.chunk_kda(q, k, v, g, beta)
            assert isinstance(o, np.ndarray) and o.dtype == np.float32 and s is None
            check(torch.from_numpy(o), want_o, F32_TOL)
    finally:
        attnzoo.set_target(before)


def test_errors_name_the_argument():
    q, k, v, g, beta = make(T=8)
    with pytest.raises(ValueError, match="chunk_size"):
        L.chunk_gated_delta_rule(q, k, v, g, beta, chunk_size=48)
    with pytest.raises(ValueError, match="^v: .*multiple"):
        L.chunk_gated_delta_rule(q, k, v[:, :, :1].expand(1, 8, 3, 32), g[..., :1].expand(1, 8, 3), beta[..., :1]
                                 .expand(1, 8, 3))
    with pytest.raises(ValueError, match="^g: "):
        L.chunk_gated_delta_rule(q, k, v, -g, beta)  # positive log decays
    with pytest.raises(ValueError, match="^g: "):
        L.chunk_kda(q, k, v, g, beta)  # a per-head gate is not KDA's
    with pytest.raises(ValueError, match="^k: "):
        L.recurrent_gated_delta_rule(q, k[..., :16], v, g, beta)
    with pytest.raises(ValueError, match="^beta: "):
        L.chunk_gated_delta_rule(q, k, v, g, beta[:, :4])
    with pytest.raises(ValueError, match="^q: .*NaN"):
        L.chunk_gated_delta_rule(q.masked_fill(q > 1, float("nan")), k, v, g, beta)
    with pytest.raises(ValueError, match="^initial_state: "):
        L.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=torch.zeros(1, 2, 32, 31))
    with pytest.raises(ValueError, match="^cu_seqlens: "):
        L.chunk_gated_delta_rule(q, k, v, g, beta, cu_seqlens=np.array([0, 3, 7], dtype=np.int32))
    with pytest.raises(ValueError, match="^q: "):
        L.chunk_delta_rule(q[0], k, v, beta)
    with pytest.raises(TypeError, match="^q: "):
        L.chunk_delta_rule(q.to(torch.int32), k, v, beta)
    with pytest.raises(TypeError, match="^v: "):
        L.recurrent_delta_rule(q, k, v.double(), beta)
    with pytest.raises(ValueError, match="gv"):
        L.fused_recurrent_gated_delta_rule(q, k, v, gv=g, beta=beta)


# --- the decode path: in place, without the value scans --------------------------------------------------------

@pytest.mark.parametrize("family", ["delta rule", "gated delta rule", "kda"])
@pytest.mark.parametrize("V, T", [(32, 1), (128, 1), (60, 1), (32, 3)])
def test_inplace_final_state_equals_out_of_place(family, V, T):
    """The buffer is updated and returned; o and the state equal the out-of-place call bit for bit, and fla's
    naive recurrence."""
    B, H, HV, K = 2, 2, 4, 32
    gate = {"delta rule": None, "gated delta rule": "head", "kda": "channel"}[family]
    q, k, v, g, beta = make(B=B, T=T, H=H, HV=HV, K=K, V=V, gate=gate, seed=11)
    h0 = torch.randn(B, HV, K, V, generator=torch.Generator().manual_seed(3)) * 0.3
    call = {"delta rule": lambda **kw: L.recurrent_delta_rule(q, k, v, beta, **kw),
            "gated delta rule": lambda **kw: L.recurrent_gated_delta_rule(q, k, v, g, beta, **kw),
            "kda": lambda **kw: L.recurrent_kda(q, k, v, g, beta, **kw)}[family]
    o_ref, s_ref = call(initial_state=h0.clone(), output_final_state=True)
    for check_inputs in (True, False):
        buf = h0.clone()
        o, s = call(initial_state=buf, inplace_final_state=True, check_inputs=check_inputs)
        assert s is buf  # the caller's buffer, not a copy
        assert torch.equal(o, o_ref) and torch.equal(buf, s_ref)
    gq, gk = q.repeat_interleave(HV // H, 2), k.repeat_interleave(HV // H, 2)
    if family == "delta rule":
        o_n, s_n = delta_rule_recurrence(gq.transpose(1, 2), gk.transpose(1, 2), v.transpose(1, 2),
                                         beta.transpose(1, 2), initial_state=h0, output_final_state=True)
        o_n = o_n.transpose(1, 2)
    elif family == "gated delta rule":
        o_n, s_n = naive_recurrent_gated_delta_rule(gq, gk, v, beta, g, initial_state=h0, output_final_state=True)
    else:
        o_n, s_n = naive_recurrent_kda(gq, gk, v, g, beta, initial_state=h0, output_final_state=True)
    assert rel_rms(o_ref, o_n) <= F32_TOL and rel_rms(s_ref, s_n) <= F32_TOL


def test_inplace_numpy_decode_loop_and_varlen():
    """Token by token with one state buffer, numpy, packed sequences: equals one recurrent call over the tokens."""
    rng = np.random.default_rng(5)
    N, T, H, K = 3, 4, 2, 16
    q = rng.standard_normal((N, T, H, K), dtype=np.float32)
    k = q / np.linalg.norm(q, axis=-1, keepdims=True)
    v = rng.standard_normal((N, T, H, K), dtype=np.float32)
    g = -rng.uniform(0, 1, (N, T, H)).astype(np.float32)
    beta = rng.uniform(0, 1, (N, T, H)).astype(np.float32)
    h0 = rng.standard_normal((N, H, K, K), dtype=np.float32)
    o_all, s_all = L.recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    state = h0.copy()
    for t in range(T):
        pack = lambda x: np.ascontiguousarray(x[:, t][None])  # the N sequences' token t, packed as B=1
        o, s = L.recurrent_gated_delta_rule(pack(q), pack(k), pack(v), pack(g), pack(beta), initial_state=state,
                                            cu_seqlens=np.arange(N + 1, dtype=np.int32), inplace_final_state=True,
                                            check_inputs=False)
        assert s is state
        np.testing.assert_allclose(o[0], o_all[:, t], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(state, s_all, rtol=1e-5, atol=1e-5)


def test_inplace_and_check_inputs_errors():
    q, k, v, g, beta = make(T=1, gate="head")
    h0 = torch.zeros(1, 2, 32, 32)
    with pytest.raises(ValueError, match="initial_state"):
        L.recurrent_gated_delta_rule(q, k, v, g, beta, inplace_final_state=True)
    with pytest.raises(TypeError, match="initial_state"):
        L.recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=h0.double(), inplace_final_state=True)
    with pytest.raises(ValueError, match="initial_state"):
        L.recurrent_kda(q, k, v, torch.zeros(1, 1, 2, 32), beta, initial_state=h0.transpose(-1, -2),
                        inplace_final_state=True)
    with pytest.raises(ValueError, match="initial_state"):
        L.recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=torch.zeros(1, 2, 32, 16),
                                     inplace_final_state=True, check_inputs=False)
    bad = h0.clone()
    bad[0, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="initial_state"):
        L.recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=bad, inplace_final_state=True)
    assert torch.isnan(bad[0, 0, 0, 0])  # refused before anything was written
    with pytest.raises(ValueError, match="g"):
        L.recurrent_gated_delta_rule(q, k, v, -g + 1, beta, initial_state=h0)
    # check_inputs=False trusts the values: a NaN state stays confined to its own head.
    o, _ = L.recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=bad, inplace_final_state=True,
                                        check_inputs=False)
    assert torch.isnan(o[0, 0, 0, 0]) and torch.isfinite(o[0, 0, 1]).all()
