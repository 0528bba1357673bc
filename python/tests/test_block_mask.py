"""attnzoo.block_mask: the block pattern's semantics, its density and spec checks, and attention through it
compared with the same pattern expanded to a token mask."""
import subprocess
import sys

import numpy as np
import pytest
import torch

import attnzoo
from conftest import softmax_reference, token_visibility

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def blocks(**spec):
    return np.asarray(attnzoo.block_mask(**spec).blocks()).astype(bool)


def band(n, local):
    b = np.arange(n)
    return np.abs(b[:, None] - b[None, :]) < local


@pytest.mark.parametrize("seq_len,block,local", [(256, 64, 1), (100, 16, 2), (1000, 64, 3), (10, 1, 4), (50, 64, 1)])
def test_local_band(seq_len, block, local):
    got = blocks(seq_len=seq_len, block=block, local_blocks=local)
    n = -(-seq_len // block)
    assert got.shape == (n, n)
    assert np.array_equal(got, band(n, local))


def test_no_local_band_and_nothing_else_hides_everything():
    assert not blocks(seq_len=300, block=32, local_blocks=0).any()


@pytest.mark.parametrize("global_tokens,global_blocks", [(1, 1), (16, 1), (17, 2), (48, 3), (1000, 7)])
def test_global_tokens_see_and_are_seen_by_all(global_tokens, global_blocks):
    got = blocks(seq_len=100, block=16, local_blocks=1, global_tokens=global_tokens)
    want = band(7, 1)
    want[:global_blocks, :] = True
    want[:, :global_blocks] = True
    assert np.array_equal(got, want)


@pytest.mark.parametrize("stride", [1, 2, 3, 5])
def test_stride_summary_columns(stride):
    got = blocks(seq_len=20 * 8, block=8, local_blocks=1, stride=stride)
    want = band(20, 1)
    want[:, np.arange(20) % stride == stride - 1] = True
    assert np.array_equal(got, want)


def test_patterns_combine_as_a_union():
    spec = dict(seq_len=500, block=25, local_blocks=2, global_tokens=30, stride=4)
    got = blocks(**spec)
    want = band(20, 2)
    want[:2, :] = want[:, :2] = True
    want[:, np.arange(20) % 4 == 3] = True
    assert np.array_equal(got, want)


def test_random_blocks_are_seeded_and_add_to_the_pattern():
    spec = dict(seq_len=64 * 40, block=64, local_blocks=1, random_blocks=3)
    a, b = blocks(seed=1, **spec), blocks(seed=1, **spec)
    assert np.array_equal(a, b)  # same seed, same mask: reproducible across calls
    others = [blocks(seed=s, **spec) for s in (2, 3)]
    assert all(not np.array_equal(a, o) for o in others)
    base = band(40, 1)
    for m in [a] + others:
        assert (m >= base).all()  # random blocks only add
        extra = (m & ~base).sum(axis=1)
        assert extra.max() <= 3 and (m.sum(axis=1) > 1).mean() > 0.9


def test_random_blocks_only_pattern():
    got = blocks(seq_len=64 * 30, block=64, local_blocks=0, random_blocks=2, seed=9)
    per_row = got.sum(axis=1)
    assert per_row.min() >= 1 and per_row.max() <= 2


def test_seed_is_ignored_without_random_blocks():
    assert np.array_equal(blocks(seq_len=640, block=64, local_blocks=2, seed=1),
                          blocks(seq_len=640, block=64, local_blocks=2, seed=12345))


def test_properties_and_density():
    bm = attnzoo.block_mask(1000, block=64, local_blocks=2, global_tokens=64, stride=5, random_blocks=1, seed=4)
    m = np.asarray(bm.blocks())
    assert bm.block == 64 and bm.num_blocks == 16 and bm.seq_len == 1000
    assert m.dtype == np.uint8 and set(np.unique(m)) <= {0, 1}
    assert bm.density() == pytest.approx(m.mean())
    assert 0 < bm.density() < 1
    assert all(bm.block_visible(i, j) == bool(m[i, j]) for i in range(16) for j in range(16))
    assert attnzoo.block_mask(640, block=64, local_blocks=10).density() == 1.0
    assert attnzoo.block_mask(640, block=64, local_blocks=0).density() == 0.0
    assert attnzoo.block_mask(640, block=64, local_blocks=1).density() == pytest.approx(0.1)


def test_blocks_is_a_copy():
    bm = attnzoo.block_mask(128, block=32, local_blocks=1)
    m = np.asarray(bm.blocks())
    m[:] = 0
    assert np.asarray(bm.blocks()).trace() == 4


@pytest.mark.parametrize("field,spec", [
    ("seq_len", dict(seq_len=0)),
    ("seq_len", dict(seq_len=-5)),
    ("block", dict(seq_len=100, block=0)),
    ("block", dict(seq_len=100, block=65537)),
    ("local_blocks", dict(seq_len=100, local_blocks=-1)),
    ("global_tokens", dict(seq_len=100, global_tokens=-1)),
    ("stride", dict(seq_len=100, stride=-2)),
    ("random_blocks", dict(seq_len=100, random_blocks=-1)),
    ("seq_len", dict(seq_len=65537, block=1)),  # more than 65536 blocks
])
def test_invalid_spec_names_the_field(field, spec):
    with pytest.raises(ValueError) as info:
        attnzoo.block_mask(**spec)
    assert str(info.value).startswith(field + ":"), str(info.value)


def run_isolated(code, timeout=20):
    """Runs `code` in a fresh interpreter, so a crash or a hang fails one test instead of the session."""
    return subprocess.run([sys.executable, "-c", "import attnzoo\n" + code], capture_output=True, text=True,
                          timeout=timeout)


def test_huge_seq_len_is_refused_not_a_crash():
    r = run_isolated("import numpy as np\n"
                     "try:\n"
                     "    bm = attnzoo.block_mask(2**63 - 1, block=2)\n"
                     "except ValueError as e:\n"
                     "    assert str(e).startswith('seq_len:'), e\n"
                     "    raise SystemExit(0)\n"
                     "q = np.zeros((1, 4, 1, 8), np.float32)\n"
                     "attnzoo.attention(q, q, q, block_mask=bm)\n"
                     "raise SystemExit(3)\n")
    assert r.returncode == 0, (r.returncode, r.stderr[-500:])


def test_huge_random_blocks_returns_promptly():
    try:
        r = run_isolated("try:\n"
                         "    attnzoo.block_mask(640, block=64, random_blocks=10**15)\n"
                         "except ValueError as e:\n"
                         "    assert str(e).startswith('random_blocks:'), e\n", timeout=5)
    except subprocess.TimeoutExpired:
        pytest.fail("block_mask(random_blocks=10**15) hangs")
    assert r.returncode == 0, r.stderr[-500:]


def test_huge_global_tokens_make_everything_global():
    try:
        got = blocks(seq_len=100, block=10, local_blocks=1, global_tokens=2**63 - 1)
    except ValueError as e:
        assert str(e).startswith("global_tokens:")
        return
    assert got.all()


@pytest.mark.parametrize("block", [1, 8, 24, 50, 64, 100, 200])
@pytest.mark.parametrize("causal", [True, False])
def test_attention_honours_the_expanded_mask(block, causal, simd_target):
    # Block sizes that do not match the kernel's key tiles: tiles then straddle visible and hidden blocks.
    Tq, Tk = 90, 230
    bm = attnzoo.block_mask(Tk, block=block, local_blocks=2, global_tokens=block // 2 + 1, stride=3,
                            random_blocks=1, seed=block)
    g = torch.Generator().manual_seed(block)
    q, k, v = (torch.randn(1, T, H, 40, generator=g) for T, H in ((Tq, 4), (Tk, 2), (Tk, 2)))
    out = attnzoo.attention(q, k, v, causal=causal, block_mask=bm)
    visible = token_visibility(Tq, Tk, causal=causal, block_mask=bm)
    want = softmax_reference(q, k, v, visible)
    assert float((out.double() - want).abs().max()) <= 2e-5


def test_one_mask_serves_sequences_of_every_length_and_packed_batches():
    bm = attnzoo.block_mask(200, block=16, local_blocks=1, stride=4)
    g = torch.Generator().manual_seed(0)
    lens = [200, 37, 1, 120]
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    q, k, v = (torch.randn(int(cu[-1]), 2, 32, generator=g) for _ in range(3))
    packed = attnzoo.attention(q, k, v, cu_seqlens=cu, block_mask=bm, sinks=torch.tensor([0.0, 1.0]))
    for s, T in enumerate(lens):
        sl = slice(int(cu[s]), int(cu[s + 1]))
        alone = attnzoo.attention(q[None, sl], k[None, sl], v[None, sl], block_mask=bm, sinks=torch.tensor([0.0, 1.0]))
        # Positions restart at every sequence: block b of a sequence is block b of the mask.
        want = softmax_reference(q[None, sl], k[None, sl], v[None, sl], token_visibility(T, T, block_mask=bm),
                                 sinks=[0.0, 1.0])
        assert float((alone.double() - want).abs().max()) <= 2e-5
        assert float((packed[sl].double() - want[0]).abs().max()) <= 2e-5
