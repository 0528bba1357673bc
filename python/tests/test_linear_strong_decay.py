"""Every exp-decay family with strong decays (log decays down to -16 per step; Mamba-2's A down to -16 with raw
dt in [-4, 0] before softplus), fast paths against the double-precision references.

Such decays drive exp(sum of log decays) through the subnormal range inside the kernels; the kernels run with
subnormals flushed to zero (src/core/denormals.h), which must stay within tolerance of the references and must
never turn into inf / NaN (a chunked form that split exp(b_i - b_j) into exp(b_i) * exp(-b_j) would overflow).
"""
import numpy as np
import pytest

from attnzoo import linear as L
from attnzoo.linear import _gla
from conftest import ALL_TARGETS, rel_rms

TOL = 1e-4
T, H, K = 200, 2, 32  # crosses chunk boundaries with a ragged last chunk


def _rng(seed):
    return np.random.default_rng(seed)


def _qkv(seed, normalise_k=False):
    rng = _rng(seed)
    q, k, v = (rng.standard_normal((1, T, H, K), dtype=np.float32) for _ in range(3))
    if normalise_k:
        k /= np.linalg.norm(k, axis=-1, keepdims=True)
    return q, k, v


def _strong_log_decay(shape, seed):
    return _rng(seed).uniform(-16.0, 0.0, shape).astype(np.float32)


def _close(got, want, what):
    for g, w, part in zip(got, want, ("output", "final state")):
        assert np.isfinite(np.asarray(g)).all(), f"{what}: {part} not finite"
        assert rel_rms(g, w) <= TOL, f"{what}: {part} rel rms {rel_rms(g, w):.2e}"


@pytest.fixture(params=ALL_TARGETS)
def target(request):
    import attnzoo
    before = attnzoo.active_target()
    attnzoo.set_target(request.param)
    yield request.param
    attnzoo.set_target(before)


def test_mamba2(target):
    rng = _rng(1)
    Hm, P, N, G = 4, 16, 32, 2
    x = rng.standard_normal((1, T, Hm, P), dtype=np.float32)
    B, C = (rng.standard_normal((1, T, G, N), dtype=np.float32) for _ in range(2))
    dt = rng.uniform(-4.0, 0.0, (1, T, Hm)).astype(np.float32)
    A = -np.array([1.0, 4.0, 9.0, 16.0], np.float32)
    h0 = rng.standard_normal((1, Hm, P, N), dtype=np.float32)
    kw = dict(dt_softplus=True, initial_state=h0, output_final_state=True)
    want = L.mamba2_reference(x, dt, A, B, C, **kw)
    for chunk_size in (32, 64):
        _close(L.mamba2_chunk_scan(x, dt, A, B, C, chunk_size=chunk_size, **kw), want, f"chunk {chunk_size}")
    _close(L.mamba2_recurrent(x, dt, A, B, C, **kw), want, "recurrent")


def test_selective_scan(target):
    rng = _rng(2)
    D, N = 40, 16
    u = rng.standard_normal((1, D, T), dtype=np.float32)
    delta = rng.uniform(-4.0, 2.0, (1, D, T)).astype(np.float32)
    A = -np.tile(np.arange(1, N + 1, dtype=np.float32), (D, 1))
    B, C = (rng.standard_normal((1, N, T), dtype=np.float32) for _ in range(2))
    kw = dict(delta_softplus=True, return_last_state=True)
    _close(L.selective_scan_fn(u, delta, A, B, C, **kw), L.selective_scan_reference(u, delta, A, B, C, **kw),
           "selective scan")


@pytest.mark.parametrize("family", ["simple_gla", "gla"])
def test_gla_family(target, family):
    q, k, v = _qkv(3)
    g = _strong_log_decay((1, T, H) if family == "simple_gla" else (1, T, H, K), 4)
    h0 = _rng(5).standard_normal((1, H, K, K), dtype=np.float32)
    kw = dict(g=g, initial_state=h0, output_final_state=True)
    want = _gla._run(family, "reference", q, k, v, **kw)[:2]
    _close(_gla._run(family, "chunk", q, k, v, **kw)[:2], want, f"{family} chunk")
    _close(_gla._run(family, "recurrent", q, k, v, **kw)[:2], want, f"{family} recurrent")


@pytest.mark.parametrize("family", ["gated_delta_rule", "kda"])
def test_delta_family(target, family):
    q, k, v = _qkv(6, normalise_k=True)
    g = _strong_log_decay((1, T, H) if family == "gated_delta_rule" else (1, T, H, K), 7)
    beta = _rng(8).uniform(0.1, 0.9, (1, T, H)).astype(np.float32)
    h0 = _rng(9).standard_normal((1, H, K, K), dtype=np.float32)
    kw = dict(initial_state=h0, output_final_state=True)
    fn = getattr(L, f"{family}_reference"), getattr(L, f"chunk_{family}"), getattr(L, f"recurrent_{family}")
    want = fn[0](q, k, v, g, beta, **kw)
    _close(fn[1](q, k, v, g, beta, **kw), want, f"{family} chunk")
    _close(fn[2](q, k, v, g, beta, **kw), want, f"{family} recurrent")


def test_rwkv7(target):
    r, k, v = _qkv(10, normalise_k=True)
    w = _strong_log_decay((1, T, H, K), 11)
    a, b = -k, k * 0.5
    h0 = _rng(12).standard_normal((1, H, K, K), dtype=np.float32)
    want = L.rwkv7_reference(r, w, k, v, a, b, scale=1.0, initial_state=h0, output_final_state=True)
    got = L.chunk_rwkv7(r, w, k, v, a, b, scale=1.0, initial_state=h0, output_final_state=True)
    _close(got, want, "rwkv7 chunk")
    _close(L.recurrent_rwkv7(r, w, k, v, a, b, scale=1.0, initial_state=h0, output_final_state=True), want,
           "rwkv7 recurrent")


def test_rwkv4(target):
    rng = _rng(13)
    Cc = 64
    w = np.full(Cc, np.log(16.0), np.float32)  # per-step decay exp(-exp(w)) = e^-16
    u = rng.standard_normal(Cc, dtype=np.float32)
    k, v = (rng.standard_normal((1, T, Cc), dtype=np.float32) for _ in range(2))
    _close(L.rwkv4_wkv(w, u, k, v, output_final_state=True), L.rwkv4_reference(w, u, k, v, output_final_state=True),
           "rwkv4")
