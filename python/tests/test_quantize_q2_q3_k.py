"""attnzoo.quant.quantize to Q2_K / Q3_K (llama.cpp's searches), against independent references:
  - llama.cpp's quantize_row_q2_K_ref / quantize_row_q3_K_ref and, with an importance matrix, its
    quantize_row_q2_K_impl / quantize_row_q3_K_impl (make_qkx2/qkx3_quants, make_q3_quants, make_qx_quants,
    make_qp_quants) transcribed here to numpy in their f32 operations and order: the same bytes on Gaussian and
    heavy-tailed rows and on edge blocks (zeros, constants, one outlier, f32 subnormals, huge values);
  - llama-quantize itself, where it is built (~/.cache/attnzoo/llama.cpp/build-*/bin; skipped, saying so,
    otherwise): the same F32 GGUF quantized --pure by it and by us has identical tensor bytes, without and with an
    imatrix, for Q2_K / Q3_K and every other searched format (Q4_K, Q5_K, Q6_K, Q4_0 ... Q5_1, IQ4_NL, IQ4_XS);
  - gguf.quants.dequantize decodes our blocks as attnzoo's own decoders do; the error sits between plain
    round-to-nearest's (which the search beats) and Q4_K's (which 2 / 3 bits cannot reach);
  - a real model (SmolLM2-135M, where present) requantized to Q3_K generates, and its perplexity sits between
    Q2_K's and Q4_K's.
Whole-file policy (fallbacks, head / embedding): src/convert/tensor_policy_test.cc and test_quantize.py."""
import glob
import os
import struct
import subprocess

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

from attnzoo import quant  # noqa: E402

T = gguf.GGMLQuantizationType
LOW = [T.Q2_K, T.Q3_K]
f32 = np.float32


def _data(kind, rng, rows=32, cols=1024):
    if kind == "normal":
        return rng.standard_normal((rows, cols)).astype(f32)
    if kind == "heavy":  # Student-t with 2 degrees of freedom: a few huge outliers per block
        return rng.standard_t(2, (rows, cols)).astype(f32)
    if kind == "edges":  # one kind of edge case per row
        x = (rng.standard_normal((12, 512)) * 0.02).astype(f32)
        x[0] = 0                                           # all-zero super-blocks
        x[1, :16] = 0                                      # one zero sub-block among others
        x[2, 40] = 5000.0                                  # one huge outlier
        x[3] = (rng.standard_normal(512) * 1e-39).astype(f32)  # f32 subnormals: below GROUP_MAX_EPS, zeros
        x[4, :256] *= 1e-12                                # scales below f16's range next to normal ones
        x[5] = rng.integers(-4, 4, 512)                    # small integers (ties at .5 after scaling)
        x[6] = np.abs(x[6])                                # one-signed blocks
        x[7] = -np.abs(x[7])
        x[8, ::2] = 7.0                                    # repeated extremes
        x[8, 1::2] = -7.0
        x[9] = 1.0                                         # constant blocks (zero range)
        x[10] *= 1e6                                       # large values, scales still within f16
        x[11] = (rng.standard_normal(512) * 1e9).astype(f32)  # huge: d overflows f16, the fit's sums overflow f32
        return x
    raise ValueError(kind)


# --- llama.cpp's searches in numpy: vectorised over sub-blocks, every f32 operation in its order ------------------

def _nearest(v):
    """nearest_int: the rounded integer left in the mantissa by adding 1.5 * 2^23 (what it gives for NaN, inf and
    huge values included)."""
    with np.errstate(all="ignore"):
        bits = (np.asarray(v, f32) + f32(12582912)).view(np.int32)
    return ((bits & 0x007FFFFF) - 0x00400000).astype(np.int64)


def _seq(terms):
    """A C loop's running f32 sum over the last axis, one term at a time."""
    acc = np.zeros(terms.shape[:-1], f32)
    for i in range(terms.shape[-1]):
        acc = acc + terms[..., i]
    return acc


def _first_absmax(x):
    """The signed value of largest |x| (the first of ties; 0 when all are 0), as the `ax > amax` loops pick it."""
    return np.take_along_axis(x, np.abs(x).argmax(-1)[..., None], -1)[..., 0]


