"""Quantized weights against gguf-py (llama.cpp's own Python package): the format table, and dequantization
bit for bit; the quantized projection against float64 products of gguf-py's dequantized weights."""
import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType as Q  # noqa: E402
from gguf import quants  # noqa: E402

import attnzoo  # noqa: E402
from attnzoo import quant  # noqa: E402

SUPPORTED = [Q.F32, Q.F16, Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K,
             Q.MXFP4, Q.IQ4_NL, Q.IQ4_XS]
# Formats gguf-py can quantize (the rest only dequantize there: random valid blocks stand in).
QUANTIZABLE = {Q.F32, Q.F16, Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.MXFP4}
# Byte offsets of each block's f16 scales: everything else is packed integers, where any bits are valid.
F16_FIELDS = {Q.Q2_K: (80, 82), Q.Q3_K: (108,), Q.Q4_K: (0, 2), Q.Q5_K: (0, 2), Q.Q6_K: (208,), Q.IQ4_NL: (0,),
              Q.IQ4_XS: (0,)}


def random_blocks(qtype, n, rng):
    block, size = GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(n // block, size), dtype=np.uint8)
    for off in F16_FIELDS[qtype]:
        scales = (rng.standard_normal(n // block) * 0.05).astype(np.float16)
        raw[:, off:off + 2] = scales.view(np.uint8).reshape(-1, 2)
    return raw.reshape(-1)


def make_weights(qtype, rows, cols, rng):
    if qtype in QUANTIZABLE:
        data = rng.standard_normal((rows, cols)).astype(np.float32)
        data[0, :32] = 0  # an all-zero block: scale 0
        return np.ascontiguousarray(quants.quantize(data, qtype)).view(np.uint8).reshape(-1)
    return random_blocks(qtype, rows * cols, rng)


def test_format_table_matches_gguf():
    for t in Q:
        ours = quant.type_info(t)
        if t.name in ("NVFP4", "Q1_0"):  # newer than core/quant_type's table
            assert ours is None, f"{t.name}: a format we cannot read must be unknown, not misread"
            continue
        assert ours is not None, f"{t.name} missing from core/quant_type"
        name, block, size = ours
        assert name == t.name
        if t == Q.Q8_1:
            # gguf-py still sizes Q8_1 with f32 scales (40); ggml's block_q8_1 has two f16 (36). It is an
            # activation format that never appears in files.
            assert (block, size) == (32, 36)
            continue
        assert (block, size) == GGML_QUANT_SIZES[t], t.name
    assert quant.type_info(1000) is None


@pytest.mark.parametrize("qtype", SUPPORTED, ids=lambda t: t.name)
def test_dequantize_bit_exact(qtype):
    rng = np.random.default_rng(int(qtype) + 1)
    rows, cols = 4, 512
    raw = make_weights(qtype, rows, cols, rng)
    want = quants.dequantize(raw.reshape(rows, -1), qtype).astype(np.float32).reshape(-1)
    for reference in (False, True):
        got = quant.dequantize(raw, qtype, reference=reference)
        assert got.shape == want.shape
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (qtype.name, reference)
    assert np.abs(want).max() > 0


def test_iq4_xs_every_sub_block_scale_bit_exact():
    """IQ4_XS's 6-bit sub-block scales split over scales_l (4 bits) and scales_h (2 bits): 8 super-blocks whose 64
    sub-blocks take every scale 0..63 once (so the biased scale runs -32..31), against gguf-py bit for bit."""
    rng = np.random.default_rng(3)
    raw = random_blocks(Q.IQ4_XS, 8 * 256, rng).reshape(8, 136)
    ls = rng.permutation(64).reshape(8, 8)
    raw[:, 4:8] = (ls[:, 0::2] & 0xF) | ((ls[:, 1::2] & 0xF) << 4)
    scales_h = sum((ls[:, j].astype(np.uint16) >> 4) << (2 * j) for j in range(8)).astype(np.uint16)
    raw[:, 2:4] = scales_h.view(np.uint8).reshape(8, 2)
    want = quants.dequantize(raw, Q.IQ4_XS).astype(np.float32).reshape(-1)
    sub_scale = np.abs(want.reshape(64, 32)).max(1)
    assert np.count_nonzero(sub_scale == 0) == 1  # exactly the sub-block with ls = 32 is zero: all 64 really occur
    for reference in (False, True):
        got = quant.dequantize(raw.reshape(-1), Q.IQ4_XS, reference=reference)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), reference


@pytest.mark.parametrize("qtype", SUPPORTED, ids=lambda t: t.name)
@pytest.mark.parametrize("T", [1, 5, 40])
def test_matmul_against_dequantized_float64(qtype, T):
    rng = np.random.default_rng(7 + T)
    n, k = 48, 512
    raw = make_weights(qtype, n, k, rng)
    w = quants.dequantize(raw.reshape(n, -1), qtype).astype(np.float64).reshape(n, k)
    x = rng.standard_normal((T, k)).astype(np.float32)
    want = x.astype(np.float64) @ w.T
    # 8-bit activations (GEMV): each x is off by at most amax(block) / 254.
    amax = np.abs(x).reshape(T, k // 32, 32).max(-1).repeat(32, axis=1)
    bound = (amax / 254) @ np.abs(w).T + 1e-4 * (np.abs(x) @ np.abs(w).T)
    blocked = qtype not in (Q.F32, Q.F16, Q.BF16)
    for path in ("auto", "f32", "reference") + (("int8",) if blocked else ()):
        got = quant.matmul(x, raw, qtype, n, k, path=path)
        # path "auto" is a model's Linear under the default matmul precision "auto": block formats take 8-bit
        # activations in decode GEMVs and, where bf16 dot products run, bf16 panels in prefill
        reduced = path == "int8" or (path == "auto" and blocked)
        bf16 = path == "auto" and blocked and T > 8 and attnzoo._core.bf16_tiles_enabled()
        tol = bound if reduced else 1e-4 * (np.abs(x) @ np.abs(w).T) + 1e-5
        if bf16:  # x and the dequantized weights rounded to bf16: each off by at most 2^-8 relative
            tol = 2 * 2.0 ** -8 * (np.abs(x) @ np.abs(w).T) + 1e-5
        assert np.all(np.abs(got - want) <= tol), (path, float(np.abs(got - want).max()))
    # A decode-sized Linear over blocks takes llama.cpp's 8-bit activations under "auto" and "medium", f32
    # activations under "highest".
    if T <= 8 and blocked:
        for precision, path in (("auto", "int8"), ("medium", "int8"), ("highest", "f32")):
            attnzoo.set_float32_matmul_precision(precision)
            try:
                got = quant.matmul(x, raw, qtype, n, k, path="auto")
            finally:
                attnzoo.set_float32_matmul_precision("auto")
            assert np.array_equal(got, quant.matmul(x, raw, qtype, n, k, path=path)), precision


@pytest.mark.parametrize("qtype", [Q.Q4_0, Q.Q8_0, Q.Q4_K, Q.Q5_K, Q.Q6_K, Q.Q5_0, Q.Q4_1], ids=lambda t: t.name)
def test_f32_gemv_long_rows_against_gguf(qtype):
    """Rows longer than the AVX-512 rows' 64-block scale chunks (and an odd block count for Q4_0 / Q8_0), every
    token count a decode pass takes (1-4 per row pass, 8 per call, then another call)."""
    rng = np.random.default_rng(int(qtype))
    block = 32 if qtype in (Q.Q4_0, Q.Q8_0, Q.Q5_0, Q.Q4_1) else 256
    n, k = 19, block * (69 if block == 32 else 9)
    raw = make_weights(qtype, n, k, rng)
    w = quants.dequantize(raw.reshape(n, -1), qtype).astype(np.float64).reshape(n, k)
    for T in (1, 2, 3, 4, 7, 9):
        x = rng.standard_normal((T, k)).astype(np.float32)
        want = x.astype(np.float64) @ w.T
        got = quant.matmul(x, raw, qtype, n, k, path="f32")
        tol = 1e-5 * (np.abs(x) @ np.abs(w).T) + 1e-6
        assert np.all(np.abs(got - want) <= tol), (T, float(np.abs(got - want).max()))


def test_errors_name_the_argument():
    raw = np.zeros(18 * 2, dtype=np.uint8)
    with pytest.raises(ValueError, match="qtype"):
        quant.dequantize(raw, 1000)
    with pytest.raises(ValueError, match="IQ2_XXS"):
        quant.dequantize(np.zeros(66, dtype=np.uint8), Q.IQ2_XXS, n=256)
    with pytest.raises(ValueError, match="too few"):
        quant.dequantize(raw, Q.Q4_0, n=96)
    with pytest.raises(ValueError, match="whole number"):
        quant.matmul(np.zeros((1, 40), np.float32), raw, Q.Q4_0, 1, 40)
    # Trailing bytes mean the shape or type is not the data's: refused by name, never silently ignored.
    with pytest.raises(ValueError, match=r"^data: 37 bytes given, .* takes exactly 36"):
        quant.dequantize(np.zeros(37, dtype=np.uint8), Q.Q4_0)
    with pytest.raises(ValueError, match=r"^data: 36 bytes given"):
        quant.dequantize(raw, Q.Q4_0, n=32)
    with pytest.raises(ValueError, match=r"^w: 54 bytes given"):
        quant.matmul(np.zeros((1, 32), np.float32), np.zeros(54, dtype=np.uint8), Q.Q4_0, 2, 32)
    # Less than one block, or no values, is said as such (not as a bad `out` the caller never passed).
    for size in (1, 33):
        with pytest.raises(ValueError, match=rf"^data: {size} bytes are less than one Q8_0 block \(34 bytes\)"):
            quant.dequantize(np.zeros(size, dtype=np.uint8), Q.Q8_0)
    with pytest.raises(ValueError, match=r"^data: 34 bytes given, but 0 Q8_0 values take exactly 0 \(trailing bytes\)"):
        quant.dequantize(np.zeros(34, dtype=np.uint8), Q.Q8_0, n=0)
    empty = quant.dequantize(np.zeros(0, dtype=np.uint8), Q.Q8_0)  # as gguf.quants for zero blocks
    assert empty.shape == (0,) and empty.dtype == np.float32
    with pytest.raises(ValueError, match=r"^path: expected 'auto', 'int8', 'f32' or 'reference', got 'bogus'"):
        quant.matmul(np.zeros((1, 32), np.float32), raw[:18], Q.Q4_0, 1, 32, path="bogus")


def test_quantize_takes_zero_rows_as_gguf_does_and_names_empty_rows():
    got = quant.quantize(np.zeros((0, 64), np.float32), Q.Q8_0)
    want = quants.quantize(np.zeros((0, 64), np.float32), Q.Q8_0)
    assert got.shape == want.shape == (0, 68) and got.dtype == np.uint8
    with pytest.raises(ValueError, match=r"^x: expected \[rows, cols\] with cols a positive multiple of 32, got "
                                         r"\(2, 0\)"):
        quant.quantize(np.zeros((2, 0), np.float32), Q.Q8_0)
    with pytest.raises(ValueError, match=r"^x: rows of 0 values hold no Q8_0 block"):
        quant._core.quantize(np.zeros((2, 0), np.float32), int(Q.Q8_0), None, np.empty(0, np.uint8))


def _llama_cpp_q8(x):
    """llama.cpp's quantize_row_q8_0 / q8_1 (ggml-quants.c) in float64: blocks of 32, d = amax / 127 rounded to
    f32, q = roundf(x / d) (ties away from zero); returns d * q, the activations its integer dots see."""
    xb = x.reshape(-1, 32)
    d = (np.abs(xb).max(1, keepdims=True) / np.float32(127)).astype(np.float32)
    inv = np.where(d == 0, np.float32(0), np.float32(1) / np.where(d == 0, 1, d)).astype(np.float32)
    v = (xb * inv).astype(np.float32).astype(np.float64)
    return (np.sign(v) * np.floor(np.abs(v) + 0.5) * d).reshape(x.shape)


@pytest.mark.parametrize("qtype", [Q.Q4_0, Q.Q4_1, Q.Q5_1, Q.Q8_0, Q.Q4_K, Q.Q5_K, Q.Q6_K, Q.IQ4_NL, Q.IQ4_XS],
                         ids=lambda t: t.name)
def test_int8_path_is_llama_cpp_q8_math(qtype):
    """The integer path's only error is llama.cpp's 8-bit activation rounding (including the offset formats'
    block sums): it matches float64 products of llama.cpp-quantized activations to f32 rounding, on heavy-tailed
    activations with outlier channels (an LLM hidden state), where that rounding itself moves outputs by ~1%."""
    rng = np.random.default_rng(int(qtype))
    n, k = 64, 1536
    x = rng.standard_t(3, size=(2, k)).astype(np.float32)
    x[:, [5, 700, 1200]] *= 40
    raw = make_weights(qtype, n, k, rng)
    w = quants.dequantize(raw.reshape(n, -1), qtype).astype(np.float64).reshape(n, k)
    sim = _llama_cpp_q8(x.astype(np.float64)) @ w.T
    exact = x.astype(np.float64) @ w.T
    scale = np.abs(exact).max()
    got = quant.matmul(x, raw, qtype, n, k, path="int8")
    assert np.abs(got - sim).max() <= 2e-6 * scale, float(np.abs(got - sim).max() / scale)
    assert np.abs(sim - exact).max() >= 1e-3 * scale  # the rounding under test is visible at this tolerance


@pytest.mark.parametrize("qtype", [Q.Q4_0, Q.Q8_0, Q.Q4_K, Q.Q6_K, Q.Q5_K, Q.IQ4_NL, Q.IQ4_XS, Q.BF16, Q.F16],
                         ids=lambda t: t.name)
def test_prepared_weights_are_the_models_linear_built_once(qtype):
    """quant.prepare builds the Linear quant.matmul's 'auto' path builds per call: the same products, for decode and
    prefill sizes. A copy made at preparation (rows regrouped or aligned, f16 widened) stands in for the caller's
    array, which is left as it was and no longer held; weights read in place keep the array alive."""
    import weakref
    rng = np.random.default_rng(int(qtype) + 50)
    n, k = 48, 512
    raw = make_weights(qtype, n, k, rng)
    kept = raw.copy()
    prepared = quant.prepare(raw, qtype, n, k)
    assert (prepared.n, prepared.k, prepared.qtype) == (n, k, int(qtype))
    for T in (1, 5, 40):
        x = rng.standard_normal((T, k)).astype(np.float32)
        assert np.array_equal(prepared.matmul(x), quant.matmul(x, raw, qtype, n, k)), T
        out = np.full((T, n), np.nan, np.float32)
        assert prepared.matmul(x, out=out) is out
        assert np.array_equal(out, quant.matmul(x, raw, qtype, n, k)), T
    assert np.array_equal(raw, kept)
    if prepared.owned_bytes:
        assert prepared.owned_bytes == prepared.weight_bytes
        assert prepared.replaced_source_bytes == raw.nbytes
    else:
        assert prepared.weight_bytes == raw.nbytes and prepared.replaced_source_bytes == 0
    ref = weakref.ref(raw if raw.base is None else raw.base)  # the array owning the bytes, not a view of it
    x = rng.standard_normal((1, k)).astype(np.float32)
    want = prepared.matmul(x)
    del raw
    assert (ref() is None) == bool(prepared.owned_bytes)  # held only while read in place
    np.full(n * k, 0x55, np.uint8)  # memory a freed array would have given back
    assert np.array_equal(prepared.matmul(x), want)


def test_prepared_weights_name_bad_arguments():
    raw = np.zeros(18 * 2, dtype=np.uint8)
    with pytest.raises(ValueError, match=r"^w: 36 bytes given"):
        quant.prepare(raw, Q.Q4_0, 1, 32)
    with pytest.raises(ValueError, match="^qtype"):
        quant.prepare(raw, 1000, 2, 32)
    prepared = quant.prepare(raw, Q.Q4_0, 2, 32)
    with pytest.raises(ValueError, match=r"^x: expected a contiguous \[T, 32\]"):
        prepared.matmul(np.zeros((1, 40), np.float32))
    with pytest.raises(ValueError, match=r"^out: expected a contiguous \[1, 2\]"):
        prepared.matmul(np.zeros((1, 32), np.float32), out=np.zeros((1, 3), np.float32))


@pytest.mark.parametrize("qtype", [Q.Q4_0, Q.Q4_1, Q.Q8_0, Q.Q4_K, Q.Q6_K, Q.Q5_K, Q.Q5_0, Q.IQ4_NL, Q.IQ4_XS],
                         ids=lambda t: t.name)
def test_int8_prepared_weights_are_the_integer_rows_built_once(qtype):
    """prepare(path='int8') holds the matrix the integer rows read as a model's Linear holds it (regrouped where this
    CPU's rows read that), so its products are bit for bit a decode Linear's under matmul precision 'medium' (T <= 8)
    and each token's the lone token's (T = 40); quant.matmul(path='int8') and the per-call _core.quant_matmul give
    the same bits. The caller's array is left as it was, and kept alive only while it is read in place."""
    import weakref
    rng = np.random.default_rng(int(qtype) + 90)
    n, k = 48, 512
    raw = make_weights(qtype, n, k, rng)
    kept = raw.copy()
    prepared = quant.prepare(raw, qtype, n, k, path="int8")
    assert (prepared.n, prepared.k, prepared.qtype, prepared.path) == (n, k, int(qtype), "int8")
    linear = quant.prepare(raw, qtype, n, k)
    assert prepared.owned_bytes == linear.owned_bytes and prepared.weight_bytes == linear.weight_bytes
    assert prepared.replaced_source_bytes == (raw.nbytes if prepared.owned_bytes else 0)
    for T in (1, 4, 5, 40):
        x = rng.standard_normal((T, k)).astype(np.float32)
        got = prepared.matmul(x)
        per_call = np.empty((T, n), np.float32)
        attnzoo._core.quant_matmul(raw, int(qtype), n, k, x, per_call, "int8")
        assert np.array_equal(got, per_call) and np.array_equal(got, quant.matmul(x, raw, qtype, n, k, "int8")), T
        attnzoo.set_float32_matmul_precision("medium")
        try:
            if T <= 8:
                assert np.array_equal(got, linear.matmul(x)), T
            else:
                assert np.array_equal(got, np.concatenate([linear.matmul(x[t:t + 1]) for t in range(T)])), T
        finally:
            attnzoo.set_float32_matmul_precision("auto")
    assert np.array_equal(raw, kept)
    ref = weakref.ref(raw if raw.base is None else raw.base)
    x = rng.standard_normal((1, k)).astype(np.float32)
    want = prepared.matmul(x)
    del raw, linear
    assert (ref() is None) == bool(prepared.owned_bytes)
    np.full(n * k, 0x55, np.uint8)
    assert np.array_equal(prepared.matmul(x), want)


def test_int8_prepared_weights_name_bad_arguments():
    raw = np.zeros(18 * 2, dtype=np.uint8)
    with pytest.raises(ValueError, match=r"^path: expected 'auto' or 'int8', got 'f32'"):
        quant.prepare(raw, Q.Q4_0, 2, 32, path="f32")
    with pytest.raises(ValueError, match=r"^path: 'int8': no integer kernel for BF16"):
        quant.prepare(np.zeros(2 * 32 * 2, np.uint8), Q.BF16, 2, 32, path="int8")
    with pytest.raises(ValueError, match=r"^path: 'int8': no integer kernel for BF16"):
        quant.matmul(np.zeros((1, 32), np.float32), np.zeros(2 * 32 * 2, np.uint8), Q.BF16, 2, 32, path="int8")
    with pytest.raises(ValueError, match=r"^w: 36 bytes given"):
        quant.prepare(raw, Q.Q4_0, 1, 32, path="int8")
    prepared = quant.prepare(raw, Q.Q4_0, 2, 32, path="int8")
    with pytest.raises(ValueError, match=r"^x: expected a contiguous \[T, 32\]"):
        prepared.matmul(np.zeros((1, 40), np.float32))
    with pytest.raises(ValueError, match=r"^out: expected a contiguous \[1, 2\]"):
        prepared.matmul(np.zeros((1, 32), np.float32), out=np.zeros((1, 3), np.float32))
