"""The memory pool across architecture families: prefix caching (dense, MoE, sliding window, MLA, Gated DeltaNet,
KDA, Mamba-2, RWKV-7 and parallel hybrids), forks that diverge inside a shared block, eviction under memory
pressure, and exhaustion that leaves every other sequence intact.

The reference for a prefix hit is the same model with prefix caching off, fed the same pieces: a hit must restore
exactly the KV blocks and recurrent state that computing the prefix would have produced."""
import importlib

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from attnzoo.model import Model, PoolExhaustedError  # noqa: E402

# (test module, kind): one tiny checkpoint per family, built by that family's own test module.
FAMILIES = [
    ("test_model_llama", "qwen3"),                    # dense, q/k norm
    ("test_model_llama", "mistral_swa"),              # sliding window everywhere (blocks returned)
    ("test_model_gemma", "gemma2"),                   # alternating windows, softcap
    ("test_model_gpt_oss", "alternating_no_truncate"),  # MoE, sinks
    ("test_model_deepseek_v3", "q_lora_yarn"),        # MLA latent cache
    ("test_model_qwen3_next", "moe_interval"),        # Gated DeltaNet + gated attention hybrid
    ("test_model_kimi_linear", "moe"),                # KDA + NoPE MLA hybrid
    ("test_model_mamba2", "g1_conv4"),                # pure SSM
    ("test_model_rwkv7", "plain"),                    # RWKV-7
    ("test_model_falcon_h1", "gated_norm_g2"),        # attention beside Mamba-2 in every layer
]
BLOCK = 7  # odd on purpose: pieces straddle blocks


@pytest.fixture(scope="module", params=FAMILIES, ids=lambda f: f"{f[0][11:]}-{f[1]}")
def family(request, tmp_path_factory):
    module_name, kind = request.param
    module = importlib.import_module(module_name)
    if module_name == "test_model_rwkv7":
        kind = list(module.CONFIGS)[0]
    directory = tmp_path_factory.mktemp(kind)
    module._build(kind, directory)
    vocab = module.VOCAB
    return directory, vocab


def _load(directory, **kwargs):
    kwargs.setdefault("block_size", BLOCK)
    # Snapshot recurrent state at every block boundary so hybrid models can hit at any block.
    kwargs.setdefault("snapshot_interval_blocks", 1)
    kwargs.setdefault("shuffle_blocks_seed", 11)
    return Model.load(directory, **kwargs)


def _ids(vocab, n, seed):
    return np.random.default_rng(seed).integers(0, vocab, n).astype(np.int32)


def _cold(directory, pieces):
    """Last-token logits of each piece fed in turn to one sequence of a model without prefix caching."""
    m = _load(directory, enable_prefix_caching=False)
    seq = m.new_sequence()
    return [m.forward(p, seq=seq, last_only=True) for p in pieces]


def test_prefix_hit_restores_blocks_and_state_exactly(family):
    directory, vocab = family
    m = _load(directory)
    shared = _ids(vocab, 30, 1)  # 4 whole blocks of 7 and 2 tokens into the fifth: the prefix ends mid-block
    a = np.concatenate([shared, _ids(vocab, 9, 2)])
    b = np.concatenate([shared, _ids(vocab, 12, 3)])
    first = m.new_sequence()
    m.forward(a, seq=first, last_only=True)
    assert first.cached_tokens == 0
    second = m.new_sequence()
    got = m.forward(b, seq=second, last_only=True)
    assert second.cached_tokens == 28  # whole blocks only
    stats = m.pool_stats()
    assert stats["prefix_cache_hits"] == 28 and stats["prefix_cache_queries"] == len(a) + len(b)
    want = _cold(directory, [b[:28], b[28:]])
    np.testing.assert_allclose(got, want[1], atol=1e-5, rtol=0)
    # Decoding on from the hit matches decoding on from the cold computation.
    cold = _load(directory, enable_prefix_caching=False)
    cold_seq = cold.new_sequence()
    cold.forward(b[:28], seq=cold_seq)
    cold.forward(b[28:], seq=cold_seq)
    for t in [5, 17, 3]:
        np.testing.assert_allclose(m.forward([t], seq=second), cold.forward([t], seq=cold_seq), atol=1e-5, rtol=0)


def test_fork_diverging_inside_a_shared_block(family):
    directory, vocab = family
    m = _load(directory)
    prompt = _ids(vocab, 10, 4)  # one whole block and 3 tokens of the second, which the fork shares
    parent = m.new_sequence()
    m.forward(prompt, seq=parent)
    child = m.fork(parent)
    assert child.length == parent.length == 10 and child.block_table == parent.block_table
    x, y = _ids(vocab, 5, 5), _ids(vocab, 6, 6)
    got_child = m.forward(x, seq=child)
    got_parent = m.forward(y, seq=parent)
    if m.pool_stats()["num_blocks"]:  # models with paged layers: the partly filled block was copied first
        assert child.block_table[0] == parent.block_table[0] and child.block_table[1] != parent.block_table[1]
    want_child = _cold(directory, [prompt, x])[1]
    want_parent = _cold(directory, [prompt, y])[1]
    np.testing.assert_allclose(got_child[-1:], want_child, atol=1e-5, rtol=0)
    np.testing.assert_allclose(got_parent[-1:], want_parent, atol=1e-5, rtol=0)