def _make_qkx(x, w, nmax, rmin, rdelta, nstep, mad):
    """make_qkx2_quants / make_qkx3_quants (weights given): -> scale, the_min (= -min), levels."""
    n = x.shape[1]
    lo, hi = x[:, 0].copy(), x[:, 0].copy()
    sum_w = w[:, 0].copy()
    sum_x = sum_w * x[:, 0]
    for i in range(1, n):
        lo = np.where(x[:, i] < lo, x[:, i], lo)
        hi = np.where(x[:, i] > hi, x[:, i], hi)
        sum_w = sum_w + w[:, i]
        sum_x = sum_x + w[:, i] * x[:, i]
    lo = np.where(lo > 0, f32(0), lo)
    flat = hi == lo
    span = np.where(flat, f32(1), hi - lo)
    err_of = (lambda d: np.abs(d)) if mad else (lambda d: d * d)
    with np.errstate(all="ignore"):
        iscale = f32(nmax) / span
        scale = f32(1) / iscale
        L = np.clip(_nearest(iscale[:, None] * (x - lo[:, None])), 0, nmax)
        best = _seq(w * err_of(scale[:, None] * L.astype(f32) + lo[:, None] - x))
        mn = lo.copy()
        for step in range(nstep + 1):
            # The minimum of the best candidate so far is the next candidate's origin (the C loop updates `min`).
            iscale = (f32(rmin) + f32(rdelta) * f32(step) + f32(nmax)) / np.where(flat, f32(1), hi - mn)
            aux = np.clip(_nearest(iscale[:, None] * (x - mn[:, None])), 0, nmax)
            la = aux.astype(f32)
            sum_l, sum_l2, sum_xl = _seq(w * la), _seq(w * la * la), _seq(w * la * x)
            D = sum_w * sum_l2 - sum_l * sum_l
            this_scale = (sum_w * sum_xl - sum_x * sum_l) / D
            this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D
            positive = this_min > 0
            this_min = np.where(positive, f32(0), this_min)
            this_scale = np.where(positive, sum_xl / sum_l2, this_scale)
            cur = _seq(w * err_of(this_scale[:, None] * la + this_min[:, None] - x))
            better = (D > 0) & (cur < best)
            L = np.where(better[:, None], aux, L)
            best = np.where(better, cur, best)
            scale = np.where(better, this_scale, scale)
            mn = np.where(better, this_min, mn)
    return np.where(flat, f32(0), scale), np.where(flat, -lo, -mn), np.where(flat[:, None], 0, L)


def _descend(x, w, L, sumlx, suml2, lo, hi, rest_first):
    """The coordinate descent of make_qp_quants (rest_first) and make_q3_quants, on every row at once: a row stops
    after its first pass without a change, as the C loop breaks."""
    active = np.ones(len(x), bool)
    with np.errstate(all="ignore"):
        for _ in range(5):
            changed = np.zeros(len(x), bool)
            for i in range(x.shape[1]):
                wi, xi, li = w[:, i], x[:, i], L[:, i].astype(f32)
                slx = sumlx - wi * xi * li
                sl2 = suml2 - wi * li * li
                go = active & (slx > 0)
                if rest_first:
                    go &= sl2 > 0
                new_l = np.clip(_nearest(xi * sl2 / slx), lo, hi)
                go &= new_l != L[:, i]
                nl = new_l.astype(f32)
                slx = slx + wi * xi * nl
                sl2 = sl2 + wi * nl * nl
                keep = go & (slx * slx * suml2 > sumlx * sumlx * sl2)
                if not rest_first:
                    keep &= sl2 > 0
                L[:, i] = np.where(keep, new_l, L[:, i])
                sumlx = np.where(keep, slx, sumlx)
                suml2 = np.where(keep, sl2, suml2)
                changed |= keep
            active &= changed
    return sumlx, suml2


