"""attnzoo.quant.quantize block by block, against independent references:
  - round-to-nearest blocks (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) and F32 / F16 / BF16 byte for byte against the gguf
    package's numpy quantizers (gguf.quants.quantize), edge cases included;
  - K-quants (Q4_K, Q5_K, Q6_K; gguf has no quantizer for them) decoded by gguf.quants.dequantize: error bounds
    per format, and the scale search beating a plain round-to-nearest K-quant written here in numpy;
  - importance weighting (llama.cpp's imatrix) lowering the importance-weighted error (IQ4_NL / IQ4_XS too: their
    other checks are in test_quantize_iq4.py);
  - bad values refused by name.
Whole checkpoints through `attnzoo quantize`: test_quantize.py."""
import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

from attnzoo import quant  # noqa: E402

T = gguf.GGMLQuantizationType
RTN = [T.F32, T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1]
KQUANTS = [T.Q4_K, T.Q5_K, T.Q6_K]

def _data(kind, rng, rows=24, cols=256):
    if kind == "normal":
        return rng.standard_normal((rows, cols)).astype(np.float32)
    if kind == "heavy":  # Student-t with 2 degrees of freedom: a few huge outliers per block
        return rng.standard_t(2, (rows, cols)).astype(np.float32)
    if kind == "edges":  # one kind of edge case per row
        x = (rng.standard_normal((rows, cols)) * 0.02).astype(np.float32)
        x[0] = 0                                           # all-zero blocks
        x[1, :32] = 0
        x[2] *= 1e30                                       # scales overflow f16 (inf), as in gguf
        x[3] *= 1e-30                                      # scales underflow f16 to 0
        x[4] = (rng.standard_normal(cols) * 1e-36).astype(np.float32)  # f32-subnormal scales
        x[5] *= 3e-4                                       # f16-subnormal scales
        x[6] = rng.integers(-8, 8, cols)                   # exact ties at .5 after scaling
        x[7] = np.abs(x[7])                                # one-signed blocks
        x[8] = -np.abs(x[8])
        x[9, ::2] = 7.0                                    # repeated extremes: the first one wins
        x[9, 1::2] = -7.0
        x[10] = 1.0                                        # constant blocks (zero range)
        x[11] = -0.0                                       # blocks of -0.0: the first one's sign makes the scale's
        x[12] = np.linspace(-1, 1, cols) * 1e-38           # 1/d overflows f32 (the scale is f16 zero either way)
        return x
    raise ValueError(kind)


@pytest.mark.parametrize("qtype", RTN, ids=lambda t: t.name)
@pytest.mark.parametrize("kind", ["normal", "heavy", "edges"])
def test_round_to_nearest_blocks_are_gguf_bytes(qtype, kind):
    x = _data(kind, np.random.default_rng(len(kind) + int(qtype)))
    with np.errstate(all="ignore"):  # gguf's own overflow warnings on the 1e30 row
        want = gguf.quants.quantize(x, qtype)
    got = quant.quantize(x, qtype)
    want = np.ascontiguousarray(want).view(np.uint8).reshape(got.shape)
    bad = np.argwhere(want != got)
    assert bad.size == 0, f"{qtype.name}: first differing byte at (row, byte) {tuple(bad[0])}"


