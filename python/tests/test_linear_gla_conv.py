"""attnzoo.linear.causal_conv1d / causal_conv1d_update against torch.nn.functional.conv1d (groups=D, left
padding), every SIMD target."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attnzoo
from attnzoo import linear
from conftest import rel_rms

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def rnd(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def torch_conv(x, weight, bias=None, state=None, activation=None):
    """x [B, T, D]; state [B, D, S] prepended as history; returns (y, last S inputs)."""
    B, T, D = x.shape
    W = weight.shape[1]
    xt = x.transpose(1, 2)  # [B, D, T]
    hist = state if state is not None else torch.zeros(B, D, W - 1)
    full = torch.cat([hist, xt], dim=2)
    y = F.conv1d(full[:, :, full.shape[2] - T - (W - 1):], weight.unsqueeze(1), bias, groups=D).transpose(1, 2)
    if activation == "silu":
        y = F.silu(y)
    return y, full[:, :, full.shape[2] - hist.shape[2]:]


@pytest.mark.parametrize("W", [2, 3, 4])
def test_matches_torch_conv1d(simd_target, W):
    x, w, b = rnd(2, 37, 100), rnd(100, W, seed=1), rnd(100, seed=2)
    h0 = rnd(2, 100, W - 1, seed=3)
    for activation in (None, "silu"):
        want, want_h = torch_conv(x, w, b, h0, activation)
        y, ht = linear.causal_conv1d(x, w, b, initial_state=h0, output_final_state=True, activation=activation)
        assert rel_rms(y, want) <= 1e-6
        assert torch.equal(ht, want_h)
    want, _ = torch_conv(x, w)
    y, ht = linear.causal_conv1d(x, w)
    assert ht is None and rel_rms(y, want) <= 1e-6


def test_varlen_numpy_and_fla_state_length():
    cu = np.array([0, 5, 5, 40], dtype=np.int32)
    x, w = rnd(1, 40, 64), rnd(64, 4, seed=1)
    h0 = rnd(3, 64, 4, seed=2)  # fla keeps W inputs; only the last W - 1 matter
    y, ht = linear.causal_conv1d(x.numpy(), w.numpy(), initial_state=h0.numpy(), output_final_state=True,
                                 cu_seqlens=cu)
    assert isinstance(y, np.ndarray) and ht.shape == (3, 64, 4)
    for n in range(3):
        s, e = cu[n], cu[n + 1]
        if e == s:  # an empty sequence keeps its state
            assert np.array_equal(ht[n], h0[n].numpy())
            continue
        want, want_h = torch_conv(x[:, s:e], w, state=h0[n:n + 1])
        assert rel_rms(y[:, s:e], want) <= 1e-6
        assert np.array_equal(ht[n:n + 1], want_h.numpy())


def test_bf16():
    x, w, b = (t.to(torch.bfloat16) for t in (rnd(1, 30, 48), rnd(48, 4, seed=1), rnd(48, seed=2)))
    want, _ = torch_conv(x.float(), w.float(), b.float(), activation="silu")
    y, _ = linear.causal_conv1d(x, w, b, activation="silu")
    assert y.dtype == torch.bfloat16 and rel_rms(y.float(), want) <= 1e-2


def test_update_steps_match_prefill():
    x, w, b = rnd(3, 9, 40), rnd(40, 4, seed=1), rnd(40, seed=2)
    full, _ = linear.causal_conv1d(x, w, b, activation="silu")
    state = torch.zeros(3, 40, 3)
    for t in range(9):
        y = linear.causal_conv1d_update(x[:, t], state, w, b, activation="silu")
        assert y.shape == (3, 40)
        assert rel_rms(y, full[:, t]) <= 1e-6
    y2 = linear.causal_conv1d_update(x[:, :2], torch.zeros(3, 40, 3), w, b)  # [N, L, D]: two tokens at once
    want, _ = linear.causal_conv1d(x[:, :2], w, b)
    assert rel_rms(y2, want) <= 1e-6


def test_bad_arguments():
    x, w = rnd(1, 5, 8), rnd(8, 4, seed=1)
    with pytest.raises(ValueError, match="^weight"):
        linear.causal_conv1d(x, w[:7])
    with pytest.raises(ValueError, match="^initial_state"):
        linear.causal_conv1d(x, w, initial_state=torch.zeros(1, 8, 2))
    with pytest.raises(ValueError, match="^activation"):
        linear.causal_conv1d(x, w, activation="gelu")
    with pytest.raises(ValueError, match="^x"):
        linear.causal_conv1d(x.clone().fill_(float("nan")), w)
    # check_inputs=False skips only the value scan: NaN propagates, shapes are still checked
    assert torch.isnan(linear.causal_conv1d(x.clone().fill_(float("nan")), w, check_inputs=False)[0]).all()
    with pytest.raises(ValueError, match="^weight"):
        linear.causal_conv1d(x, w[:7], check_inputs=False)
    with pytest.raises(TypeError, match="^x"):
        linear.causal_conv1d(x.to(torch.int32), w)
    with pytest.raises(TypeError, match="^conv_state"):
        linear.causal_conv1d_update(x[:, 0], torch.zeros(1, 8, 3, dtype=torch.float64), w)