def _make_q3(x, nmax):
    """make_q3_quants(do_rmse): weights x^2, levels refined one at a time -> scale, levels + nmax."""
    mx = _first_absmax(x)
    zero = np.abs(mx) < f32(1e-15)
    mx = np.where(zero, f32(1), mx)
    w = x * x
    iscale = f32(-nmax) / mx
    L = np.clip(_nearest(iscale[:, None] * x), -nmax, nmax - 1)
    sumlx, suml2 = _seq(w * x * L.astype(f32)), _seq(w * L.astype(f32) * L.astype(f32))
    sumlx, suml2 = _descend(x, w, L, sumlx, suml2, -nmax, nmax - 1, rest_first=False)
    with np.errstate(all="ignore"):
        scale = np.where(suml2 > 0, sumlx / suml2, f32(0))
    return np.where(zero, f32(0), scale), np.where(zero[:, None], 0, L + nmax)


def _make_qx(x, w, nmax):
    """make_qx_quants(rmse_type 1, weights given) -> scale, levels + nmax."""
    mx = _first_absmax(x)
    zero = np.abs(mx) < f32(1e-15)
    mx = np.where(zero, f32(1), mx)

    def fit(iscale):
        l = np.clip(_nearest(iscale[:, None] * x), -nmax, nmax - 1)
        lf = l.astype(f32)
        return l, _seq(w * x * lf), _seq(w * lf * lf)
    with np.errstate(all="ignore"):
        L, sumlx, suml2 = fit(f32(-nmax) / mx)
        scale = np.where(suml2 != 0, sumlx / suml2, f32(0))
        best = scale * sumlx
        for step in range(-9, 10):
            if step == 0:
                continue
            l, sumlx, suml2 = fit(-(f32(nmax) + f32(0.1) * f32(step)) / mx)
            better = (suml2 > 0) & (sumlx * sumlx > best * suml2)
            L = np.where(better[:, None], l, L)
            scale = np.where(better, sumlx / suml2, scale)
            best = np.where(better, scale * sumlx, best)
    return np.where(zero, f32(0), scale), np.where(zero[:, None], 0, L + nmax)


def _make_qp(x, w, nmax):
    """make_qp_quants: non-negative values (sub-block scales) -> scale, levels in [0, nmax]."""
    mx = np.maximum(x.max(-1), f32(0))
    zero = mx < f32(1e-15)
    mx = np.where(zero, f32(1), mx)

    def mse_of(iscale, clamp):
        l = _nearest(iscale[:, None] * x)
        if clamp:
            l = np.minimum(nmax, l)
        diff = x - (f32(1) / iscale)[:, None] * l.astype(f32)
        return _seq(w * diff * diff)
    with np.errstate(all="ignore"):
        iscale = f32(nmax) / mx
        best = mse_of(iscale, False)
        for step in range(-4, 5):
            if step == 0:
                continue
            candidate = (f32(0.1) * f32(step) + f32(nmax)) / mx
            mse = mse_of(candidate, True)
            iscale = np.where(mse < best, candidate, iscale)
            best = np.where(mse < best, mse, best)
        L = np.minimum(nmax, _nearest(iscale[:, None] * x))
        lf = L.astype(f32)
        sumlx, suml2 = _descend(x, w, L, _seq(w * x * lf), _seq(w * lf * lf), -(1 << 40), nmax, rest_first=True)
        scale = np.where(suml2 > 0, sumlx / suml2, f32(0))
    return np.where(zero, f32(0), scale), np.where(zero[:, None], 0, L)


def _half(v):
    with np.errstate(all="ignore"):
        h = np.asarray(v, f32).astype(np.float16)
    return h.view(np.uint8).reshape(-1, 2), h.astype(f32)


def _pack_2bit(L):
    """qs: byte l of each 32-byte half holds the 2-bit levels of elements l, l + 32, l + 64, l + 96."""
    q = (L & 3).reshape(len(L), 2, 4, 32).astype(np.uint8)
    return (q[:, :, 0] | (q[:, :, 1] << 2) | (q[:, :, 2] << 4) | (q[:, :, 3] << 6)).reshape(len(L), 64)


