"""The argument checker of attnzoo.attention: every bad input is a ValueError / TypeError whose message starts
with the argument's name, and a seeded fuzz over valid and invalid argument combinations never crashes."""
import time

import numpy as np
import pytest
import torch

import attnzoo
from conftest import ALL_TARGETS


pytestmark = pytest.mark.usefixtures("torch_one_thread")

def arrays(B=1, Tq=4, Tk=4, Hq=2, Hkv=2, D=8, Dv=None, dtype=np.float32):
    rng = np.random.default_rng(0)
    return (rng.standard_normal((B, Tq, Hq, D)).astype(dtype), rng.standard_normal((B, Tk, Hkv, D)).astype(dtype),
            rng.standard_normal((B, Tk, Hkv, Dv or D)).astype(dtype))


def packed(total=6, H=2, D=8):
    q, k, v = arrays(1, total, total, H, H, D)
    return q[0], k[0], v[0]


def replace(qkv, index, value):
    out = list(qkv)
    out[index] = value
    return tuple(out)


def nan_at(x):
    x = x.copy()
    x.flat[x.size // 2] = np.nan
    return x


# (id, callable, exception, argument name the message must start with)
ERROR_CASES = [
    # ranks
    ("q_rank3_unpacked", lambda: attnzoo.attention(*replace(arrays(), 0, arrays()[0][0])), ValueError, "q"),
    ("k_rank5", lambda: attnzoo.attention(*replace(arrays(), 1, arrays()[1][None])), ValueError, "k"),
    ("v_rank2", lambda: attnzoo.attention(*replace(arrays(), 2, arrays()[2][0, 0])), ValueError, "v"),
    ("packed_batch_2", lambda: attnzoo.attention(*arrays(B=2), cu_seqlens=np.array([0, 4])), ValueError, "q"),
    ("q_rank7", lambda: attnzoo.attention(*replace(arrays(), 0, np.zeros((1,) * 7, np.float32))), ValueError, "q"),
    # heads and head dims
    ("v_heads_differ_from_k", lambda: attnzoo.attention(*replace(arrays(Hq=4), 2, arrays(Hkv=1)[2])),
     ValueError, "v"),
    ("hq_not_multiple_of_hkv", lambda: attnzoo.attention(*arrays(Hq=3, Hkv=2)), ValueError, "q"),
    ("head_dim_1025", lambda: attnzoo.attention(*arrays(D=1025)), ValueError, "q"),
    ("value_head_dim_1025", lambda: attnzoo.attention(*arrays(Dv=1025)), ValueError, "v"),
    ("head_dim_0", lambda: attnzoo.attention(*arrays(D=0)), ValueError, "q"),
    ("k_head_dim_differs", lambda: attnzoo.attention(*replace(arrays(), 1, arrays(D=6)[1])), ValueError, "k"),
    ("q_more_steps_than_k", lambda: attnzoo.attention(*arrays(Tq=5, Tk=4)), ValueError, "q"),
    ("batch_differs", lambda: attnzoo.attention(*replace(arrays(B=2), 0, arrays(B=1)[0])), ValueError, "k"),
    ("v_time_differs", lambda: attnzoo.attention(*replace(arrays(), 2, arrays(Tk=5)[2])), ValueError, "v"),
    # dtypes
    ("q_int32", lambda: attnzoo.attention(*replace(arrays(), 0, arrays()[0].astype(np.int32))), TypeError, "q"),
    ("k_int64_torch", lambda: attnzoo.attention(*replace(arrays(), 1, torch.ones(1, 4, 2, 8, dtype=torch.int64))),
     TypeError, "k"),
    ("v_float64", lambda: attnzoo.attention(*replace(arrays(), 2, arrays()[2].astype(np.float64))), TypeError, "v"),
    ("k_v_dtypes_differ", lambda: attnzoo.attention(*replace(arrays(), 2, arrays()[2].astype(np.float16))),
     ValueError, "v"),
    ("q_not_an_array", lambda: attnzoo.attention("q", *arrays()[1:]), TypeError, "q"),
    ("q_on_meta_device", lambda: attnzoo.attention(torch.empty(1, 4, 2, 8, device="meta"), *arrays()[1:]),
     ValueError, "q"),
    ("cu_seqlens_float", lambda: attnzoo.attention(*packed(), cu_seqlens=np.array([0.0, 6.0])), TypeError,
     "cu_seqlens"),
    ("cu_seqlens_torch_float", lambda: attnzoo.attention(*packed(), cu_seqlens=torch.tensor([0.0, 6.0])), TypeError,
     "cu_seqlens"),
    # layout
    ("q_head_dim_strided", lambda: attnzoo.attention(*replace(arrays(), 0, arrays(D=16)[0][..., ::2])), ValueError,
     "q"),
    ("k_negative_stride", lambda: attnzoo.attention(*replace(arrays(), 1, arrays()[1][:, ::-1])), ValueError, "k"),
    ("out_wrong_shape", lambda: attnzoo.attention(*arrays(), out=np.zeros((1, 4, 2, 7), np.float32)), ValueError,
     "out"),
    ("out_int32", lambda: attnzoo.attention(*arrays(), out=np.zeros((1, 4, 2, 8), np.int32)), TypeError, "out"),
    # cu_seqlens
    ("cu_seqlens_not_from_0", lambda: attnzoo.attention(*packed(), cu_seqlens=np.array([1, 6])), ValueError,
     "cu_seqlens"),
    ("cu_seqlens_decreasing", lambda: attnzoo.attention(*packed(), cu_seqlens=np.array([0, 4, 3, 6])), ValueError,
     "cu_seqlens"),
    ("cu_seqlens_last_not_total", lambda: attnzoo.attention(*packed(), cu_seqlens=np.array([0, 2, 5])), ValueError,
     "cu_seqlens"),
    ("cu_seqlens_past_total", lambda: attnzoo.attention(*packed(), cu_seqlens=np.array([0, 2, 7])), ValueError,
     "cu_seqlens"),
    ("cu_seqlens_one_entry", lambda: attnzoo.attention(*packed(), cu_seqlens=np.array([0])), ValueError,
     "cu_seqlens"),
    ("cu_seqlens_2d", lambda: attnzoo.attention(*packed(), cu_seqlens=np.array([[0, 6]])), ValueError, "cu_seqlens"),
    ("cu_seqlens_k_last_not_total", lambda: attnzoo.attention(
        *packed(), cu_seqlens=np.array([0, 3, 6]), cu_seqlens_k=np.array([0, 3, 7])), ValueError, "cu_seqlens_k"),
    ("cu_seqlens_k_decreasing", lambda: attnzoo.attention(
        *packed(), cu_seqlens=np.array([0, 0, 6]), cu_seqlens_k=np.array([0, 6, 5])),
     ValueError, "cu_seqlens_k"),
    ("cu_seqlens_k_wrong_length", lambda: attnzoo.attention(
        *packed(), cu_seqlens=np.array([0, 3, 6]), cu_seqlens_k=np.array([0, 6])), ValueError, "cu_seqlens_k"),
    ("cu_seqlens_k_without_cu_seqlens", lambda: attnzoo.attention(*arrays(), cu_seqlens_k=np.array([0, 4])),
     ValueError, "cu_seqlens_k"),
    ("packed_more_queries_than_keys", lambda: attnzoo.attention(
        *packed(), cu_seqlens=np.array([0, 4, 6]), cu_seqlens_k=np.array([0, 3, 6])), ValueError, "cu_seqlens"),
    # options
    ("window_0", lambda: attnzoo.attention(*arrays(), window=0), ValueError, "window"),
    ("window_negative", lambda: attnzoo.attention(*arrays(), window=-3), ValueError, "window"),
    ("window_float", lambda: attnzoo.attention(*arrays(), window=2.5), TypeError, "window"),
    ("window_bool", lambda: attnzoo.attention(*arrays(), window=True), TypeError, "window"),
    ("window_past_int64", lambda: attnzoo.attention(*arrays(), window=2 ** 63), ValueError, "window"),
    ("window_size_float", lambda: attnzoo.attention(*arrays(), window_size=(1.7, 0)), ValueError, "window_size"),
    ("block_mask_seed_negative", lambda: attnzoo.block_mask(16, block=4, seed=-1), ValueError, "seed"),
    ("block_mask_block_float", lambda: attnzoo.block_mask(16, block=4.0), TypeError, "block"),
    ("softcap_0", lambda: attnzoo.attention(*arrays(), softcap=0.0), ValueError, "softcap"),
    ("softcap_negative", lambda: attnzoo.attention(*arrays(), softcap=-1.0), ValueError, "softcap"),
    ("softcap_inf", lambda: attnzoo.attention(*arrays(), softcap=float("inf")), ValueError, "softcap"),
    ("softcap_nan", lambda: attnzoo.attention(*arrays(), softcap=float("nan")), ValueError, "softcap"),
    ("scale_0", lambda: attnzoo.attention(*arrays(), scale=0.0), ValueError, "scale"),
    ("scale_negative", lambda: attnzoo.attention(*arrays(), scale=-0.5), ValueError, "scale"),
    ("scale_inf", lambda: attnzoo.attention(*arrays(), scale=float("inf")), ValueError, "scale"),
    ("sinks_too_short", lambda: attnzoo.attention(*arrays(), sinks=np.zeros(1)), ValueError, "sinks"),
    ("sinks_too_long_torch", lambda: attnzoo.attention(*arrays(), sinks=torch.zeros(3)), ValueError, "sinks"),
    ("sinks_2d", lambda: attnzoo.attention(*arrays(), sinks=np.zeros((1, 2))), ValueError, "sinks"),
    ("sinks_nan", lambda: attnzoo.attention(*arrays(), sinks=np.array([0.0, np.nan])), ValueError, "sinks"),
    ("alibi_wrong_length", lambda: attnzoo.attention(*arrays(), alibi_slopes=np.ones(4)), ValueError,
     "alibi_slopes"),
    ("alibi_inf", lambda: attnzoo.attention(*arrays(), alibi_slopes=np.array([np.inf, 1.0])), ValueError,
     "alibi_slopes"),
    ("block_mask_too_short", lambda: attnzoo.attention(*arrays(Tq=4, Tk=9), block_mask=attnzoo.block_mask(8)),
     ValueError, "block_mask"),
    ("block_mask_not_a_mask", lambda: attnzoo.attention(*arrays(), block_mask=np.ones((1, 1), np.uint8)), TypeError,
     None),
    # non-finite inputs
    ("nan_in_q", lambda: attnzoo.attention(*replace(arrays(), 0, nan_at(arrays()[0]))), ValueError, "q"),
    ("inf_in_k", lambda: attnzoo.attention(*replace(arrays(), 1, arrays()[1] / 0.0 * 0 + np.inf)), ValueError,
     "k"),
    ("nan_in_v_bf16_torch", lambda: attnzoo.attention(*replace(
        tuple(torch.from_numpy(x).bfloat16() for x in arrays()), 2, torch.full((1, 4, 2, 8), float("nan"),
                                                                               dtype=torch.bfloat16))),
     ValueError, "v"),
    ("nan_in_q_f16", lambda: attnzoo.attention(*replace(arrays(dtype=np.float16), 0,
                                                         nan_at(arrays(dtype=np.float16)[0]))), ValueError, "q"),
]


@pytest.mark.parametrize("call,exc,name", [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES])
def test_bad_argument_is_named(call, exc, name):
    with np.errstate(all="ignore"), pytest.raises(exc) as info:
        call()
    if name is not None:
        assert str(info.value).startswith(name + ":"), str(info.value)


def test_nan_check_can_be_disabled_and_reference_refuses_the_same():
    q, k, v = arrays()
    attnzoo.attention(nan_at(q), k, v, check_inputs=False)  # the caller vouches: no error, result unspecified
    with pytest.raises(ValueError, match="^window:"):
        attnzoo.attention_reference(q, k, v, window=0)


# ---- regressions: bugs found by these tests, fixed ----

def test_cu_seqlens_k_not_from_zero_names_cu_seqlens_k():
    with pytest.raises(ValueError) as info:
        attnzoo.attention(*packed(), cu_seqlens=np.array([0, 6]), cu_seqlens_k=np.array([1, 6]))
    assert str(info.value).startswith("cu_seqlens_k:"), str(info.value)


def test_nan_scale_is_refused():
    with pytest.raises(ValueError, match="^scale:"):
        attnzoo.attention(*arrays(), scale=float("nan"))


def test_one_dimensional_q_with_sinks_names_q():
    with pytest.raises(ValueError) as info:
        attnzoo.attention(np.zeros(8, np.float32), *arrays()[1:], sinks=np.zeros(2, np.float32))
    assert str(info.value).startswith("q:"), str(info.value)


def test_empty_numpy_batch_is_accepted():
    q, k, v = arrays(Tq=0, Tk=0)
    assert attnzoo.attention(q, k, v).shape == (1, 0, 2, 8)


def test_empty_torch_batch_is_accepted():
    q, k, v = torch.zeros(1, 0, 2, 8), torch.randn(1, 3, 2, 8), torch.randn(1, 3, 2, 8)
    assert attnzoo.attention(q, k, v).shape == (1, 0, 2, 8)


def test_supported_targets_do_not_shrink_after_set_target():
    before = attnzoo.active_target()
    try:
        for t in ALL_TARGETS:
            attnzoo.set_target(t)
            assert attnzoo.supported_targets() == ALL_TARGETS, t
    finally:
        attnzoo.set_target(before)


# ---- fuzz ----

DTYPES = ["f32", "f16", "bf16", "int32", "f64"]


def random_call(rng):
    """One random argument combination, mostly small and valid, often with a single defect."""
    use_torch = rng.random() < 0.5
    dtype = rng.choice(DTYPES, p=[0.5, 0.15, 0.2, 0.075, 0.075])
    if dtype in ("f16", "int32", "f64") and rng.random() < 0.5:
        use_torch = False
    if dtype == "bf16":
        use_torch = True
    Hkv = int(rng.integers(1, 4))
    Hq = Hkv * int(rng.integers(1, 4)) if rng.random() < 0.9 else int(rng.integers(1, 7))
    D = int(rng.choice([1, 2, 3, 8, 17, 33])) if rng.random() < 0.97 else 1025
    Dv = D if rng.random() < 0.8 else int(rng.integers(1, 20))
    varlen = rng.random() < 0.3
    kw = {}
    if varlen:
        n = int(rng.integers(1, 4))
        lens_q = rng.integers(0, 6, n)
        lens_k = lens_q + (rng.integers(0, 4, n) if rng.random() < 0.5 else 0)
        cu_q = np.concatenate([[0], np.cumsum(lens_q)])
        cu_k = np.concatenate([[0], np.cumsum(lens_k)])
        total_q, total_k = int(cu_q[-1]), int(cu_k[-1])
        if rng.random() < 0.1:  # a defect in the offsets
            which = cu_q if rng.random() < 0.5 else cu_k
            which[int(rng.integers(0, len(which)))] += int(rng.choice([-2, -1, 1, 3]))
        kw["cu_seqlens"] = cu_q.astype(np.int32) if rng.random() < 0.7 else cu_q
        if not np.array_equal(lens_q, lens_k) or rng.random() < 0.3:
            kw["cu_seqlens_k"] = cu_k
        else:
            total_k = total_q
        lead = (1,) if rng.random() < 0.5 else ()
        shapes = (lead + (total_q, Hq, D), lead + (total_k, Hkv, D), lead + (total_k, Hkv, Dv))
        max_k = int(lens_k.max())
    else:
        B = int(rng.integers(1, 3))
        Tk = int(rng.integers(1, 12))
        Tq = int(rng.integers(1, Tk + 1)) if rng.random() < 0.95 else Tk + 1
        shapes = ((B, Tq, Hq, D), (B, Tk, Hkv, D), (B, Tk, Hkv, Dv))
        max_k = Tk
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    if rng.random() < 0.05:
        (q, k, v)[int(rng.integers(0, 3))].flat[0:1] = rng.choice([np.nan, np.inf, -np.inf])
    kw["causal"] = bool(rng.random() < 0.7)
    if rng.random() < 0.3:
        kw["window"] = int(rng.integers(-1, 8))
    if rng.random() < 0.2:
        kw["softcap"] = float(rng.choice([0.5, 2.0, 30.0, 0.0, -1.0, np.inf]))
    if rng.random() < 0.2:
        kw["scale"] = float(rng.choice([0.05, 0.3, 1.0, 2.0, 0.0, -1.0]))
    if rng.random() < 0.25:
        n_sinks = Hq if rng.random() < 0.85 else Hq + 1
        sinks = rng.standard_normal(n_sinks) * 2
        if rng.random() < 0.05:
            sinks[0] = np.nan
        kw["sinks"] = sinks
    if rng.random() < 0.2:
        kw["alibi_slopes"] = rng.random(Hq if rng.random() < 0.9 else max(Hq - 1, 1))
    if rng.random() < 0.2:
        seq_len = max_k + int(rng.integers(-2, 4))
        kw["block_mask"] = ("spec", dict(seq_len=seq_len, block=int(rng.integers(-1, 9)),
                                         local_blocks=int(rng.integers(-1, 3)), global_tokens=int(rng.integers(0, 4)),
                                         stride=int(rng.integers(0, 4)), random_blocks=int(rng.integers(0, 3)),
                                         seed=int(rng.integers(0, 1000))))
    if use_torch:
        tdt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "int32": torch.int32,
               "f64": torch.float64}[dtype]
        q, k, v = (torch.from_numpy(x).to(tdt) for x in (q, k, v))
        if rng.random() < 0.2 and q.ndim == 4 and q.shape[1] > 1:  # a strided view onto the same values
            q = q.transpose(1, 2).contiguous().transpose(1, 2)
    else:
        ndt = {"f32": np.float32, "f16": np.float16, "int32": np.int32, "f64": np.float64}[dtype]
        with np.errstate(all="ignore"):
            q, k, v = (x.astype(ndt) for x in (q, k, v))
    if rng.random() < 0.06:  # one tensor in another dtype than the others
        i = int(rng.integers(0, 3))
        odd = (q, k, v)[i]
        with np.errstate(all="ignore"):
            odd = odd.to(torch.float16 if rng.random() < 0.5 else torch.int32) if use_torch else (
                odd.astype(np.float32 if rng.random() < 0.5 else np.int64))
        q, k, v = (odd if j == i else x for j, x in enumerate((q, k, v)))
    return q, k, v, kw


