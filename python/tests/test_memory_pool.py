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
    # A pool of exactly 12 blocks (or, for state-only models, 3 sequences' state and few snapshots).
    budget = stats["block_bytes"] * 12 + stats["state_slot_bytes"] * 3
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