def test_exhaustion_is_reported_before_writing_and_eviction_stays_exact(family):
    directory, vocab = family
    probe = _load(directory)
    stats = probe.pool_stats()
    # A pool of exactly 12 blocks per block group (or, for state-only models, 3 sequences' state and few snapshots).
    budget = stats["block_bytes"] * 12 * max(1, len(stats["block_groups"])) + stats["state_slot_bytes"] * 3
    m = _load(directory, kv_cache_bytes=budget, max_num_seqs=3)
    keep = m.new_sequence()
    first = _ids(vocab, 20, 7)
    m.forward(first, seq=keep, last_only=True)
    before = m.forward([1], seq=keep, last_only=True)
    if m.pool_stats()["num_blocks"]:
        hog = m.new_sequence()
        with pytest.raises(PoolExhaustedError, match="blocks"):
            m.forward(_ids(vocab, 200, 8), seq=hog)
        assert hog.length == 0  # nothing was written
        del hog
    else:
        others = [m.new_sequence() for _ in range(2)]
        with pytest.raises(PoolExhaustedError, match="max_num_seqs"):
            m.new_sequence()
        del others
    # The sequence that was already there goes on exactly as if nothing had happened.
    cold = _load(directory, enable_prefix_caching=False)
    cs = cold.new_sequence()
    cold.forward(first, seq=cs)
    np.testing.assert_allclose(before, cold.forward([1], seq=cs), atol=1e-5, rtol=0)
    np.testing.assert_allclose(m.forward([2], seq=keep), cold.forward([2], seq=cs), atol=1e-5, rtol=0)
    # Churn through other prompts so cached blocks get evicted, then reuse what is left: still exact.
    for s in range(4):
        tmp = m.new_sequence()
        m.forward(_ids(vocab, 30, 20 + s), seq=tmp, last_only=True)
        del tmp
    again = m.new_sequence()
    prompt = np.concatenate([first, _ids(vocab, 4, 9)])
    got = m.forward(prompt, seq=again, last_only=True)
    hit = again.cached_tokens
    assert hit % BLOCK == 0
    pieces = [prompt[:hit], prompt[hit:]] if hit else [prompt]
    np.testing.assert_allclose(got, _cold(directory, pieces)[-1], atol=1e-5, rtol=0)


def test_ragged_batch_of_prefills_matches_each_sequence_alone(family):
    """Prompts of different lengths go through the layers together (one packed paged prefill per softmax / MLA
    layer), alone or beside a sequence that decodes in the same batch; each must equal its own cold run."""
    directory, vocab = family
    m = _load(directory)
    prompts = [_ids(vocab, n, 40 + n) for n in (19, 9, 33)]
    seqs = [m.new_sequence() for _ in prompts]
    got = m.forward_batch(seqs, prompts)
    for p, g in zip(prompts, got):
        np.testing.assert_allclose(g, _full(directory, p), atol=1e-4, rtol=0)
    # A mixed batch: the first sequence decodes one token while two new ones prefill (rows packed for the call).
    fresh = [_ids(vocab, 12, 50), _ids(vocab, 26, 51)]
    step = _ids(vocab, 1, 52)
    got = m.forward_batch([seqs[0], m.new_sequence(), m.new_sequence()], [step, *fresh])
    np.testing.assert_allclose(got[0], _cold(directory, [prompts[0], step])[1], atol=1e-4, rtol=0)
    for p, g in zip(fresh, got[1:]):
        np.testing.assert_allclose(g, _full(directory, p), atol=1e-4, rtol=0)


def _full(directory, ids):
    """Logits of every position of ids, one fresh sequence of a model without prefix caching."""
    return _load(directory, enable_prefix_caching=False).forward(ids)


# bf16 K/V rounds every cached key and value to 8 mantissa bits; on these tiny random models that moves the logits
# by under 1% of their spread (measured: at most 0.34%, qwen3), while a wrong read (bad block, wrong dtype stride)
# moves them by their whole spread.
BF16_KV_TOLERANCE = 0.01


