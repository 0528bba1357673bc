"""The hardening of issue 16, from Python: thread-safety of the pool, read-only and in-place buffers, integer
width, argument errors, the order of validation, Ctrl-C, and the context window in generation.

References are independent: results of the same call made alone (the pool must never tear them), numpy / torch
semantics of read-only memory, and arithmetic written here."""
import os
import subprocess
import sys
import threading
import time
import warnings
import _thread

import numpy as np
import pytest

import attnzoo

torch = pytest.importorskip("torch")


def _read_only_tensor(path, shape):
    """A torch tensor over a read-only file mapping (torch warns, once per process, that it is not writable)."""
    np.zeros(int(np.prod(shape)), np.float32).tofile(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(np.memmap(path, dtype=np.float32, mode="r", shape=shape))


def _qkv(T=64, H=4, D=32, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((1, T, H, D)).astype(np.float32) for _ in range(3)]


# --- the pool: resizing while other threads run kernels --------------------------------------------------

def test_set_num_threads_while_kernels_run_never_tears_a_result():
    q, k, v = _qkv(T=256, H=4, D=64)
    want = attnzoo.attention(q, k, v)
    before = attnzoo.num_threads()
    errors, stop = [], threading.Event()

    def worker():
        while not stop.is_set():
            got = attnzoo.attention(q, k, v)
            err = float(np.max(np.abs(got - want)))
            if err > 1e-5:
                errors.append(err)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for i in range(40):
            attnzoo.set_num_threads(1 + i % 4)
            time.sleep(0.002)
    finally:
        stop.set()
        for t in threads:
            t.join()
        attnzoo.set_num_threads(before)
    assert errors == [], f"{len(errors)} torn results, max error {max(errors)}"


# --- buffers the kernel writes ------------------------------------------------------------------------------

def test_read_only_numpy_out_is_a_value_error_naming_out():
    q, k, v = _qkv()
    out = np.empty_like(q)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="out"):
        attnzoo.attention(q, k, v, out=out)


def test_torch_out_over_read_only_memory_is_refused(tmp_path):
    q, k, v = _qkv()
    out = _read_only_tensor(tmp_path / "ro.bin", q.shape)
    with pytest.raises(ValueError, match="out: is read-only memory"):
        attnzoo.attention(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v), out=out)


def test_out_whose_elements_share_memory_is_refused():
    """An expanded view (stride 0) as out would have every row written over the same memory, racing across threads:
    refused by name, as torch refuses it, for outputs and in-place state alike."""
    q, k, v = _qkv()
    shared = torch.empty((1, 1) + q.shape[2:]).expand(q.shape)
    with pytest.raises(ValueError, match="out: has elements that share memory"):
        attnzoo.attention(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v), out=shared)
    out = torch.empty(q.shape)
    single = out.as_strided(q.shape, (0,) + out.stride()[1:])  # stride 0 along the batch of 1: no sharing
    attnzoo.attention(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v), out=single)
    assert torch.isfinite(out).all()


def test_read_only_in_place_state_is_refused(tmp_path):
    from attnzoo.linear import mamba2_state_update
    Bn, H, P, N, G = 1, 2, 4, 8, 1
    rng = np.random.default_rng(1)
    args = dict(x=rng.standard_normal((Bn, H, P)).astype(np.float32), dt=np.ones((Bn, H), np.float32),
                A=-np.ones(H, np.float32), B=rng.standard_normal((Bn, G, N)).astype(np.float32),
                C=rng.standard_normal((Bn, G, N)).astype(np.float32))
    state = np.zeros((Bn, H, P, N), np.float32)
    state.flags.writeable = False
    with pytest.raises(ValueError, match="state"):
        mamba2_state_update(state, **args)
    ro = _read_only_tensor(tmp_path / "state.bin", (Bn, H, P, N))
    with pytest.raises(ValueError, match="state"):
        mamba2_state_update(ro, **{k: torch.from_numpy(v) for k, v in args.items()})


def test_a_refused_read_only_output_leaves_the_next_outputs_bytes_alone(tmp_path):
    """The writability probe of a read-only output must not leave its byte behind for the next probe to store over
    the first byte of the next (writable) in-place argument: here a paged cache whose untouched slots must keep
    their values."""
    q, k, v = _qkv()
    ro = _read_only_tensor(tmp_path / "ro.bin", q.shape)  # zeros
    with pytest.raises(ValueError, match="out: is read-only memory"):
        attnzoo.attention(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v), out=ro)
    g = torch.Generator().manual_seed(0)
    k_cache, v_cache = torch.randn(4, 8, 2, 16, generator=g), torch.randn(4, 8, 2, 16, generator=g)
    k_before, v_before = k_cache.clone(), v_cache.clone()
    new = torch.randn(3, 2, 16, generator=g)
    slots = torch.tensor([9, 10, 11])  # block 1: the caches' first and last bytes are not written
    attnzoo.write_kv_paged(new, new, slots, k_cache, v_cache)
    k_before.view(32, 2, 16)[slots] = new
    v_before.view(32, 2, 16)[slots] = new
    assert torch.equal(k_cache, k_before) and torch.equal(v_cache, v_before)