def _importance_weights(sb, importance, rows, spread):
    sigma2 = _seq(sb * sb)
    sigma2 = sigma2 / f32(256) if spread == 1 else f32(spread) * sigma2 / f32(256)
    qw = np.tile(importance.reshape(-1, 256), (rows, 1))
    with np.errstate(all="ignore"):
        w = qw * np.sqrt(sigma2[:, None] + sb * sb)
    return w.reshape(-1, 16), _seq(w.reshape(len(sb), 16, 16))


def _llama_q2_k(x, importance=None):
    rows = len(x)
    sb = x.reshape(-1, 256)
    S = len(sb)
    sub = sb.reshape(-1, 16)
    with np.errstate(all="ignore"):
        if importance is None:
            scales, mins, L = _make_qkx(sub, np.abs(sub), 3, -0.5, 0.1, 15, mad=True)
            scales, mins = scales.reshape(S, 16), mins.reshape(S, 16)
            max_scale = np.maximum(scales.max(1), f32(0))
            max_min = np.maximum(mins.max(1), f32(0))
            has_s, has_m = max_scale > 0, max_min > 0
            inv_s = f32(15) / np.where(has_s, max_scale, f32(1))
            inv_m = f32(15) / np.where(has_m, max_min, f32(1))
            packed = np.where(has_s[:, None], _nearest(inv_s[:, None] * scales), 0) & 0xFF
            packed = (packed | np.where(has_m[:, None], _nearest(inv_m[:, None] * mins) << 4, 0)) & 0xFF
            d_bytes, d16 = _half(np.where(has_s, max_scale / f32(15), f32(0)))
            m_bytes, m16 = _half(np.where(has_m, max_min / f32(15), f32(0)))
        else:
            w, sw = _importance_weights(sb, importance, rows, 1)
            scales, mins, L = _make_qkx(sub, w, 3, -0.9, 0.05, 36, mad=False)
            dm, ls = _make_qp(scales.reshape(S, 16), sw, 15)
            mm, lm = _make_qp(mins.reshape(S, 16), sw, 15)
            packed = (ls | (lm << 4)) & 0xFF
            d_bytes, d16 = _half(dm)
            m_bytes, m16 = _half(mm)
        L = L.reshape(S, 16, 16)
        d = d16[:, None] * (packed & 0xF).astype(f32)
        dm = m16[:, None] * (packed >> 4).astype(f32)
        requant = np.clip(_nearest((sb.reshape(S, 16, 16) + dm[..., None]) / d[..., None]), 0, 3)
        L = np.where((d != 0)[..., None], requant, L).reshape(S, 256)
    out = np.concatenate([packed.astype(np.uint8), _pack_2bit(L), d_bytes, m_bytes], 1)
    return out.reshape(rows, -1)


def _llama_q3_k(x, importance=None):
    rows = len(x)
    sb = x.reshape(-1, 256)
    S = len(sb)
    sub = sb.reshape(-1, 16)
    with np.errstate(all="ignore"):
        if importance is None:
            scales, L = _make_q3(sub, 4)
            scales = scales.reshape(S, 16)
            max_scale = _first_absmax(scales)
            nz = max_scale != 0
            iscale = f32(-32) / np.where(nz, max_scale, f32(1))
            l = ((_nearest(iscale[:, None] * scales) + 128) & 0xFF) - 128  # stored in an int8 first
            ls = np.where(nz[:, None], np.clip(l, -32, 31) + 32, 0)
            d_bytes, d16 = _half(np.where(nz, f32(1) / iscale, f32(0)))
        else:
            w, sw = _importance_weights(sb, importance, rows, 2)
            scales, L = _make_qx(sub, w, 4)
            d_block, ls = _make_qx(scales.reshape(S, 16), sw, 32)
            d_bytes, d16 = _half(d_block)
        L = L.reshape(S, 16, 16)
        d = d16[:, None] * (ls - 32).astype(f32)
        requant = np.clip(_nearest(sb.reshape(S, 16, 16) / d[..., None]), -4, 3) + 4
        L = np.where((d != 0)[..., None], requant, L).reshape(S, 256)
    high = (L > 3).reshape(S, 8, 32).astype(np.uint8)
    hmask = sum(high[:, k] << k for k in range(8)).astype(np.uint8)
    ls = ls.astype(np.uint8)
    scale_bytes = np.concatenate([(ls[:, :8] & 0xF) | ((ls[:, 8:] & 0xF) << 4),
                                  sum((ls[:, 4 * k:4 * k + 4] >> 4) << (2 * k) for k in range(4)).astype(np.uint8)], 1)
    out = np.concatenate([hmask, _pack_2bit(L - 4 * (L > 3)), scale_bytes, d_bytes], 1)
    return out.reshape(rows, -1)