def test_bf16_kv_cache_matches_f32_kv_cache(family):
    directory, vocab = family
    ref, m = _load(directory, kv_cache_dtype="float32"), _load(directory, kv_cache_dtype="bfloat16")
    prompt = _ids(vocab, 23, 60)
    a, b = ref.new_sequence(), m.new_sequence()
    want = [ref.forward(prompt, seq=a)] + [ref.forward([t], seq=a) for t in (3, 11, 7)]
    got = [m.forward(prompt, seq=b)] + [m.forward([t], seq=b) for t in (3, 11, 7)]
    paged = m.pool_stats()["num_blocks"] > 0
    for w, g in zip(want, got):
        spread = float(np.max(w) - np.min(w))
        err = float(np.max(np.abs(g - w)))
        assert err <= BF16_KV_TOLERANCE * spread, (err, spread)
    if paged:  # the bf16 cache is really read (state-only models have no KV to round)
        assert max(float(np.max(np.abs(g - w))) for w, g in zip(want, got)) > 0


# int8 / fp8 K/V (and MLA latents) with one float32 scale per token and head, against a bf16 cache, as a fraction of
# the logits' spread. Decode steps average the quantization error over every key: measured at most 0.9% (int8) and
# 3.6% (fp8, qwen3) on these tiny random models. The prompt's first positions see one or two keys, so one row's
# error reaches the logits whole: at most 0.6% / 3.9%, except DeepSeek-V3's MLA latents, whose c_kv and RoPE'd
# k_pe share one scale per row: 5.6% / 10.3%. A wrong read (a scale of another row or block, a missed scale)
# moves the logits by their whole spread.
QUANT_KV_TOLERANCE = {"int8": (0.08, 0.02), "fp8": (0.15, 0.05)}  # (prompt rows, decode steps)


@pytest.mark.parametrize("kind", ["int8", "fp8"])
def test_quantized_kv_cache_matches_bf16_kv_cache(family, kind):
    directory, vocab = family
    ref, m = _load(directory, kv_cache_dtype="bfloat16"), _load(directory, kv_cache_dtype=kind)
    if m.pool_stats()["num_blocks"] == 0:
        pytest.skip("no softmax / MLA layer: nothing is quantized")
    prompt = _ids(vocab, 23, 60)
    a, b = ref.new_sequence(), m.new_sequence()
    want = [ref.forward(prompt, seq=a)] + [ref.forward([t], seq=a) for t in (3, 11, 7)]
    got = [m.forward(prompt, seq=b)] + [m.forward([t], seq=b) for t in (3, 11, 7)]
    errs = [float(np.max(np.abs(g - w))) / float(np.max(w) - np.min(w)) for w, g in zip(want, got)]
    prompt_tol, decode_tol = QUANT_KV_TOLERANCE[kind]
    assert errs[0] <= prompt_tol and max(errs[1:]) <= decode_tol, errs
    assert min(errs) > 0  # the quantized cache is really read


@pytest.mark.parametrize("kind", ["int8", "fp8"])
def test_prefix_hits_and_forks_carry_quantized_blocks_exactly(family, kind):
    """A prefix hit and a fork's copied block hold the very bytes and scales computing them would: the logits
    match a cold model with the same quantized cache exactly."""
    directory, vocab = family
    m = _load(directory, kv_cache_dtype=kind)
    if m.pool_stats()["num_blocks"] == 0:
        pytest.skip("no softmax / MLA layer: nothing is quantized")
    shared = _ids(vocab, 30, 1)
    a = np.concatenate([shared, _ids(vocab, 9, 2)])
    b = np.concatenate([shared, _ids(vocab, 12, 3)])
    # The shared 28 tokens go through the model in a call of their own, as in the cold model below: a SIMD prefill
    # of 39 tokens may differ from one of 28 in the last bit of some K / V value, enough to flip its 8-bit rounding.
    first = m.new_sequence()
    m.forward(a[:28], seq=first)
    m.forward(a[28:], seq=first, last_only=True)
    second = m.new_sequence()
    got = m.forward(b, seq=second, last_only=True)
    assert second.cached_tokens == 28
    cold = _load(directory, kv_cache_dtype=kind, enable_prefix_caching=False)
    cold_seq = cold.new_sequence()
    cold.forward(b[:28], seq=cold_seq)
    np.testing.assert_allclose(got, cold.forward(b[28:], seq=cold_seq, last_only=True), atol=1e-5, rtol=0)
    # 43 tokens: a fork shares the partly filled last block; writing into it copies the block with its scales first.
    np.testing.assert_allclose(m.forward([4], seq=second), cold.forward([4], seq=cold_seq), atol=1e-5, rtol=0)
    child = m.fork(second)
    cold_child = cold.fork(cold_seq)
    for t in [5, 17]:
        np.testing.assert_allclose(m.forward([t], seq=child), cold.forward([t], seq=cold_child), atol=1e-5, rtol=0)
    for t in [9, 2]:
        np.testing.assert_allclose(m.forward([t], seq=second), cold.forward([t], seq=cold_seq), atol=1e-5, rtol=0)