# --- integers that do not fit, arrays that are not there -----------------------------------------------------

@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_64_bit_offsets_and_lengths_are_not_truncated(framework):
    conv = (lambda a: a) if framework == "numpy" else torch.from_numpy
    q, k, v = _qkv(T=8)
    packed = [x[0] for x in (q, k, v)]
    cu = np.array([0, 2**32 + 8], np.int64)  # truncated to 32 bits this is [0, 8]: a silently valid call
    with pytest.raises(ValueError, match="cu_seqlens"):
        attnzoo.attention(*[conv(x) for x in packed], cu_seqlens=conv(cu))
    kc = np.zeros((1, 16, 4, 32), np.float32)
    with pytest.raises(ValueError, match="cache_seqlens"):
        attnzoo.attention_decode(conv(q[:, :1]), conv(kc), conv(kc), conv(np.array([2**32 + 4], np.int64)))
    table = np.array([[2**32]], np.int64)
    with pytest.raises(ValueError, match="block_table"):
        attnzoo.attention_decode(conv(q[:, :1]), conv(kc), conv(kc), conv(np.array([4], np.int64)),
                                 block_table=conv(table))


def test_none_for_a_required_array_names_it():
    q, k, v = _qkv()
    with pytest.raises(TypeError, match="^k: required"):
        attnzoo.attention(q, None, v)
    from attnzoo.linear import chunk_gated_delta_rule, recurrent_rwkv7
    with pytest.raises(TypeError, match="^v: required"):
        chunk_gated_delta_rule(q, k, None, g=np.zeros(q.shape[:3], np.float32), beta=np.ones(q.shape[:3], np.float32))
    with pytest.raises(TypeError, match="^r: required"):
        recurrent_rwkv7(None, q, k, v, q, k)


def test_rwkv7_with_zero_head_dim_is_a_value_error():
    from attnzoo.linear import recurrent_rwkv7
    z = np.zeros((1, 4, 2, 0), np.float32)
    with pytest.raises(ValueError, match="^r: head dimension K must be >= 1"):
        recurrent_rwkv7(z, z, z, z, z, z)


def test_big_endian_arrays_are_refused_by_name():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="^k: byte order"):
        attnzoo.attention(q, k.astype(">f4"), v)


