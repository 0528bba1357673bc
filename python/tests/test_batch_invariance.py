"""Batch-invariant numerics (attnzoo.set_batch_invariant, `--batch-invariant`): with the mode on, a token's logits
are bit for bit the same however it is computed - in one prompt, in pieces of any size, decoded one token at a
time, beside other sequences' prefills or in a batch of decodes, after a prefix-cache hit - on block-quantized
weights of each kind of integer row kernel and past the decode kernel's fixed chunk
boundaries (256 keys). Then greedy answers served at concurrency 16 with prefix caching equal the one-at-a-time
answers and a repeat (the default model, a shared system prompt)."""
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import attnzoo  # noqa: E402
import model_checks as checks  # noqa: E402
from attnzoo.engine import LLM, SamplingParams  # noqa: E402
from attnzoo.model import Model  # noqa: E402

VOCAB = 512
N = 300  # past the decode kernel's first chunk boundary
SMOLLM2 = os.path.join(os.path.dirname(__file__), "..", "..", ".models", "SmolLM2-135M-Instruct.Q4_1.gguf")


@pytest.fixture(autouse=True)
def invariant():
    previous = attnzoo.batch_invariant()
    attnzoo.set_batch_invariant(True)
    yield
    attnzoo.set_batch_invariant(previous)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                                      rms_norm_eps=1e-5, initializer_range=0.05, tie_word_embeddings=False)
    directory = str(tmp_path_factory.mktemp("llama"))
    checks.save_random_model("invariance", config, directory, checks.randomize_vectors(0.5))
    return directory


# The integer rows' kinds on AVX-512 VNNI CPUs: blocks of 32 with a minimum (Q4_1), K-quants with minima (Q4_K)
# and with per-row offsets (Q6_K); Q5_K takes the AVX2 rows there (and everything does on AVX2-only CPUs).
@pytest.fixture(scope="module", params=["Q4_1", "Q4_K", "Q6_K", "Q5_K"])
def model(request, checkpoint, tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / f"{request.param}.gguf"
    attnzoo.quantize(checkpoint, path, type=request.param)
    return Model.load(str(path), enable_prefix_caching=True, kv_cache_bytes=64 << 20)


def _ids(n, seed):
    return np.random.default_rng(seed).integers(0, VOCAB, n).astype(np.int32)


def _pieces(m, ids, sizes):
    seq, rows, start, i = m.new_sequence(), [], 0, 0
    while start < len(ids):
        size = sizes[i % len(sizes)]
        rows.append(m.forward(ids[start:start + size], seq=seq))
        start, i = start + size, i + 1
    return np.concatenate(rows)


def test_pieces_and_decode_equal_the_whole_prompt(model):
    ids = _ids(N, 1)
    model.clear_prefix_cache()
    whole = model.forward(ids)
    for sizes in ([1], [3, 9, 17], [8], [100, 1, 64]):
        model.clear_prefix_cache()
        np.testing.assert_array_equal(_pieces(model, ids, sizes), whole, err_msg=f"pieces {sizes}")


def test_batch_neighbours_and_prefix_hits_change_nothing(model):
    ids = _ids(N, 2)
    model.clear_prefix_cache()
    whole = model.forward(ids)
    # A cache hit on the first 256 tokens, the rest in one piece
    np.testing.assert_array_equal(model.forward(ids, seq=model.new_sequence())[256:], whole[256:])
    # Decoding beside other sequences' prefills, then inside a batch of 16 decodes
    model.clear_prefix_cache()
    seq = model.new_sequence()
    rows = [model.forward(ids[:250], seq=seq)]
    others = [model.new_sequence() for _ in range(15)]
    for t in range(250, 270):
        out = model.forward_batch([seq, others[t % 3]], [ids[t:t + 1], _ids(11, t)])
        rows.append(out[0])
    for o in others:
        model.forward(_ids(5, 99), seq=o)
    for t in range(270, N):
        out = model.forward_batch([seq] + others, [ids[t:t + 1]] + [_ids(1, t + i) for i in range(15)])
        rows.append(out[0])
    np.testing.assert_array_equal(np.concatenate(rows), whole)


def test_served_greedy_answers_do_not_depend_on_the_load():
    if not os.path.exists(SMOLLM2):
        pytest.skip("the default model is missing: run scripts/setup.sh")
    cached = Model.load(SMOLLM2, kv_cache_bytes=256 << 20)
    uncached = Model.load(SMOLLM2, kv_cache_bytes=256 << 20, enable_prefix_caching=False)
    tok = cached.tokenizer
    system = list(tok.encode("You are a helpful assistant. Answer briefly and precisely. " * 6))
    prompts = [system + list(tok.encode(f"Question {i}: what is {i} plus {2 * i + 1}? Tell me about {i}."))
               [: 4 + i % 20] for i in range(12)]
    params = SamplingParams(max_tokens=16, temperature=0)

    def answers(m, max_num_seqs):
        llm = LLM(m, max_num_seqs=max_num_seqs, max_num_batched_tokens=256)
        try:
            return [o.outputs[0].token_ids for o in llm.generate(prompts, params)]
        finally:
            llm.stop()

    alone = answers(uncached, 1)
    assert answers(cached, 16) == alone
    assert answers(cached, 16) == alone  # the repeat: every prompt now a prefix-cache hit


def test_the_environment_turns_it_on_and_a_bad_value_is_named():
    import subprocess
    import sys
    code = "import attnzoo; print(attnzoo.batch_invariant())"
    for value, want in (("1", "True"), ("0", "False")):
        env = dict(os.environ, ATTNZOO_BATCH_INVARIANT=value)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.strip() == want
    env = dict(os.environ, ATTNZOO_BATCH_INVARIANT="yes")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode != 0 and "ATTNZOO_BATCH_INVARIANT: expected 0 or 1, got 'yes'" in out.stderr
