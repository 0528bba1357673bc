"""S4D / DSS against the math of the state-spaces repository (SSMKernelDiag: its Vandermonde kernel for disc
'zoh', 'bilinear' and 'dss', FFTConv's rfft convolution, the kernel of an initial state, forward_state and step),
re-stated here in plain torch (complex128) and independent of attnzoo's code."""
import math

import numpy as np
import pytest
import torch

import attnzoo.linear as L
from conftest import rel_rms


def make(H=8, N=16, seed=0, dt_min=1e-3, dt_max=1e-1):
    """S4D-Lin's initialization (state-spaces): log dt uniform, A = -1/2 + i pi n, B = 1, C ~ CN(0, 1)."""
    g = torch.Generator().manual_seed(seed)
    log_dt = torch.rand(H, generator=g, dtype=torch.float64) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)
    A = (-0.5 * torch.exp(0.3 * torch.randn(H, N, generator=g, dtype=torch.float64))
         + 1j * math.pi * torch.arange(N, dtype=torch.float64))
    B = torch.ones(H, N, dtype=torch.complex128) + 0.3 * torch.randn(H, N, generator=g, dtype=torch.complex128)
    C = torch.randn(H, N, generator=g, dtype=torch.complex128)
    D = torch.randn(H, generator=g, dtype=torch.float64)
    f32 = lambda x: x.to(torch.complex64 if x.is_complex() else torch.float32).to(x.dtype)  # what the kernels get
    return f32(torch.exp(log_dt)), f32(A), f32(B), f32(C), f32(D)


def ss_kernel(dt, A, B, C, length, disc, state=None):
    """SSMKernelDiag.forward: the kernel [H, L], or with `state` [batch, H, N] the state's kernel [batch, H, L]."""
    dtA = dt[:, None] * A
    ar = torch.arange(length, dtype=torch.float64)
    if state is not None:  # B augmented with the state, as forward(state=...) does
        s = state / dt[:, None]
        s = s * (1 + dtA / 2) if disc == "bilinear" else s * dtA * dtA.exp() / (dtA.exp() - 1)
        B = s
    CB = B * C
    if disc == "zoh":
        CB = CB * (torch.exp(dtA) - 1.0) / A
        return 2 * torch.einsum("...hn,hnl->...hl", CB, torch.exp(dtA[..., None] * ar)).real
    if disc == "bilinear":
        CB = CB * (1.0 - dtA / 2).reciprocal() * dt[:, None]
        dA = (1.0 + dtA / 2) / (1.0 - dtA / 2)
        return 2 * torch.einsum("...hn,hnl->...hl", CB, torch.exp(dA.log()[..., None] * ar)).real
    S = (dtA[..., None] * ar).exp()  # 'dss', every Re(A) < 0 (no shift needed)
    num, den = dtA.exp() - 1, (dtA * length).exp() - 1
    x = den * A
    r = x.conj() / (x * x.conj() + 1e-7)
    return torch.einsum("...hn,hnl->...hl", CB * num * r, S).real


def ss_conv(u, K, D):
    """FFTConv: u [B, T, H] (ours) -> state-spaces' [B, H, L], rfft with n = 2L, then + D u."""
    x = u.double().transpose(1, 2)
    T = x.shape[-1]
    y = torch.fft.irfft(torch.fft.rfft(x, n=2 * T) * torch.fft.rfft(K, n=2 * T), n=2 * T)[..., :T]
    return (y + x * D[:, None]).transpose(1, 2)


def ss_discrete(dt, A, B, disc):
    """_setup_step: dA, dB."""
    dtA = dt[:, None] * A
    if disc == "zoh":
        return torch.exp(dtA), B * (torch.exp(dtA) - 1.0) / A
    return (1.0 + dtA / 2) / (1.0 - dtA / 2), B * (1.0 - dtA / 2).reciprocal() * dt[:, None]


def ours(dt, A, B, C, D):
    return dict(dt=dt.float(), A=A.to(torch.complex64), B=B.to(torch.complex64), C=C.to(torch.complex64),
                D=D.float())


@pytest.mark.parametrize("disc", ["zoh", "bilinear", "dss"])
@pytest.mark.parametrize("T", [50, 1000])  # the direct convolution, then FFTs
def test_conv_and_recurrent_match_state_spaces(disc, T):
    dt, A, B, C, D = make()
    u = torch.randn(2, T, 8, generator=torch.Generator().manual_seed(1))
    want = ss_conv(u, ss_kernel(dt, A, B, C, T, disc), D)
    for fn in (L.s4d_conv, L.s4d_recurrent):
        y, final = fn(u, discretization=disc, **ours(dt, A, B, C, D))
        assert isinstance(y, torch.Tensor) and y.dtype == torch.float32 and final is None
        assert rel_rms(y, want) <= 1e-5, fn.__name__