def _naive_k(x, qtype):
    """Plain round-to-nearest in the K-quant layouts (numpy, decoded values): Q4_K / Q5_K sub-blocks of 32 with
    scale (max - min) / nmax and min (6-bit quantized against their maxima), Q6_K sub-blocks of 16 with
    scale amax / 32 (8-bit against theirs); the baseline llama.cpp's scale search is meant to beat."""
    nmax, sub = {T.Q4_K: (15, 32), T.Q5_K: (31, 32), T.Q6_K: (32, 16)}[qtype]
    blocks = x.reshape(-1, 256 // sub, sub).astype(np.float64)
    if qtype == T.Q6_K:
        imax = np.abs(blocks).argmax(-1)[..., None]
        scale = np.take_along_axis(blocks, imax, -1) / -nmax
        d = np.abs(scale).max(1, keepdims=True) / 127
        s = np.where(d > 0, np.round(scale / np.where(d > 0, d, 1)), 0) * d
        q = np.clip(np.round(blocks / np.where(s != 0, s, 1)), -32, 31)
        return (q * s).reshape(x.shape)
    lo = np.minimum(blocks.min(-1, keepdims=True), 0)
    scale = (blocks.max(-1, keepdims=True) - lo) / nmax
    d, m = scale.max(1, keepdims=True) / 63, (-lo).max(1, keepdims=True) / 63
    s = np.round(scale / np.where(d > 0, d, 1)) * d
    mn = np.round(-lo / np.where(m > 0, m, 1)) * m
    q = np.clip(np.round((blocks + mn) / np.where(s > 0, s, 1)), 0, nmax)
    return (q * s - mn).reshape(x.shape)


# Relative RMS error bounds for unit-scale data; measured about 0.071 / 0.036 / 0.018 (normal) and 0.092 / 0.050
# / 0.030 (heavy-tailed).
K_BOUND = {T.Q4_K: 0.1, T.Q5_K: 0.055, T.Q6_K: 0.035}


@pytest.mark.parametrize("qtype", KQUANTS, ids=lambda t: t.name)
@pytest.mark.parametrize("kind", ["normal", "heavy"])
def test_k_quants_search_beats_round_to_nearest(qtype, kind):
    x = _data(kind, np.random.default_rng(7 + int(qtype)), rows=64)
    blocks = quant.quantize(x, qtype)
    got = gguf.quants.dequantize(blocks, qtype).reshape(x.shape)
    np.testing.assert_array_equal(quant.dequantize(blocks, qtype).reshape(x.shape), got)  # one decoding
    rel = lambda y: np.sqrt(np.mean((y - x) ** 2) / np.mean(x ** 2))  # noqa: E731
    assert rel(got) < K_BOUND[qtype]
    naive = _naive_k(x, qtype)
    if qtype == T.Q6_K:
        # Q6_K's search minimises the x^2-weighted error (large values matter most): it must win there clearly,
        # and not lose on the plain one.
        wrel = lambda y: np.sqrt(np.sum(x ** 2 * (y - x) ** 2) / np.sum(x ** 4))  # noqa: E731
        assert wrel(got) < 0.97 * wrel(naive), (wrel(got), wrel(naive))
        assert rel(got) < rel(naive), (rel(got), rel(naive))
    else:
        assert rel(got) < 0.97 * rel(naive), (rel(got), rel(naive))
    # No value is clipped away: the largest error stays below one step of the super-block's range (measured up
    # to 0.9 of it; sub-block scales are themselves 6 / 8-bit numbers, so half a sub-block step is not a bound).
    levels = {T.Q4_K: 15, T.Q5_K: 31, T.Q6_K: 63}[qtype]
    span = np.ptp(x.reshape(-1, 256), axis=1).repeat(256).reshape(x.shape)
    assert np.all(np.abs(got - x) <= span / levels)


def test_k_quant_edge_blocks():
    x = _data("edges", np.random.default_rng(3))
    for qtype in KQUANTS:
        with np.errstate(all="ignore"):  # the 1e30 row decodes to inf * 0
            got = gguf.quants.dequantize(quant.quantize(x, qtype), qtype).reshape(x.shape)
        assert np.all(got[0] == 0) and np.all(got[1, :32] == 0)  # all-zero (sub-)blocks decode to zeros
        np.testing.assert_allclose(got[6], x[6], atol=0.5)  # small integers
        np.testing.assert_allclose(got[10], 1.0, atol=0.02)  # a constant row


@pytest.mark.parametrize("qtype", [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1] + KQUANTS + [T.IQ4_NL, T.IQ4_XS],
                         ids=lambda t: t.name)
def test_importance_lowers_the_weighted_error(qtype):
    """llama.cpp's imatrix: the error that matters is sum_c importance_c (w - w_q)^2 (the expected output
    error for activations of that mean square); weighting the scale search by it must lower it."""
    rng = np.random.default_rng(11)
    x = rng.standard_t(4, (64, 256)).astype(np.float32)
    importance = np.exp(rng.standard_normal(256) * 2).astype(np.float32)  # channels differing by ~e^4
    err = lambda b: np.sum(importance * (gguf.quants.dequantize(b, qtype).reshape(x.shape) - x) ** 2)  # noqa
    plain, weighted = err(quant.quantize(x, qtype)), err(quant.quantize(x, qtype, importance=importance))
    assert weighted < 0.9 * plain, (weighted, plain)


def test_bad_values_are_refused_by_name():
    x = np.zeros((2, 64), np.float32)
    x[1, 3] = np.nan
    with pytest.raises(ValueError, match=r"x: value at row 1, column 3 is nan"):
        quant.quantize(x, T.Q8_0)
    x[1, 3] = np.inf
    with pytest.raises(ValueError, match=r"x: value at row 1, column 3 is inf"):
        quant.quantize(x, T.Q4_0)
    with pytest.raises(ValueError, match=r"not a whole number of Q4_K blocks of 256"):
        quant._core.quantize(np.zeros((1, 64), np.float32), int(T.Q4_K), None, np.empty(0, np.uint8))
    imp = np.ones(64, np.float32)
    imp[5] = -1
    with pytest.raises(ValueError, match=r"^importance: input channel 5 is -1"):
        quant.quantize(np.zeros((1, 64), np.float32), T.Q4_0, importance=imp)