def within_tolerance(got, want, dtype):
    """f32: the issue's 2e-5. bf16 / f16 outputs: two units in the last place (one rounding of the result, one
    of the bf16 probabilities the AVX-512-BF16 tiles feed to P V)."""
    if dtype in (np.float32, torch.float32):
        return np.abs(got - want) <= 2e-5
    ulp = 2.0 ** -7 if dtype == torch.bfloat16 else 2.0 ** -10
    return np.abs(got - want) <= 2 * ulp * np.maximum(1.0, np.abs(want))


def as_f64(x):
    return x.to(torch.float64).numpy() if isinstance(x, torch.Tensor) else np.asarray(x, dtype=np.float64)


def build_block_mask(kw):
    """Turns the generator's block-mask spec into a BlockMask; returns the error if the spec is invalid."""
    if isinstance(kw.get("block_mask"), tuple):
        try:
            kw["block_mask"] = attnzoo.block_mask(**kw["block_mask"][1])
        except ValueError as e:
            return e
    return None


def finite_inputs(*xs):
    return all(np.isfinite(as_f64(x)).all() for x in xs)


def test_fuzz_arguments_never_crash():
    rng = np.random.default_rng(20240611)
    targets = ALL_TARGETS
    before = attnzoo.active_target()
    counts = {"ok": 0, "ValueError": 0, "TypeError": 0}
    start = time.monotonic()
    try:
        for case in range(1000):
            q, k, v, kw = random_call(rng)
            attnzoo.set_target(targets[int(rng.integers(0, len(targets)))])
            spec_error = build_block_mask(kw)
            if spec_error is not None:
                assert str(spec_error).split(":")[0] in ("seq_len", "block", "local_blocks", "random_blocks"), str(spec_error)
                counts["ValueError"] += 1
                continue
            try:
                out = attnzoo.attention(q, k, v, **kw)
            except (ValueError, TypeError) as e:
                counts[type(e).__name__] += 1
                assert str(e), f"case {case}: empty message"
                continue
            counts["ok"] += 1
            assert type(out) is type(q), f"case {case}"
            assert out.dtype == q.dtype and tuple(out.shape) == tuple(q.shape[:-1]) + (v.shape[-1],), f"case {case}"
            got = as_f64(out)
            assert np.isfinite(got).all(), f"case {case}: non-finite output for {kw}"
            want = as_f64(attnzoo.attention_reference(q, k, v, **kw))
            ok = within_tolerance(got, want, out.dtype)
            assert ok.all(), f"case {case} ({out.dtype}): max abs error {np.abs(got - want).max()} for {kw}"
    finally:
        attnzoo.set_target(before)
    # The generator must exercise both sides of the checker, or the fuzz proves little.
    assert counts["ok"] >= 300 and counts["ValueError"] >= 200 and counts["TypeError"] >= 50, counts
    # A hang guard, not a speed test: 1000 tiny calls take seconds even on a loaded 2-core machine.
    assert time.monotonic() - start < 300


def test_fuzz_errors_agree_with_reference():
    """attention_reference shares the checker: it refuses every invalid finite call the same way."""
    rng = np.random.default_rng(7)
    compared = 0
    for case in range(300):
        q, k, v, kw = random_call(rng)
        if build_block_mask(kw) is not None:
            continue
        try:
            attnzoo.attention(q, k, v, **kw)
        except (ValueError, TypeError) as e:
            if not finite_inputs(q, k, v):
                continue  # only the fast entry scans for NaN / Inf; the reference is the bare definition
            with pytest.raises(type(e)) as info:
                attnzoo.attention_reference(q, k, v, **kw)
            assert str(info.value).split(":")[0] == str(e).split(":")[0], f"case {case}"
            compared += 1
    assert compared >= 50
