"""attnzoo.lsh_attention (Reformer's LSH self-attention): against a dense float64 torch formulation on the same
bucket assignment (a [T, T] count matrix per round instead of sorted chunks), against transformers'
LSHSelfAttention itself (same rotations drawn from the same seed: same buckets, same outputs), and its checks."""
import math

import numpy as np
import pytest
import torch

import attnzoo
from attnzoo.conformance.softmax import reformer_lsh_module

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def inputs(B, T, H, D, Dv, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, T, H, D, generator=g), torch.randn(B, T, H, Dv, generator=g)


def rotations(H, D, num_hashes, num_buckets, seed):
    return torch.randn(H, D, num_hashes, num_buckets // 2, generator=torch.Generator().manual_seed(seed))


def dense_lsh(qk, v, buckets, chunk_length, causal):
    """Every query slot's key multiset as counts over positions, then dense attention with log(count) added."""
    qk, v = qk.double(), v.double()
    B, T, H, D = qk.shape
    R = buckets.shape[2] if T > chunk_length else 1
    out = torch.empty(B, T, H, v.shape[-1], dtype=torch.float64)
    pos = torch.arange(T)
    for b in range(B):
        for h in range(H):
            x = qk[b, :, h]
            keys = x / torch.sqrt((x ** 2).mean(-1, keepdim=True) + 1e-6) / math.sqrt(D)
            scores = x @ keys.T
            scores[pos, pos] = -1e5  # a token's own position (Reformer's self mask)
            if causal:
                scores = scores.masked_fill(pos[None, :] > pos[:, None], -math.inf)
            if T <= chunk_length:
                slot_pos, slot_round = pos, torch.zeros(T, dtype=torch.long)
            else:
                key = (torch.arange(R)[:, None] * (buckets.max() + 1) + buckets[b, h].long()) * T + pos
                order = torch.argsort(key.flatten())
                slot_pos, slot_round = order % T, order // T
            N = len(slot_pos)
            chunk = torch.arange(N) // chunk_length
            n_chunks = int(chunk[-1]) + 1
            seen = chunk[:, None] == chunk[None, :]
            if n_chunks > 1:
                seen |= chunk[None, :] == (chunk[:, None] - 1) % n_chunks
            counts = seen.double() @ torch.nn.functional.one_hot(slot_pos, T).double()  # [slots, positions]
            logits = scores[slot_pos] + counts.log()
            lse = torch.logsumexp(logits, -1)
            o = torch.softmax(logits, -1) @ v[b, :, h]
            lse_r = torch.full((R, T), -math.inf, dtype=torch.float64)
            o_r = torch.zeros(R, T, v.shape[-1], dtype=torch.float64)
            lse_r[slot_round, slot_pos], o_r[slot_round, slot_pos] = lse, o
            out[b, :, h] = (torch.softmax(lse_r, 0)[..., None] * o_r).sum(0)
    return out


@pytest.mark.parametrize("T,chunk,num_hashes,num_buckets", [(96, 16, 3, 8), (77, 16, 2, 4), (130, 32, 1, 16),
                                                            (40, 64, 2, 4), (64, 8, 4, 2)])
@pytest.mark.parametrize("causal", [False, True])
def test_equals_the_dense_formulation_on_the_same_buckets(T, chunk, num_hashes, num_buckets, causal, simd_target):
    qk, v = inputs(2, T, 2, 32, 24, T)
    rot = rotations(2, 32, num_hashes, num_buckets, T + 1)
    buckets = attnzoo.lsh_hash(qk, rot)
    assert buckets.shape == (2, 2, num_hashes, T) and buckets.dtype == torch.int32
    assert int(buckets.min()) >= 0 and int(buckets.max()) < num_buckets
    out = attnzoo.lsh_attention(qk, v, buckets=buckets, chunk_length=chunk, causal=causal)
    want = dense_lsh(qk, v, buckets, chunk, causal)
    assert float((out.double() - want).abs().max()) <= 1e-5
    ref = attnzoo.lsh_attention(qk, v, buckets=buckets, chunk_length=chunk, causal=causal, reference=True)
    assert float((ref.double() - want).abs().max()) <= 1e-6
    hashed_inside = attnzoo.lsh_attention(qk, v, rot, chunk_length=chunk, causal=causal)
    assert torch.equal(hashed_inside, out)


def test_buckets_are_the_argmax_of_the_rotations():
    qk, _ = inputs(1, 50, 2, 16, 16, 3)
    rot = rotations(2, 16, 3, 12, 4)
    rotated = torch.einsum("bthd,hdrk->bhrtk", qk.double(), rot.double())
    want = torch.cat([rotated, -rotated], -1).argmax(-1)
    assert torch.equal(attnzoo.lsh_hash(qk, rot).long(), want)
    assert np.array_equal(attnzoo.lsh_hash(qk.numpy(), rot.numpy()), want.numpy())


def test_a_causal_first_token_attends_to_itself_only():
    qk, v = inputs(1, 100, 3, 16, 8, 5)
    out = attnzoo.lsh_attention(qk, v, rotations(3, 16, 2, 4, 6), chunk_length=16, causal=True)
    assert torch.allclose(out[0, 0], v[0, 0], atol=1e-6)


@pytest.mark.parametrize("T,chunk,num_hashes,num_buckets,causal", [(128, 32, 2, 8, True), (96, 16, 4, 6, False),
                                                                   (48, 64, 2, 4, True)])
def test_matches_transformers_lsh_self_attention(T, chunk, num_hashes, num_buckets, causal):
    """Buckets from transformers' own float32 run; outputs against its float64 run on those buckets. Its float32
    outputs are off by up to 0.5% where a token sees only itself: the rounds' log-sum-exps are then near -1e5,
    where float32 values lie 0.0078 apart, and its exp(lse - logsumexp(lse)) weights no longer sum to 1."""
    pytest.importorskip("transformers")
    B, H, D, seed = 2, 2, 32, 7
    qk, v = inputs(B, T, H, D, D, 11)
    module = reformer_lsh_module(torch, H, D, num_hashes, num_buckets, chunk, causal, seed)
    hidden = torch.cat([qk.reshape(B, T, H * D), v.reshape(B, T, H * D)], -1)
    with torch.no_grad():
        theirs32 = module(hidden)
        theirs = module.double()(hidden.double(), buckets=theirs32.buckets)
    torch.manual_seed(seed)  # the draw transformers makes after seeding with hash_seed
    rot = torch.randn(H, D, num_hashes, num_buckets // 2)
    ours = attnzoo.lsh_attention(qk, v, rot, chunk_length=chunk, causal=causal)
    if T > chunk:  # transformers hashes only then; its buckets carry r * num_buckets per round
        offsets = (torch.arange(num_hashes) * num_buckets).view(1, 1, -1, 1)
        assert torch.equal(attnzoo.lsh_hash(qk, rot).long(), theirs32.buckets - offsets)
        given = attnzoo.lsh_attention(qk, v, buckets=theirs32.buckets - offsets, chunk_length=chunk, causal=causal)
        assert torch.equal(given, ours)
    assert float((ours.reshape(B, T, H * D).double() - theirs.hidden_states).abs().max()) <= 1e-5


def test_bfloat16_inputs_follow_the_f32_result():
    qk, v = inputs(1, 90, 2, 32, 32, 8)
    buckets = attnzoo.lsh_hash(qk, rotations(2, 32, 2, 8, 9))
    want = attnzoo.lsh_attention(qk.bfloat16().float(), v.bfloat16().float(), buckets=buckets, chunk_length=16)
    got = attnzoo.lsh_attention(qk.bfloat16(), v.bfloat16(), buckets=buckets, chunk_length=16)
    assert got.dtype == torch.bfloat16
    assert float((got.float() - want).abs().max()) <= 2e-2


@pytest.mark.parametrize("kwargs,match", [
    (dict(), "rotations: give"),
    (dict(rotations=torch.zeros(2, 16, 1, 2), buckets=torch.zeros(1, 2, 1, 20, dtype=torch.int32)), "rotations: give"),
    (dict(rotations=torch.zeros(2, 15, 1, 2)), "rotations:"),
    (dict(rotations=torch.zeros(2, 16, 1, 2, dtype=torch.float64)), "rotations"),
    (dict(buckets=torch.full((1, 2, 1, 20), -1, dtype=torch.int32)), "buckets:"),
    (dict(buckets=torch.zeros(1, 2, 1, 19, dtype=torch.int32)), "buckets:"),
    (dict(buckets=torch.zeros(1, 2, 1, 20)), "buckets:"),
    (dict(buckets=torch.zeros(1, 2, 1, 20, dtype=torch.int32), chunk_length=0), "chunk_length:"),
    (dict(buckets=torch.zeros(1, 2, 1, 20, dtype=torch.int32), v=torch.zeros(1, 20, 3, 16)), "v:"),
])
def test_bad_arguments_are_named(kwargs, match):
    qk = torch.randn(1, 20, 2, 16)
    v = kwargs.pop("v", torch.randn(1, 20, 2, 16))
    with pytest.raises((ValueError, TypeError), match=match):
        attnzoo.lsh_attention(qk, v, **kwargs)


def test_non_finite_inputs_are_refused():
    qk, v = inputs(1, 20, 2, 16, 16, 1)
    qk[0, 3, 1, 2] = math.nan
    with pytest.raises(ValueError, match="qk"):
        attnzoo.lsh_attention(qk, v, rotations(2, 16, 1, 4, 2))
