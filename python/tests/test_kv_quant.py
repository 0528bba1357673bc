"""Quantized KV caches: write_kv_paged's int8 / fp8 (e4m3) quantization against numpy and torch's float8_e4m3fn
conversion, bit for bit. Model-level checks (logits against a bf16 cache, prefix caching and forks over quantized
blocks) are in test_memory_pool.py, across the architecture families."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import attnzoo  # noqa: E402
from attnzoo.kv_cache import write_kv_paged  # noqa: E402

NUM_BLOCKS, BLOCK, HKV, D = 6, 5, 3, 24


def _rows(seed, n):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, HKV, D)).astype(np.float32)
    x[::4] *= 50.0   # outlier tokens: their own scale must not flatten the others
    x[1::7] *= 1e-3  # small rows reach e4m3's subnormals unless scaled
    x[2, 1] = 0.0    # an all-zero row: scale 0, zeros stored
    return x


def _slots(n, seed):
    return np.random.default_rng(seed).permutation(NUM_BLOCKS * BLOCK)[:n].astype(np.int64)


def _write(kind, k, v, slots):
    dtype = np.int8 if kind == "int8" else np.uint8
    kc = np.zeros((NUM_BLOCKS, BLOCK, HKV, D), dtype)
    vc = np.zeros_like(kc)
    ks = np.full((NUM_BLOCKS, BLOCK, HKV), -1.0, np.float32)
    vs = ks.copy()
    write_kv_paged(k, v, slots, kc, vc, k_scale=ks, v_scale=vs, kv_cache_dtype=kind)
    return kc.reshape(-1, HKV, D), vc.reshape(-1, HKV, D), ks.reshape(-1, HKV), vs.reshape(-1, HKV)


def _expected(kind, x):
    """(bytes, scales) as numpy / torch quantize each [token, head] row: scale = amax / qmax in float32."""
    qmax = np.float32(127.0 if kind == "int8" else 448.0)
    amax = np.abs(x).max(axis=-1)
    scale = (amax / qmax).astype(np.float32)
    safe = np.where(scale > 0, scale, np.float32(1.0))[..., None]
    y = (x / safe).astype(np.float32)
    if kind == "int8":
        q = np.clip(np.rint(y), -127, 127).astype(np.int8)
    else:
        q = torch.from_numpy(y).to(torch.float8_e4m3fn).view(torch.uint8).numpy()
    q[scale == 0] = 0
    return q, scale


@pytest.mark.parametrize("kind", ["int8", "fp8"])
def test_quantization_matches_numpy_and_torch_bit_for_bit(kind):
    k, v = _rows(1, 17), _rows(2, 17)
    slots = _slots(17, 3)
    slots[5] = -1  # padding: skipped
    kc, vc, ks, vs = _write(kind, k, v, slots)
    live = slots >= 0
    for x, cache, scales in ((k, kc, ks), (v, vc, vs)):
        q, scale = _expected(kind, x[live])
        np.testing.assert_array_equal(scales[slots[live]], scale)
        np.testing.assert_array_equal(cache[slots[live]], q)
    untouched = np.setdiff1d(np.arange(NUM_BLOCKS * BLOCK), slots[live])
    assert (ks[untouched] == -1).all() and (kc[untouched] == 0).all()


@pytest.mark.parametrize("kind", ["int8", "fp8"])
def test_bf16_rows_quantize_like_their_float32_values(kind):
    k = torch.from_numpy(_rows(4, 9)).to(torch.bfloat16)
    v = torch.from_numpy(_rows(5, 9)).to(torch.bfloat16)
    slots = _slots(9, 6)
    kc, _, ks, _ = _write(kind, k, v, slots)
    q, scale = _expected(kind, k.float().numpy())
    np.testing.assert_array_equal(ks[slots], scale)
    np.testing.assert_array_equal(kc[slots], q)


def test_dequantized_values_stay_within_half_a_step():
    x = _rows(7, 12)
    slots = _slots(12, 8)
    kc, _, ks, _ = _write("int8", x, x, slots)
    deq = kc[slots].astype(np.float32) * ks[slots][..., None]
    assert np.all(np.abs(deq - x) <= 0.5 * ks[slots][..., None] * (1 + 1e-6))
    kc, _, ks, _ = _write("fp8", x, x, slots)
    e4m3 = torch.from_numpy(kc[slots]).view(torch.float8_e4m3fn).float().numpy()
    deq = e4m3 * ks[slots][..., None]
    assert np.all(np.abs(deq - x) <= np.maximum(np.abs(x) / 16, 2.0 ** -10 * ks[slots][..., None]) * (1 + 1e-5))


def test_bad_quantized_arguments_are_named():
    x = _rows(9, 3)[:2]
    slots = np.array([0, 1])
    kc = np.zeros((NUM_BLOCKS, BLOCK, HKV, D), np.int8)
    ks = np.zeros((NUM_BLOCKS, BLOCK, HKV), np.float32)
    with pytest.raises(ValueError, match="v_scale"):
        write_kv_paged(x, x, slots, kc, kc.copy(), k_scale=ks, kv_cache_dtype="int8")
    with pytest.raises(ValueError, match="k_scale"):
        write_kv_paged(x, x, slots, kc, kc.copy(), k_scale=ks[:, :, :1], v_scale=ks, kv_cache_dtype="int8")
    with pytest.raises(TypeError, match="k_cache"):
        write_kv_paged(x, x, slots, kc, kc.copy(), k_scale=ks, v_scale=ks, kv_cache_dtype="fp8")
    with pytest.raises(ValueError, match="kv_cache_dtype"):
        write_kv_paged(x, x, slots, kc, kc.copy(), k_scale=ks, v_scale=ks, kv_cache_dtype="int4")


def test_cache_spec_counts_quantized_bytes():
    bf16 = attnzoo._core.cache_spec_kv(8, 128, "bfloat16")
    int8 = attnzoo._core.cache_spec_kv(8, 128, "int8")
    fp8 = attnzoo._core.cache_spec_kv(8, 128, "fp8")
    assert bf16.bytes_per_token == 2 * 8 * 128 * 2
    assert int8.bytes_per_token == fp8.bytes_per_token == 2 * 8 * (128 + 4)  # a float32 scale per head
    latent = attnzoo._core.cache_spec_latent(576, "int8")
    assert latent.bytes_per_token == 576 + 4