LLAMA = {T.Q2_K: _llama_q2_k, T.Q3_K: _llama_q3_k}


def _first_difference(got, want):
    bad = np.argwhere(got != want)
    return "" if bad.size == 0 else f"first differing byte at (row, byte) {tuple(bad[0])} of {len(bad)}"


@pytest.mark.parametrize("qtype", LOW, ids=lambda t: t.name)
@pytest.mark.parametrize("kind", ["normal", "heavy", "edges"])
@pytest.mark.parametrize("weighted", [False, True], ids=["plain", "importance"])
def test_bytes_of_llama_cpps_operations(qtype, kind, weighted):
    rng = np.random.default_rng(41 + int(qtype) + len(kind))
    x = _data(kind, rng)
    importance = None
    if weighted:  # channels differing by ~e^4, a few without any weight
        importance = np.exp(rng.standard_normal(x.shape[1]) * 2).astype(f32)
        importance[rng.integers(0, x.shape[1], 8)] = 0
    got = quant.quantize(x, qtype, importance=importance)
    want = LLAMA[qtype](x, importance)
    assert got.shape == want.shape
    assert not _first_difference(got, want), _first_difference(got, want)


# --- llama-quantize itself --------------------------------------------------------------------------------------

def _llama_quantize():
    found = sorted(glob.glob(os.path.expanduser("~/.cache/attnzoo/llama.cpp/build-*/bin/llama-quantize")))
    return found[-1] if found else None


@pytest.fixture(scope="module")
def f32_gguf(tmp_path_factory):
    """(llama-quantize, a tiny Llama's F32 GGUF whose matrices are all whole super-blocks, an importance vector per
    matrix, the same as llama.cpp's legacy imatrix file)."""
    tool = _llama_quantize()
    if tool is None:
        pytest.skip("llama-quantize is not built under ~/.cache/attnzoo/llama.cpp/build-*/bin "
                    "(scripts/setup.sh builds it): the byte comparison with llama.cpp did not run")
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import model_checks as checks
    from test_quantize import _cli, _randomize, _tokenizer
    config = transformers.LlamaConfig(vocab_size=512, max_position_embeddings=128, rms_norm_eps=1e-5,
                                      initializer_range=0.05, hidden_size=256, intermediate_size=768,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                      tie_word_embeddings=False)
    directory = tmp_path_factory.mktemp("llama-quantize")
    checks.save_random_model("llama", config, str(directory / "hf"), _randomize, attn_implementation="eager")
    _tokenizer("llama").save_pretrained(str(directory / "hf"))
    # our own F32 file, fed to llama-quantize as it is: 32-byte alignment and no general.alignment key (a key of 64,
    # which llama-quantize copies while padding its output to 32, left that output unreadable)
    r = _cli("quantize", "-m", str(directory / "hf"), "-o", str(directory / "f32.gguf"), "--type", "F32")
    assert r.returncode == 0, r.stderr
    rng = np.random.default_rng(5)
    importance = {t.name: np.exp(rng.standard_normal(int(t.shape[0]))).astype(f32)
                  for t in gguf.GGUFReader(str(directory / "f32.gguf")).tensors if len(t.shape) == 2}
    # llama.cpp's legacy imatrix: entries of (name, ncall, values); llama-quantize uses values / ncall (ncall 1).
    with open(directory / "imatrix.dat", "wb") as f:
        f.write(struct.pack("<i", len(importance)))
        for name, values in importance.items():
            f.write(struct.pack("<i", len(name)) + name.encode() + struct.pack("<ii", 1, len(values)))
            f.write(values.tobytes())
    return tool, directory, importance