def _refused_faster_than_a_scan(call, claimed_elements):
    """Times a call that must raise ValueError against scanning 1% of the elements its arrays claim (np.isfinite
    over that many floats), alternated, fastest of three each: a load that slows one slows the other, so the
    comparison holds on a busy machine where a fixed bound in seconds did not. A call that scanned or copied what
    it was given would take 100x the reference or more. Returns the error."""
    reference = np.zeros(claimed_elements // 100, np.float32)
    refused, scanned, error = [], [], None
    for _ in range(3):
        t0 = time.perf_counter()
        with pytest.raises(ValueError) as e:
            call()
        refused.append(time.perf_counter() - t0)
        error = e.value
        t0 = time.perf_counter()
        assert np.isfinite(reference).all()
        scanned.append(time.perf_counter() - t0)
    assert min(refused) < min(scanned), (min(refused), min(scanned))
    return error


def test_shapes_are_validated_before_the_nan_scan():
    q = torch.zeros(1, 70, 4, 64)
    k = torch.zeros(1).expand(1, 70, 196608, 64)  # 880M elements of stride 0; heads do not divide q's
    error = _refused_faster_than_a_scan(lambda: attnzoo.attention(q, k, k), k.numel())
    assert "NaN" not in str(error)
    # The scan still runs on well-formed inputs.
    q, k, v = _qkv()
    k[0, 3, 1, 2] = np.nan
    with pytest.raises(ValueError, match="k: contains NaN or Inf"):
        attnzoo.attention(q, k, v)


def _huge(*shape):
    """A stride-0 view claiming billions of bytes over one float: copying or scanning it costs seconds and
    gigabytes, checking its shape costs nothing."""
    return torch.zeros(1).expand(*shape)


def _linear_calls():
    from attnzoo import linear as L
    T, H, K = 70, 4, 64
    q, v = torch.zeros(1, T, H, K), torch.zeros(1, T, H, K)
    g, beta, gk = torch.zeros(1, T, H), torch.ones(1, T, H), torch.zeros(1, T, H, K)
    big_k = _huge(1, T, 196608, K)  # 880M elements; its heads disagree with q's
    big_state = _huge(5, H, K, K * 4096)  # 5 sequences where the batch has 1
    x, dt, A, Bm = torch.zeros(1, T, H, 16), torch.zeros(1, T, H), -torch.ones(H), torch.zeros(1, T, 1, 16)
    u, delta, As, Bs = torch.zeros(1, 16, T), torch.zeros(1, 16, T), -torch.ones(16, 4), torch.zeros(1, 4, T)
    w4, k4 = torch.zeros(64), torch.zeros(1, T, 64)
    return {
        "chunk_gated_delta_rule": ("k", lambda: L.chunk_gated_delta_rule(q, big_k, v, g, beta)),
        "recurrent_kda": ("k", lambda: L.recurrent_kda(q, big_k, v, gk, beta)),
        "chunk_delta_rule state": ("initial_state", lambda: L.chunk_delta_rule(q, q, v, beta,
                                                                                initial_state=big_state)),
        "chunk_gla": ("k", lambda: L.chunk_gla(q, big_k, v, gk)),
        "recurrent_simple_gla": ("g", lambda: L.recurrent_simple_gla(q, q, v, g=_huge(1, T + 1, H * 10 ** 6))),
        "chunk_linear_attn": ("v", lambda: L.chunk_linear_attn(q, q, _huge(2, T, H, 10 ** 8))),
        "causal_conv1d": ("initial_state", lambda: L.causal_conv1d(
            k4, torch.zeros(64, 4), initial_state=_huge(3, 64, 10 ** 9))),
        "mamba2_chunk_scan": ("B", lambda: L.mamba2_chunk_scan(x, dt, A, _huge(1, T + 1, 196608, 64), Bm)),
        "mamba2_recurrent state": ("initial_state", lambda: L.mamba2_recurrent(
            x, dt, A, Bm, Bm, initial_state=_huge(2, H, 16, 10 ** 8))),
        "selective_scan_fn": ("delta", lambda: L.selective_scan_fn(u, _huge(1, 16, 10 ** 9), As, Bs, Bs)),
        "rwkv4_wkv": ("v", lambda: L.rwkv4_wkv(w4, w4, k4, _huge(1, T, 10 ** 9))),
        "recurrent_rwkv7": ("k", lambda: L.recurrent_rwkv7(q, q, big_k, v, q, q)),
        "chunk_rwkv7 numpy": ("w", lambda: L.chunk_rwkv7(q.numpy(), np.broadcast_to(np.float32(0), (1, T, 196608, K)),
                                                          q.numpy(), v.numpy(), q.numpy(), q.numpy())),
    }


@pytest.mark.parametrize("call", sorted(_linear_calls()))
def test_linear_family_checks_shapes_before_copying_or_scanning(call):
    """Issue 16: a malformed call fails on its shape at once, whatever its arrays claim to hold."""
    name, run = _linear_calls()[call]
    # Every call's malformed array claims at least 280M elements (the copy this replaced took 40 s).
    error = _refused_faster_than_a_scan(run, 280_000_000)
    assert str(error).startswith(name + ": expected shape"), str(error)


# --- Ctrl-C -----------------------------------------------------------------------------------------------

def test_keyboard_interrupt_stops_a_long_kernel_promptly(sigint_raises):
    rng = np.random.default_rng(0)
    T = 12288
    q = rng.standard_normal((1, T, 8, 128)).astype(np.float32)
    k = rng.standard_normal((1, T, 2, 128)).astype(np.float32)
    t0 = time.perf_counter()
    attnzoo.attention(q, k, k, check_inputs=False)
    full = time.perf_counter() - t0
    if full < 0.8:
        pytest.skip(f"the kernel takes {full:.2f} s here: too short to interrupt midway")
    timer = threading.Timer(0.15, _thread.interrupt_main)
    t0 = time.perf_counter()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        attnzoo.attention(q, k, k, check_inputs=False)
    took = time.perf_counter() - t0
    timer.join()
    assert took < 0.15 + 0.5 * full, f"interrupt took {took:.2f} s of a {full:.2f} s kernel"
    # The pool is usable afterwards and gives the full result again.
    small = _qkv()
    np.testing.assert_allclose(attnzoo.attention(*small), attnzoo.attention_reference(*small), atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("poison", ["nan", "inf"])
def test_a_nan_in_a_cache_reaches_exactly_the_outputs_that_see_it(dtype, poison):
    """A NaN key, or one whose score is +inf, is no key to skip: every query row that sees it gets NaN (an exact
    softmax's answer, torch's too: exp(inf - inf)), the rows that do not see it stay as they were. Prefill (causal:
    rows before the key do not see it) and decode, whose caches are not scanned."""
    T, H, D, bad = 96, 2, 32, 70
    rng = np.random.default_rng(4)
    q, k, v = (torch.from_numpy(rng.standard_normal((1, T, H, D)).astype(np.float32)).to(dtype) for _ in range(3))
    q[:, :, 1, 3] = q[:, :, 1, 3].abs() + 0.5  # every row's score against the +inf key is +inf, not -inf
    clean = attnzoo.attention(q, k, v, causal=True).float()
    k_bad = k.clone()
    k_bad[0, bad, 1, 3] = float(poison)
    if poison == "inf":
        torch_row = torch.nn.functional.scaled_dot_product_attention(
            q[:, -1:].float().transpose(1, 2), k_bad.float().transpose(1, 2), v.float().transpose(1, 2))
        assert torch.isnan(torch_row[:, 1]).all()  # the reference's answer this test holds us to
    got = attnzoo.attention(q, k_bad, v, causal=True, check_inputs=False).float()
    assert torch.equal(got[:, :bad], clean[:, :bad]) and torch.equal(got[:, bad:, 0], clean[:, bad:, 0])
    assert torch.isnan(got[:, bad:, 1]).all()
    lens = torch.tensor([T], dtype=torch.int32)
    row = attnzoo.attention_decode(q[:, -1:], k_bad, v, lens).float()
    assert torch.isnan(row[:, :, 1]).all() and torch.isfinite(row[:, :, 0]).all()
    from attnzoo.decode import attention_decode_reference
    ref = attention_decode_reference(q[:, -1:].float(), k_bad.float(), v.float(), lens)
    assert torch.isnan(ref[:, :, 1]).all() and torch.isfinite(ref[:, :, 0]).all()
    before = attnzoo.attention_decode(q[:, bad - 1:bad], k_bad, v, torch.tensor([bad], dtype=torch.int32)).float()
    assert torch.isfinite(before).all()  # the NaN row lies past this sequence's length


# --- arrays with no elements ----------------------------------------------------------------------------------

def _zero_length_calls(cv, h0):
    import attnzoo.linear as L
    H, K, V, T = 2, 8, 6, 0
    g = torch.Generator().manual_seed(3)
    q, k = cv(torch.randn(1, T, H, K, generator=g)), cv(torch.randn(1, T, H, K, generator=g))
    v = cv(torch.randn(1, T, H, V, generator=g))
    gh, gk, beta = cv(-torch.rand(1, T, H, generator=g)), cv(-torch.rand(1, T, H, K, generator=g)), cv(torch.rand(1, T, H))
    kw = dict(initial_state=cv(h0), output_final_state=True)
    return {
        "chunk_simple_gla": lambda: L.chunk_simple_gla(q, k, v, gh, **kw),
        "chunk_gla": lambda: L.chunk_gla(q, k, v, gk, **kw),
        "recurrent_gla": lambda: L.recurrent_gla(q, k, v, gk, **kw),
        "chunk_gated_delta_rule": lambda: L.chunk_gated_delta_rule(q, k, v, gh, beta, **kw),
        "recurrent_kda": lambda: L.recurrent_kda(q, k, v, gk, beta, **kw),
        "chunk_rwkv7": lambda: L.chunk_rwkv7(q, gk, k, v, k, k, **kw),
    }


@pytest.mark.parametrize("framework", ["torch", "numpy"])
def test_a_zero_length_sequence_returns_its_initial_state(framework):
    """T = 0 is no token: an empty output and the initial state back as the final one, as the recurrences say.
    (torch gives an empty tensor a null data pointer, which used to read as an absent argument: "q: is required";
    numpy gives it stride 0, which used to read as "must be contiguous".)"""
    cv = (lambda t: t) if framework == "torch" else (lambda t: t.numpy())
    h0 = torch.randn(1, 2, 8, 6)
    for name, call in _zero_length_calls(cv, h0).items():
        o, ht = call()
        assert tuple(o.shape) == (1, 0, 2, 6), name
        np.testing.assert_array_equal(np.asarray(ht), h0.numpy(), err_msg=name)


@pytest.mark.parametrize("empty", [torch.zeros(0, dtype=torch.int32), np.zeros(0, np.int32)], ids=["torch", "numpy"])
def test_an_empty_cu_seqlens_is_refused_not_ignored(empty):
    import attnzoo.linear as L
    q = torch.randn(2, 20, 2, 8)
    with pytest.raises(ValueError, match="^cu_seqlens: needs batch size 1"):
        L.chunk_simple_gla(q, q, q, -torch.rand(2, 20, 2), cu_seqlens=empty, output_final_state=True)
    with pytest.raises(ValueError, match="^cu_seqlens: needs at least 2 entries"):
        L.chunk_simple_gla(q[:1], q[:1], q[:1], -torch.rand(1, 20, 2), cu_seqlens=empty, output_final_state=True)


def test_a_short_conv_state_of_length_0_is_checked_against_the_width():
    import attnzoo.linear as L
    x, w = torch.randn(1, 5, 4), torch.randn(4, 3)
    with pytest.raises(ValueError, match=r"^initial_state: expected \[1, 4, S\] with S >= 2, got \[1, 4, 0\]"):
        L.causal_conv1d(x, w, initial_state=torch.zeros(1, 4, 0), output_final_state=True)
    w1 = torch.randn(4, 1)  # width 1 keeps no history: a state of length 0 is the right one
    y, ht = L.causal_conv1d(x, w1, initial_state=torch.zeros(1, 4, 0), output_final_state=True)
    assert ht.shape == (1, 4, 0) and torch.allclose(y, x * w1[:, 0])


def test_decode_steps_name_their_in_place_state():
    import attnzoo.linear as L
    with pytest.raises(ValueError, match="^conv_state: must be contiguous"):
        L.causal_conv1d_update(torch.randn(2, 4), torch.randn(2, 2, 4).transpose(1, 2), torch.randn(4, 3))
    with pytest.raises(ValueError, match=r"^conv_state: expected \[2, 4, S\] with S >= 2"):
        L.causal_conv1d_update(torch.randn(2, 4), torch.randn(2, 4, 1), torch.randn(4, 3))
    with pytest.raises(TypeError, match="^state: "):
        L.mamba2_state_update(torch.randn(2, 2, 3, 4).bfloat16(), torch.randn(2, 2, 3), torch.randn(2, 2),
                              -torch.rand(2), torch.randn(2, 1, 4), torch.randn(2, 1, 4))
    with pytest.raises(ValueError, match="^state: must be contiguous"):
        L.selective_state_update(torch.randn(2, 3, 5).transpose(1, 2), torch.randn(2, 5), torch.randn(2, 5),
                                 -torch.rand(5, 3), torch.randn(2, 3), torch.randn(2, 3))
    with pytest.raises(ValueError, match="^state: must be contiguous"):
        L.s4d_step(torch.randn(2, 4, 3, 2).transpose(1, 2), torch.randn(2, 3), torch.rand(3) * 0.1,
                   torch.complex(-torch.rand(3, 4), torch.randn(3, 4)), torch.randn(3, 4, dtype=torch.complex64),
                   torch.randn(3, 4, dtype=torch.complex64))


def test_empty_arrays_with_numpys_strides_get_an_answer_or_the_real_reason():
    """numpy gives an array with no elements stride 0 everywhere; checks of the last stride must not read that as
    a layout problem, and an argument with no heads / channels is named as itself."""
    import attnzoo.linear as L
    e = lambda *shape: np.zeros(shape, np.float32)  # noqa: E731
    assert attnzoo.attention_decode(e(0, 1, 2, 16), e(0, 8, 2, 16), e(0, 8, 2, 16), np.zeros(0, np.int32)).shape \
        == (0, 1, 2, 16)
    assert attnzoo.sample(e(0, 5), temperature=0.0).shape == (0,)
    with pytest.raises(ValueError, match=r"^q: needs at least one head, got \[2, 3, 0, 8\]"):
        attnzoo.attention(e(2, 3, 0, 8), e(2, 3, 2, 8), e(2, 3, 2, 8))
    with pytest.raises(ValueError, match=r"^v: head dimension V must be >= 1"):
        L.recurrent_rwkv7(*(torch.randn(1, 3, 2, 4) for _ in range(3)), torch.randn(1, 3, 2, 0),
                          torch.randn(1, 3, 2, 4), torch.randn(1, 3, 2, 4))
    with pytest.raises(ValueError, match=r"^x: needs at least one channel, got \[2, 0\]"):
        L.selective_state_update(torch.zeros(2, 0, 4), torch.zeros(2, 0), torch.zeros(2, 0), -torch.rand(0, 4),
                                 torch.randn(2, 4), torch.randn(2, 4))
