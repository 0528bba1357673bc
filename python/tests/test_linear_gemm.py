"""The prefill projection GEMM against torch: f32 products (OpenBLAS, our tile GEMM) equal torch's f32 matmul of
the widened weights; bf16 products (matmul precision "medium") equal torch's f32 matmul of bf16-rounded
activations and weights, up to f32 summation order. Errors name the argument."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from attnzoo import _core  # noqa: E402


def _rel(got, want):
    return float(torch.linalg.norm(got - want) / torch.linalg.norm(want))


@pytest.mark.parametrize("T,N,K", [(9, 16, 32), (37, 100, 257), (200, 304, 640), (513, 1024, 96)])
@pytest.mark.parametrize("w_dtype", ["float32", "bfloat16"])
def test_backends_match_torch(T, N, K, w_dtype):
    g = torch.Generator().manual_seed(T * N + K)
    x = torch.randn(T, K, generator=g)
    w = torch.randn(N, K, generator=g).to(getattr(torch, w_dtype))
    exact = x.double() @ w.double().T
    for backend in ("openblas", "tile"):
        y = torch.empty(T, N)
        _core.linear_gemm(w, x, y, backend)
        assert _rel(y.double(), exact) < 1e-6, backend
    if _core.active_target() != "avx512_bf16":  # named, bf16_dot runs where the CPU has it, whatever the vendor rule
        with pytest.raises(ValueError, match="backend"):
            _core.linear_gemm(w, x, torch.empty(T, N), "bf16_dot")
        return
    y = torch.empty(T, N)
    _core.linear_gemm(w, x, y, "bf16_dot")
    rounded = x.bfloat16().double() @ w.bfloat16().double().T
    assert _rel(y.double(), rounded) < 1e-6
    assert 1e-5 < _rel(y.double(), exact) < 1e-2  # really bf16 products, and only that far from f32


def test_bad_arguments_are_named():
    x, w = torch.randn(4, 8), torch.randn(6, 8)
    with pytest.raises(ValueError, match="^backend"):
        _core.linear_gemm(w, x, torch.empty(4, 6), "fast")
    with pytest.raises(ValueError, match="^x"):
        _core.linear_gemm(w, torch.randn(4, 7), torch.empty(4, 6))
    with pytest.raises(ValueError, match="^y"):
        _core.linear_gemm(w, x, torch.empty(4, 5))
    with pytest.raises(ValueError, match="^w"):
        _core.linear_gemm(np.zeros((6, 8), np.int32), x, torch.empty(4, 6))