@pytest.mark.parametrize("disc", ["zoh", "bilinear"])
def test_states_match_state_spaces(disc):
    """The initial state's kernel (forward(state=...)), forward_state's final state, and step()."""
    dt, A, B, C, D = make(H=5, N=12, seed=2)
    T = 300
    g = torch.Generator().manual_seed(3)
    u = torch.randn(2, T, 5, generator=g)
    h0 = torch.randn(2, 5, 12, generator=g, dtype=torch.complex128) * 0.5
    want = ss_conv(u, ss_kernel(dt, A, B, C, T, disc), D) + ss_kernel(dt, A, B, C, T, disc, h0).transpose(1, 2)
    dA, dB = ss_discrete(dt, A, B, disc)
    # forward_state: dA^L h0 + sum_l dB u[L-1-l] dA^l
    powers = torch.exp(dA.log()[..., None] * torch.arange(T, dtype=torch.float64))
    want_state = dA ** T * h0 + torch.einsum("bhl,hn,hnl->bhn", u.double().flip(1).transpose(1, 2).to(A), dB, powers)
    h0_pairs = torch.view_as_real(h0.to(torch.complex64)).contiguous()
    for fn in (L.s4d_conv, L.s4d_recurrent):
        y, final = fn(u, discretization=disc, initial_state=h0_pairs, output_final_state=True, **ours(dt, A, B, C, D))
        assert final.shape == (2, 5, 12, 2) and final.dtype == torch.float32
        assert rel_rms(y, want) <= 1e-5, fn.__name__
        assert rel_rms(final, torch.view_as_real(want_state)) <= 1e-5, fn.__name__
    # step(): next = dA h + dB u, y = 2 Re(C next) (+ D u, the layer's skip)
    state, h = torch.zeros(2, 5, 12, 2), torch.zeros(2, 5, 12, dtype=torch.complex128)
    for t in range(4):
        h = dA * h + dB * u[:, t, :, None].double()
        y = L.s4d_step(state, u[:, t], discretization=disc, **ours(dt, A, B, C, D))
        assert rel_rms(y, 2 * (C * h).sum(-1).real + D * u[:, t].double()) <= 1e-6
    assert rel_rms(state, torch.view_as_real(h)) <= 1e-6


@pytest.mark.parametrize("disc", ["zoh", "bilinear", "dss"])
def test_kernel_matches_state_spaces(disc):
    dt, A, B, C, _ = make(H=6, N=20, seed=4)
    want = ss_kernel(dt, A, B, C, 4096, disc)
    p = ours(dt, A, B, C, torch.zeros(6))
    del p["D"]
    assert rel_rms(L.s4d_kernel(length=4096, discretization=disc, **p), want) <= 1e-6
    assert rel_rms(L.s4d_kernel(length=4096, discretization=disc, reference=True, **p), want) <= 1e-6


def test_packed_sequences_numpy_and_long_sequence():
    dt, A, B, C, D = make(H=3, N=8, seed=5, dt_max=1e-3)
    lens = [5, 200, 1, 4200]
    u = np.random.default_rng(6).standard_normal((1, sum(lens), 3)).astype(np.float32)
    cu = np.cumsum([0] + lens).astype(np.int32)
    args = dict(dt=dt.numpy().astype(np.float32), A=A.numpy(), B=B.numpy(), C=C.numpy(), D=D.numpy().astype(np.float32))
    y, final = L.s4d_conv(u, cu_seqlens=cu, output_final_state=True, **args)
    assert isinstance(y, np.ndarray) and final.shape == (4, 3, 8, 2)
    for i, n in enumerate(lens):
        part = u[:, cu[i]:cu[i + 1]]
        want = ss_conv(torch.from_numpy(part), ss_kernel(dt, A, B, C, n, "zoh"), D)
        assert rel_rms(y[:, cu[i]:cu[i + 1]], want) <= 1e-5
        _, s1 = L.s4d_recurrent(part, output_final_state=True, **args)
        assert rel_rms(s1[0], final[i]) <= 1e-5


def test_errors_name_the_argument():
    dt, A, B, C, D = make(H=2, N=4)
    u = torch.randn(1, 10, 2)
    bad = A.clone()
    bad[1, 2] = 0.2 + 1j
    with pytest.raises(ValueError, match="A: real parts must be negative"):
        L.s4d_conv(u, **ours(dt, bad, B, C, D))
    with pytest.raises(ValueError, match="dss_length"):
        L.s4d_conv(u, discretization="dss", cu_seqlens=np.array([0, 4, 10], np.int32), **ours(dt, A, B, C, D))
    with pytest.raises(ValueError, match="discretization"):
        L.s4d_recurrent(u, discretization="euler", **ours(dt, A, B, C, D))
    with pytest.raises(ValueError, match="H = 3 in u"):
        L.s4d_conv(torch.randn(1, 10, 3), **ours(dt, A, B, C, D))
    with pytest.raises(ValueError, match="dt: step sizes must be positive"):
        L.s4d_conv(u, **ours(-dt, A, B, C, D))
    kernel_args = {k: v for k, v in ours(dt, A, B, C, D).items() if k != "D"}
    with pytest.raises(ValueError, match="length: must be >= 0"):
        L.s4d_kernel(length=-1, **kernel_args)