# Every searched format: llama.cpp's searches share their pieces, and all of them give llama-quantize's bytes.
SEARCHED = ["Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "IQ4_XS"]


@pytest.mark.parametrize("qtype", SEARCHED)
@pytest.mark.parametrize("weighted", [False, True], ids=["plain", "imatrix"])
def test_llama_quantize_writes_our_bytes(f32_gguf, qtype, weighted):
    """The F32 GGUF quantized by llama-quantize --pure (with --imatrix: the importance vectors) and by attnzoo:
    without importance `attnzoo quantize` on the file, the head and embedding in the main type too; with it
    attnzoo.quant.quantize of each matrix with its vector (the call --calibration makes). Every matrix (16, all in
    qtype) has the same bytes; the norms stay F32 in both."""
    from test_quantize import _cli
    tool, directory, importance = f32_gguf
    theirs, ours = directory / f"llama-{qtype}-{weighted}.gguf", directory / f"ours-{qtype}.gguf"
    extra = ["--imatrix", str(directory / "imatrix.dat")] if weighted else []
    r = subprocess.run([tool, "--pure", *extra, str(directory / "f32.gguf"), str(theirs), qtype, "2"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    source = {t.name: t for t in gguf.GGUFReader(str(directory / "f32.gguf")).tensors}
    if not weighted:
        r = _cli("quantize", "-m", str(directory / "f32.gguf"), "-o", str(ours), "--type", qtype, "--pure")
        assert r.returncode == 0, r.stderr
        mine = {t.name: np.asarray(t.data).view(np.uint8).reshape(-1) for t in gguf.GGUFReader(str(ours)).tensors}
    compared = 0
    for t in gguf.GGUFReader(str(theirs)).tensors:
        got = np.asarray(t.data).view(np.uint8).reshape(-1)
        if t.tensor_type.name != qtype:
            assert t.tensor_type == T.F32 and len(t.shape) == 1, t.name
            continue
        if weighted:
            values = np.asarray(source[t.name].data, f32).reshape([int(n) for n in reversed(t.shape)])
            want = quant.quantize(values, t.tensor_type, importance=importance[t.name]).reshape(-1)
        else:
            want = mine[t.name]
        assert got.size == want.size and np.array_equal(got, want), f"{t.name}: {np.count_nonzero(got != want)} bytes"
        compared += 1
    assert compared == 16  # embedding, head and both blocks' seven matrices


# --- decoding and error ---------------------------------------------------------------------------------------

def _rel(y, x):
    return float(np.sqrt(np.mean((y.astype(np.float64) - x) ** 2) / np.mean(x.astype(np.float64) ** 2)))


def _decode(blocks, qtype, shape):
    got = gguf.quants.dequantize(blocks, qtype).reshape(shape)
    np.testing.assert_array_equal(quant.dequantize(blocks, qtype).reshape(shape), got)
    np.testing.assert_array_equal(quant.dequantize(blocks, qtype, reference=True).reshape(shape), got)
    return got


@pytest.mark.parametrize("qtype", LOW, ids=lambda t: t.name)
@pytest.mark.parametrize("kind", ["normal", "heavy", "edges"])
def test_gguf_decodes_our_blocks_as_we_do(qtype, kind):
    rng = np.random.default_rng(int(qtype) * 7 + len(kind))
    x = _data(kind, rng)
    with np.errstate(all="ignore"):  # the huge row decodes through an infinite d
        got = _decode(quant.quantize(x, qtype), qtype, x.shape)
    if kind == "edges":
        assert np.all(got[0] == 0) and np.all(got[1, :16] == 0) and np.all(got[3] == 0)
        np.testing.assert_allclose(got[9], 1.0, rtol=0.02)        # constant blocks
        # Integers -4..3: Q2_K's four levels are 7/3 apart (half a step of error); Q3_K holds a sub-block with a -4
        # exactly, one without puts its largest |x| (3) on -4: steps of 3/4, as llama.cpp's
        np.testing.assert_allclose(got[5], x[5], atol={T.Q2_K: 1.2, T.Q3_K: 0.76}[qtype])
        assert abs(got[2, 40] - 5000.0) < 5000.0 * 0.02           # the outlier sets its sub-block's scale
        for r in (6, 7, 10):
            assert np.all(np.isfinite(got[r])) and _rel(got[r], x[r]) < 0.5, r


def _plain_rtn(x, qtype):
    """Round-to-nearest in the Q2_K / Q3_K layouts (numpy, float64, decoded values): each sub-block of 16 with
    scale (max - min) / 3 and min (Q2_K: 4-bit against their maxima) or scale amax / 4 (Q3_K: 6-bit, signed); the
    baseline llama.cpp's searches are meant to beat."""
    b = x.reshape(-1, 16, 16).astype(np.float64)
    if qtype == T.Q3_K:
        s = np.take_along_axis(b, np.abs(b).argmax(-1)[..., None], -1) / -4
        d = np.abs(s).max(1, keepdims=True) / 32
        s = np.clip(np.round(s / np.where(d > 0, d, 1)), -32, 31) * d
        return (np.clip(np.round(b / np.where(s != 0, s, 1)), -4, 3) * s).reshape(x.shape)
    lo = np.minimum(b.min(-1, keepdims=True), 0)
    scale = (b.max(-1, keepdims=True) - lo) / 3
    d, m = scale.max(1, keepdims=True) / 15, (-lo).max(1, keepdims=True) / 15
    s = np.round(scale / np.where(d > 0, d, 1)) * d
    mn = np.round(-lo / np.where(m > 0, m, 1)) * m
    return (np.clip(np.round((b + mn) / np.where(s > 0, s, 1)), 0, 3) * s - mn).reshape(x.shape)


# Measured on 64 x 1024 rows, seeds 21-24 (relative RMS error ours / plain rounding's; x^2-weighted squared error
# ours / plain's; ours / Q4_K's): Gaussian Q2_K 0.900-0.908, -, 4.13-4.17; Q3_K 0.974-0.976, 0.797-0.804,
# 2.11-2.12; Student-t(2) Q2_K 0.907-0.953, -, 3.45-3.70; Q3_K 0.991-0.995, 0.045-0.078, 1.75-1.79. Q3_K's search
# minimises the x^2-weighted error (large values matter most): it must win there clearly and not lose on the plain
# one; Q2_K's (|x|-weighted absolute error) wins on the plain one.
PLAIN_BOUND = {(T.Q2_K, "normal"): 0.93, (T.Q2_K, "heavy"): 0.97, (T.Q3_K, "normal"): 0.985,
               (T.Q3_K, "heavy"): 1.0}
WEIGHTED_BOUND = {"normal": 0.85, "heavy": 0.2}
Q4_K_RATIO = {T.Q2_K: (3.0, 5.0), T.Q3_K: (1.5, 2.5)}  # 2.625 / 3.4375 bits a weight against 4.5


@pytest.mark.parametrize("qtype", LOW, ids=lambda t: t.name)
@pytest.mark.parametrize("kind", ["normal", "heavy"])
def test_error_between_plain_rounding_and_q4_k(qtype, kind):
    x = _data(kind, np.random.default_rng(21), rows=64)
    got = _decode(quant.quantize(x, qtype), qtype, x.shape)
    q4_k = _decode(quant.quantize(x, T.Q4_K), T.Q4_K, x.shape)
    plain = _plain_rtn(x, qtype)
    assert _rel(got, x) < PLAIN_BOUND[qtype, kind] * _rel(plain, x), (_rel(got, x), _rel(plain, x))
    if qtype == T.Q3_K:
        weighted = lambda y: float(np.sum(x.astype(np.float64) ** 2 * (y - x) ** 2))  # noqa: E731
        assert weighted(got) < WEIGHTED_BOUND[kind] * weighted(plain), (weighted(got), weighted(plain))
    low, high = Q4_K_RATIO[qtype]
    assert low * _rel(q4_k, x) < _rel(got, x) < high * _rel(q4_k, x), (_rel(got, x), _rel(q4_k, x))


@pytest.mark.parametrize("qtype", LOW, ids=lambda t: t.name)
def test_importance_lowers_the_weighted_error(qtype):
    """llama.cpp's imatrix: the error that matters is sum_c importance_c (w - w_q)^2; the weighted search must
    lower it."""
    rng = np.random.default_rng(11)
    x = rng.standard_t(4, (64, 256)).astype(f32)
    importance = np.exp(rng.standard_normal(256) * 2).astype(f32)
    err = lambda b: np.sum(importance * (_decode(b, qtype, x.shape) - x) ** 2)  # noqa: E731
    plain, weighted = err(quant.quantize(x, qtype)), err(quant.quantize(x, qtype, importance=importance))
    assert weighted < 0.9 * plain, (weighted, plain)


def test_bad_input_is_refused_by_name():
    x = np.zeros((2, 256), np.float32)
    x[1, 3] = np.nan
    with pytest.raises(ValueError, match=r"x: value at row 1, column 3 is nan"):
        quant.quantize(x, T.Q2_K)
    with pytest.raises(ValueError, match=r"x: rows of 128 values are not a whole number of Q3_K blocks of 256"):
        quant._core.quantize(np.zeros((1, 128), np.float32), int(T.Q3_K), None, np.empty(0, np.uint8))
    importance = np.ones(256, np.float32)
    importance[7] = np.inf
    with pytest.raises(ValueError, match=r"^importance: input channel 7 is inf"):
        quant.quantize(np.zeros((1, 256), np.float32), T.Q3_K, importance=importance)


# --- a real model -----------------------------------------------------------------------------------------------

def test_smollm2_q3_k_generates_and_its_perplexity_sits_between_q2_k_and_q4_k(tmp_path):
    """SmolLM2-135M-Instruct (Q4_1, requantized with --allow-requantize): its rows of 576 are not whole super-blocks,
    so Q2_K / Q3_K / Q4_K reach ffn_down (rows of 1536) and the other matrices fall back (Q4_0, Q4_0, Q5_0), as
    llama-quantize's do. Perplexity on the Sherlock Holmes text, 2 x 128 tokens, measured: Q4_1 source 13.4, Q4_K
    16.2, Q3_K 18.4, Q2_K 298 (a 2-bit ffn_down is what llama.cpp's own Q2_K mixture avoids). Greedy, the source,
    Q4_K and Q3_K files all answer " Paris." to "The capital of France is"; Q2_K's does not."""
    from test_gguf_reader import SMOLLM2
    from test_quantize import _cli
    from attnzoo import perplexity as ppl_module
    from attnzoo.model import Model
    if not os.path.exists(SMOLLM2):
        pytest.skip(f"{SMOLLM2} is missing: run scripts/setup.sh")
    try:
        text_path = ppl_module.default_text()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    with open(text_path, encoding="utf-8", newline="") as f:
        text = f.read()
    ppl = {}
    for qtype in ("Q2_K", "Q3_K", "Q4_K"):
        out = tmp_path / f"smollm2-{qtype}.gguf"
        # every matrix in the one type (llama-quantize's names alias these to mixtures), the head and embedding Q6_K
        r = _cli("quantize", "-m", SMOLLM2, "-o", str(out), "--type", qtype, "--pure", "--output-tensor-type", "Q6_K",
                 "--token-embedding-type", "Q6_K", "--allow-requantize")
        assert r.returncode == 0, r.stderr
        assert f"30 {qtype}" in r.stdout, r.stdout  # every layer's ffn_down
        model = Model.load(str(out))
        ppl[qtype] = model.perplexity(text, n_ctx=128, n_chunks=2).ppl
        if qtype == "Q3_K":
            words = model.generate("The capital of France is", max_new_tokens=8, do_sample=False)
            assert words.startswith(" Paris"), words
    source = Model.load(SMOLLM2).perplexity(text, n_ctx=128, n_chunks=2).ppl
    assert source < ppl["Q4_K"] < ppl["Q3_K"] < ppl["Q2_K"], (source, ppl)
    assert ppl["Q3_K"] < 1.6 * source, (source, ppl)
