"""Quantized KV caches: write_kv_paged's int8 / fp8 (e4m3) quantization against numpy and torch's float8_e4m3fn
conversion, bit for bit; paged prefill (attnzoo.attention over a cache) and MLA (prefill and decode over a latent
cache) on quantized caches against the same calls on the dequantized cache and the double references, and
their argument checks. Model-level checks (logits against a bf16 cache, prefix caching and forks over quantized
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


# ---- attention / MLA over quantized caches ------------------------------------------------------------------

def _dequantize(kind, cache, scale):
    """value = stored * scale in float32, as the kernels dequantize (int8 directly, e4m3 through torch)."""
    stored = cache.astype(np.float32) if kind == "int8" else \
        torch.from_numpy(np.ascontiguousarray(cache)).view(torch.float8_e4m3fn).float().numpy()
    return (stored * scale[..., None]).astype(np.float32)


def _quantized_cache(kind, rows_per_seq, lead, block, heads, dim, table, seed):
    """Writes each sequence's random rows through `table` (None: contiguous, one block of `block` rows per
    sequence) into a quantized cache [lead, block, heads, dim]; returns (cache, scales, dequantized cache)."""
    rng = np.random.default_rng(seed)
    cache = np.zeros((lead, block, heads, dim), np.int8 if kind == "int8" else np.uint8)
    scale = np.full((lead, block, heads), np.float32(np.nan))  # rows never written must never be read
    rows, slots = [], []
    for b, n in enumerate(rows_per_seq):
        x = rng.standard_normal((n, heads, dim)).astype(np.float32)
        x[::5] *= 20.0  # outlier tokens get their own scale
        pos = np.arange(n)
        slots.append(pos + b * block if table is None else table[b, pos // block].astype(np.int64) * block + pos % block)
        rows.append(x)
    write_kv_paged(np.concatenate(rows), np.concatenate(rows), np.concatenate(slots), cache, np.zeros_like(cache),
                   k_scale=scale, v_scale=scale.copy(), kv_cache_dtype=kind)
    written = ~np.isnan(scale)
    return cache, scale, np.where(written[..., None], _dequantize(kind, cache, np.nan_to_num(scale)), 0.0)


def _table(n_seqs, per_seq, num_blocks, seed):
    return np.random.default_rng(seed).permutation(num_blocks)[: n_seqs * per_seq].reshape(n_seqs, per_seq) \
        .astype(np.int32)


LENS, TQ, HQ, HKV_A, DA, BS = [37, 12, 26], 5, 6, 2, 16, 8


def _attention_caches(kind, paged):
    per_seq = -(-max(LENS) // BS)
    table = _table(len(LENS), per_seq, len(LENS) * per_seq + 3, 11) if paged else None
    lead, block = (len(LENS) * per_seq + 3, BS) if paged else (len(LENS), max(LENS) + 2)
    kc, ks, kd = _quantized_cache(kind, LENS, lead, block, HKV_A, DA, table, 12)
    vc, vs, vd = _quantized_cache(kind, LENS, lead, block, HKV_A, DA, table, 13)
    return table, (kc, vc, ks, vs), (kd, vd)


@pytest.mark.parametrize("paged", [True, False])
@pytest.mark.parametrize("kind", ["int8", "fp8"])
def test_attention_over_quantized_cache_equals_dequantized(kind, paged):
    table, (kc, vc, ks, vs), (kd, vd) = _attention_caches(kind, paged)
    q = np.random.default_rng(14).standard_normal((len(LENS), TQ, HQ, DA)).astype(np.float32)
    common = dict(block_table=table, seqused_k=np.array(LENS, np.int32), window=20, softcap=30.0)
    got = attnzoo.attention(q, kc, vc, k_scale=ks, v_scale=vs, kv_cache_dtype=kind, **common)
    want = attnzoo.attention(q, kd, vd, **common)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)  # the same f32 values reach the same tiles
    ref = attnzoo.attention_reference(q, kd, vd, **common)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
    assert np.abs(want).max() > 1.0  # not a vacuous comparison of zeros
    # bf16 queries read the same cache; packed queries (cu_seqlens) take the same rows
    got16 = attnzoo.attention(torch.from_numpy(q).bfloat16(), torch.from_numpy(kc), torch.from_numpy(vc),
                              k_scale=torch.from_numpy(ks), v_scale=torch.from_numpy(vs), kv_cache_dtype=kind,
                              **common)
    want16 = attnzoo.attention(torch.from_numpy(q).bfloat16(), torch.from_numpy(kd), torch.from_numpy(vd), **common)
    assert torch.equal(got16, want16) or (got16.float() - want16.float()).abs().max() <= 1e-2
    cu = np.arange(0, len(LENS) * TQ + 1, TQ, dtype=np.int32)
    packed = attnzoo.attention(q.reshape(-1, HQ, DA), kc, vc, cu_seqlens=cu, k_scale=ks, v_scale=vs,
                               kv_cache_dtype=kind, **common)
    np.testing.assert_allclose(packed.reshape(got.shape), got, rtol=1e-6, atol=1e-6)


MLA = dict(kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16)
L_MLA, H_MLA = 40, 4


def _latent_caches(kind, paged):
    per_seq = -(-max(LENS) // BS)
    table = _table(len(LENS), per_seq, len(LENS) * per_seq + 3, 21) if paged else None
    lead, block = (len(LENS) * per_seq + 3, BS) if paged else (len(LENS), max(LENS) + 2)
    cache, scale, deq = _quantized_cache(kind, LENS, lead, block, 1, L_MLA, table, 22)
    if not paged:  # the contiguous layout without the head axis of 1: [B, S_max, L], scales [B, S_max]
        cache, scale, deq = cache[:, :, 0], scale[:, :, 0], deq[:, :, 0]
    return table, cache, scale, deq


@pytest.mark.parametrize("paged", [True, False])
@pytest.mark.parametrize("kind", ["int8", "fp8"])
def test_mla_over_quantized_latent_cache_equals_dequantized(kind, paged):
    table, cache, scale, deq = _latent_caches(kind, paged)
    rng = np.random.default_rng(23)
    w = (0.2 * rng.standard_normal((H_MLA * 32, 32))).astype(np.float32)
    seqlens = np.array(LENS, np.int32)
    for tq in (2, TQ):
        q = rng.standard_normal((len(LENS), tq, H_MLA, 24)).astype(np.float32)
        common = dict(cache_seqlens=seqlens, block_table=table, **MLA)
        want = attnzoo.mla_prefill(q, deq, w, **common)
        want_decode = attnzoo.mla_decode(q, deq, seqlens, w, block_table=table, **MLA)
        assert np.abs(want).max() > 0.1
        ref = attnzoo.mla.mla_prefill_reference(q, deq, w, **common)
        got = attnzoo.mla_prefill(q, cache, w, k_scale=scale, kv_cache_dtype=kind, **common)
        got_decode = attnzoo.mla_decode(q, cache, seqlens, w, block_table=table, k_scale=scale, kv_cache_dtype=kind,
                                        **MLA)
        # the kernels fold a row's scale into its score / weight rather than into the row: f32 rounding apart
        np.testing.assert_allclose(got, want, rtol=3e-5, atol=1e-5)
        np.testing.assert_allclose(got_decode, want_decode, rtol=3e-5, atol=1e-5)
        for out in (got, got_decode):  # absorbed decode: the same sums reordered
            np.testing.assert_allclose(out, ref, rtol=1e-4, atol=2e-5)


def test_quantized_cache_arguments_are_named():
    table, (kc, vc, ks, vs), (kd, vd) = _attention_caches("int8", True)
    q = np.ones((len(LENS), TQ, HQ, DA), np.float32)
    cache = dict(block_table=table, seqused_k=np.array(LENS, np.int32))
    with pytest.raises(ValueError, match="^k_scale: is required"):
        attnzoo.attention(q, kc, vc, v_scale=vs, kv_cache_dtype="int8", **cache)
    with pytest.raises(ValueError, match="^v_scale: is required"):
        attnzoo.attention(q, kc, vc, k_scale=ks, **cache)  # "auto" reads an int8 array as int8 too
    with pytest.raises(ValueError, match="^k_scale: must be shaped like k_cache"):
        attnzoo.attention(q, kc, vc, k_scale=ks[:, :, :1], v_scale=vs, **cache)
    with pytest.raises(TypeError, match="^v_scale: expected float32"):
        attnzoo.attention(q, kc, vc, k_scale=ks, v_scale=vs.astype(np.float16), **cache)
    with pytest.raises(ValueError, match="^k_scale: is only used with an int8"):  # stray: a float cache
        attnzoo.attention(q, kd, vd, k_scale=ks, **cache)
    with pytest.raises(TypeError, match="^k_cache: kv_cache_dtype 'fp8' needs a uint8"):
        attnzoo.attention(q, kc, vc, k_scale=ks, v_scale=vs, kv_cache_dtype="fp8", **cache)
    with pytest.raises(ValueError, match="^kv_cache_dtype: expected"):
        attnzoo.attention(q, kc, vc, k_scale=ks, v_scale=vs, kv_cache_dtype="int4", **cache)
    plain = np.ones((len(LENS), 40, HKV_A, DA), np.float32)
    for kw, name in ((dict(k_scale=ks), "k_scale"), (dict(v_scale=vs), "v_scale"),
                     (dict(kv_cache_dtype="int8"), "kv_cache_dtype")):
        with pytest.raises(ValueError, match=f"^{name}: is only used with a quantized KV cache \\(pass seqused_k"):
            attnzoo.attention(q, plain, plain, **kw)
    # shapes first, then the NaN scan: a bad scale is reported before a NaN in q
    q[0, 0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="^k_scale"):
        attnzoo.attention(q, kc, vc, k_scale=ks[1:], v_scale=vs, **cache)
    with pytest.raises(ValueError, match="^q: .*(NaN|finite)"):
        attnzoo.attention(q, kc, vc, k_scale=ks, v_scale=vs, **cache)


def test_quantized_latent_cache_arguments_are_named():
    table, cache, scale, deq = _latent_caches("fp8", True)
    seqlens = np.array(LENS, np.int32)
    q = np.ones((len(LENS), 2, H_MLA, 24), np.float32)
    w = np.ones((H_MLA * 32, 32), np.float32)
    kw = dict(block_table=table, **MLA)
    def prefill(c=cache, **a):
        return attnzoo.mla_prefill(q, c, w, cache_seqlens=seqlens, **kw, **a)

    def decode(c=cache, **a):
        return attnzoo.mla_decode(q, c, seqlens, w, **kw, **a)

    for call in (prefill, decode):
        with pytest.raises(ValueError, match="^k_scale: is required"):
            call(kv_cache_dtype="fp8")
        with pytest.raises(ValueError, match="^k_scale: must be shaped like latent_cache"):
            call(k_scale=scale[:, :, 0], kv_cache_dtype="fp8")
        with pytest.raises(ValueError, match="^k_scale: is only used with an int8"):
            call(c=deq, k_scale=scale)
        with pytest.raises(TypeError, match="^latent_cache: kv_cache_dtype 'int8' needs an int8"):
            call(k_scale=scale, kv_cache_dtype="int8")
        with pytest.raises(TypeError, match="v_scale"):  # MLA has one cache: its scale is k_scale
            call(k_scale=scale, v_scale=scale, kv_cache_dtype="fp8")
    latent = np.ones((len(LENS), 40, L_MLA), np.float32)
    with pytest.raises(ValueError, match="^k_scale: is only used with a quantized KV cache \\(pass cache_seqlens"):
        attnzoo.mla_prefill(q, latent, w, k_scale=scale, **MLA)
    with pytest.raises(ValueError, match="^kv_cache_dtype: is only used"):
        attnzoo.mla_prefill(q, latent, w, kv_cache_dtype="fp8", **MLA)
    q[0, 0, 0, 0] = np.nan  # shapes first: the bad scale, not the NaN, is reported
    with pytest.raises(ValueError, match="^k_scale"):
        attnzoo.mla_prefill(q, cache, w, cache_seqlens=seqlens, k_scale=scale[1:], kv_cache_dtype="fp8", **kw)
    with pytest.raises(ValueError, match="^q: "):
        attnzoo.mla_prefill(q, cache, w, cache_seqlens=seqlens, k_scale=scale, kv_cache_dtype="fp8", **kw)
