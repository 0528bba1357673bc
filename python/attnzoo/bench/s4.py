"""Kernel-table rows for S4D: the convolution form (Vandermonde kernel + FFT convolution) against the recurrent
form on the same inputs, at T = 1k, 4k and 16k (d_model 256, 32 complex modes: state-spaces' S4D with
d_state 64). The FFT row carries the target of issue 31, faster than the recurrence from 1k tokens on.

Both rows are rated by the recurrence's work (8 flops per token, channel and mode: the complex state update
and the output's real part), so their rates compare as their times do. No PyTorch peer: state-spaces' own
torch form (python/tests/test_linear_s4.py) builds an [H, N, T] complex power table, seconds per call at 16k.
"""
import math

from .harness import length_text


def _shapes(scale):
    if scale == "tiny":
        return dict(H=8, N=8, lengths=(64, 256, 512))  # below 1k: the target is for model widths
    return dict(H=256 if scale == "full" else 128, N=32, lengths=(1024, 4096, 16384))


def _inputs(H, N, T, torch):
    """S4D-Lin's initialization: log dt uniform in [1e-3, 1e-1], A = -1/2 + i pi n, B = 1, C ~ CN(0, 1)."""
    g = torch.Generator().manual_seed(91)
    dt = torch.exp(torch.rand(H, generator=g) * (math.log(0.1) - math.log(0.001)) + math.log(0.001))
    A = torch.complex(torch.full((H, N), -0.5), math.pi * torch.arange(N, dtype=torch.float32).expand(H, N))
    B = torch.ones(H, N, dtype=torch.complex64)
    C = torch.randn(H, N, generator=g, dtype=torch.complex64)
    D = torch.randn(H, generator=g)
    u = torch.randn(1, T, H, generator=g)
    return u, dict(dt=dt, A=A, B=B, C=C, D=D)


def _case(s, T, form):
    from .harness import BenchCase, Prepared, faster_than, torch_module
    from ..linear import s4d_conv, s4d_recurrent
    H, N = s["H"], s["N"]

    def setup():
        torch = torch_module()
        if torch is None:
            raise NotImplementedError("the S4D rows build complex parameters with torch")
        u, p = _inputs(H, N, T, torch)
        fn = s4d_conv if form == "fft" else s4d_recurrent
        ours = lambda: fn(u, **p, check_inputs=False)[0]
        return Prepared(ours)

    length = length_text(T)
    recurrent_key = f"s4d zoh recurrent f32 T={length}"
    goals = [faster_than(recurrent_key, 1.0)] if form == "fft" and T >= 1024 else []
    name = f"{'fft conv' if form == 'fft' else 'recurrent'} f32 T={length}"
    return BenchCase("s4d zoh", name, f"T={T} H={H} N={N}", setup, flops=8.0 * T * H * N, goals=goals)


def s4_cases(config):
    """The S4D BenchCases at the config's scale: for each length the FFT row, then the recurrent row."""
    s = _shapes(config["scale"])
    return [_case(s, T, form) for T in s["lengths"] for form in ("fft", "recurrent")]
