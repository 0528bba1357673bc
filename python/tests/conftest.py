import contextlib
import os
import signal
import sys

import numpy as np
import pytest


def _checkout_paths():
    """The checkout's Python sources and the build tree's compiled module ($ATTNZOO_BUILD, else build/): the one
    way the tests find attnzoo, for this process and (through PYTHONPATH) for the processes it starts."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    build = os.path.abspath(os.environ.get("ATTNZOO_BUILD") or os.path.join(root, "build"))
    return [os.path.join(root, "python"), os.path.join(build, "python")]


# On Intel CPUs bf16 products widen to f32 by default (src/core/bf16_dot.h), which would leave the AVX-512-BF16
# tile kernels untested on an Intel CI machine: the tests run them wherever the CPU has them, unless the caller
# chose. Set before attnzoo is imported, and inherited by the processes the tests start. Tests of the default
# rule call _core.bf16_dot_preference.
os.environ.setdefault("ATTNZOO_BF16_DOT", "1")

_paths = _checkout_paths()
sys.path[:0] = _paths
os.environ["PYTHONPATH"] = os.pathsep.join(_paths + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])


@pytest.fixture
def sigint_raises():
    """SIGINT as Python's default KeyboardInterrupt for the test. A shell without job control starts background
    commands with SIGINT ignored, and then _thread.interrupt_main does nothing: an interrupt test would wait for
    a Ctrl-C that never comes."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def rel_rms(got, want):
    """Relative RMS error, computed in float64."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    return float(np.sqrt(((got - want) ** 2).sum() / max((want ** 2).sum(), 1e-300)))


@pytest.fixture(params=None)
def targets():
    import attnzoo
    return attnzoo.supported_targets()


def _supported_targets():
    import attnzoo
    return attnzoo.supported_targets()


# Read once at collection, before any kernel call: src/core/dispatch.cc narrows Highway's target mask on
# set_target (and on the first kernel call), after which supported_targets() lists only the active family.
ALL_TARGETS = _supported_targets()


@pytest.fixture(params=ALL_TARGETS)
def simd_target(request):
    """Runs the test once per SIMD target this CPU can run, restoring the previously active one afterwards."""
    import attnzoo
    before = attnzoo.active_target()
    attnzoo.set_target(request.param)
    try:
        yield request.param
    finally:
        attnzoo.set_target(before)


def token_visibility(Tq, Tk, *, causal=True, window=None, block_mask=None):
    """Boolean [Tq, Tk]: may query i see key j. Queries are the last Tq of Tk positions (bottom-right)."""
    qpos = np.arange(Tq)[:, None] + (Tk - Tq)
    kpos = np.arange(Tk)[None, :]
    visible = np.ones((Tq, Tk), dtype=bool)
    if causal:
        visible &= kpos <= qpos
    if window is not None:
        visible &= kpos > qpos - window
    if block_mask is not None:
        blocks = np.asarray(block_mask.blocks()).astype(bool)
        visible &= blocks[qpos // block_mask.block, kpos // block_mask.block]
    return visible


def softmax_reference(q, k, v, visible, *, scale=None, softcap=None, sinks=None, alibi_slopes=None):
    """Softmax attention written out in float64 torch. q [B,Tq,Hq,D], k/v [B,Tk,Hkv,D*], visible [Tq,Tk].

    Order as documented by attnzoo: scale, softcap, ALiBi, mask. Sinks join the denominator and are dropped;
    rows that see nothing (and have no sink mass on any value) give zeros.
    """
    import torch
    q, k, v = (torch.as_tensor(x).to(torch.float64) for x in (q, k, v))
    Tq, Hq, D = q.shape[1], q.shape[2], q.shape[3]
    Tk, Hkv = k.shape[1], k.shape[2]
    if Tk == 0:
        return torch.zeros(q.shape[0], Tq, Hq, v.shape[3], dtype=torch.float64)
    k = k.repeat_interleave(Hq // Hkv, dim=2)
    v = v.repeat_interleave(Hq // Hkv, dim=2)
    s = torch.einsum("bihd,bjhd->bhij", q, k) * (D ** -0.5 if scale is None else scale)
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    if alibi_slopes is not None:
        slopes = torch.as_tensor(np.asarray(alibi_slopes, dtype=np.float64))
        dist = (torch.arange(Tq)[:, None] + (Tk - Tq) - torch.arange(Tk)[None, :]).abs().to(torch.float64)
        s = s - slopes[None, :, None, None] * dist
    s = s.masked_fill(~torch.as_tensor(np.asarray(visible, dtype=bool)), float("-inf"))
    if sinks is not None:
        sink = torch.as_tensor(np.asarray(sinks, dtype=np.float64))[None, :, None, None]
        s = torch.cat([s, sink.expand(s.shape[0], Hq, Tq, 1)], dim=-1)
    m = s.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    p = torch.exp(s - m)
    denom = p.sum(dim=-1, keepdim=True)
    if sinks is not None:
        p = p[..., :-1]
    p = torch.where(denom > 0, p / torch.where(denom > 0, denom, torch.ones_like(denom)), torch.zeros_like(p))
    return torch.einsum("bhij,bjhd->bihd", p, v)


def sdpa_reference(q, k, v, visible, *, scale=None):
    """torch.nn.functional.scaled_dot_product_attention in float64 with an explicit boolean mask, [B,Tq,Hq,Dv]."""
    import torch
    q, k, v = (torch.as_tensor(x).to(torch.float64).transpose(1, 2) for x in (q, k, v))
    mask = torch.as_tensor(np.asarray(visible, dtype=bool))
    assert bool(mask.any(dim=-1).all()), "SDPA gives NaN on fully masked rows: use softmax_reference"
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale,
                                                           enable_gqa=q.shape[1] != k.shape[1])
    return out.transpose(1, 2)


@pytest.fixture(scope="module")
def torch_one_thread():
    """Torch references on small tensors run far faster on one thread when the cores are shared (no spinning)."""
    import torch
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def to_paged(k, block_size, seed=0, spare_blocks=3):
    """Scatters a contiguous cache [B, S_max, H, D] over shuffled physical blocks; returns (paged, block_table)."""
    import torch
    B, S_max = k.shape[:2]
    per_seq = -(-S_max // block_size)
    num_blocks = B * per_seq + spare_blocks
    ids = torch.randperm(num_blocks, generator=torch.Generator().manual_seed(seed))[: B * per_seq]
    table = ids.reshape(B, per_seq).to(torch.int32)
    paged = torch.randn(num_blocks, block_size, *k.shape[2:]).to(k.dtype)  # garbage where no token lives
    for b in range(B):
        for j in range(S_max):
            paged[table[b, j // block_size], j % block_size] = k[b, j]
    return paged, table


def gather_paged(paged, table, b, length):
    """Sequence b's first `length` cache rows, read through the block table: [length, H, D]."""
    import torch
    pos = torch.arange(length)
    return paged[table[b, pos // paged.shape[1]].long(), pos % paged.shape[1]]



@pytest.fixture(autouse=True)
def _process_settings_restored():
    """Fails a test that leaves the SIMD target or the matmul precision changed: both are process-wide, and a
    leak silently moves every later test onto another code path (use simd_target / try-finally)."""
    import attnzoo
    before = attnzoo.active_target(), attnzoo.get_float32_matmul_precision()
    yield
    after = attnzoo.active_target(), attnzoo.get_float32_matmul_precision()
    if after != before:
        attnzoo.set_target(before[0])
        attnzoo.set_float32_matmul_precision(before[1])
        pytest.fail(f"the test left (target, matmul precision) at {after}, not {before}")


@contextlib.contextmanager
def matmul_precision(precision):
    """The matmul precision for a block, the previous one after. "highest" (f32 products) is for comparisons with
    f32 references tighter than the default "auto" keeps on block-quantized weights (8-bit activations in decode,
    bf16 panels in prefill on AVX-512-BF16)."""
    import attnzoo
    previous = attnzoo.get_float32_matmul_precision()
    attnzoo.set_float32_matmul_precision(precision)
    try:
        yield
    finally:
        attnzoo.set_float32_matmul_precision(previous)


@pytest.fixture(scope="module", autouse=True)
def _module_matmul_precision(request):
    """A module setting MATMUL_PRECISION runs all its tests (and module fixtures) under it."""
    precision = getattr(request.module, "MATMUL_PRECISION", None)
    if precision is None:
        yield
        return
    with matmul_precision(precision):
        yield
