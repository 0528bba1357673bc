"""Phi-3 / Phi-3.5 / Phi-4 (Phi3ForCausalLM: fused qkv_proj and gate_up_proj, partial RoPE, LongRoPE with short
and long per-frequency factors and its attention factor, an optional sliding window) against transformers (eager
attention, float32) on tiny random checkpoints: whole prompt, pieces, token-by-token decode over paged blocks,
greedy continuation, ragged batches.

Which LongRoPE factor set runs: transformers takes the long one whenever a forward pass reaches past
original_max_position_embeddings; attnzoo (like llama.cpp and vLLM) fixes it per model, long when
max_position_embeddings exceeds the original context. The two agree on prompts longer than the original
context of a long-context model (kind long_partial: original 16, prompt 40) and on every prompt of a model whose
context is the original one (kind short_window: short factors)."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import checkpoint_edits as edits  # noqa: E402
import gguf_checks  # noqa: E402
import model_checks as checks  # noqa: E402
from attnzoo.model import Model  # noqa: E402

VOCAB = 320


def _factors(n, seed):
    return [round(float(x), 3) for x in np.random.default_rng(seed).uniform(1.0, 6.0, size=n)]


def _config(kind):
    common = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, rms_norm_eps=1e-5, initializer_range=0.1, pad_token_id=0,
                  bos_token_id=1, eos_token_id=2)
    if kind == "long_partial":  # Phi-4-mini's shape: partial rotary, LongRoPE with a 16x longer context
        return transformers.Phi3Config(
            max_position_embeddings=256, original_max_position_embeddings=16, tie_word_embeddings=True,
            rope_parameters=dict(rope_type="longrope", rope_theta=10000.0, partial_rotary_factor=0.5,
                                 short_factor=_factors(4, 1), long_factor=_factors(4, 2)), **common)
    if kind == "short_window":  # Phi-3-mini-4k's shape: a sliding window over the prompt, short factors
        return transformers.Phi3Config(
            max_position_embeddings=64, original_max_position_embeddings=64, sliding_window=12,
            tie_word_embeddings=False,
            rope_parameters=dict(rope_type="longrope", rope_theta=10000.0, short_factor=_factors(8, 3),
                                 long_factor=_factors(8, 4)), **common)
    raise ValueError(kind)


KINDS = ["long_partial", "short_window"]


checks.define_family_tests(globals(), _config, KINDS, checks.randomize_vectors(1.0), VOCAB)


def test_inspect_and_the_factor_set(case, tmp_path):
    """inspect's layers; and the factors really matter: the other set (or no attention factor) moves the logits."""
    kind, ref, m, ids, want = case
    window = 12 if kind == "short_window" else 0
    kinds = [(x["kind"], x["window"]) for x in m.inspect()["layers"]]
    assert kinds == [("sliding_attention" if window else "attention", window)] * 2

    def swap(c):
        rope = c["rope_parameters"]
        rope["short_factor"], rope["long_factor"] = rope["long_factor"], rope["short_factor"]
    swapped = Model.load(edits.copy_with(m.directory, tmp_path / "swapped", config_edit=swap))
    assert np.abs(swapped.forward(ids) - want).max() > 1e-2
    if kind == "long_partial":  # attention factor sqrt(1 + ln 16 / ln 16)
        assert ref.model.rotary_emb.attention_scaling == pytest.approx(math.sqrt(2))


def test_gguf_from_quantize(case, tmp_path):
    """The F32 GGUF `attnzoo quantize` writes: the fused projections under the gguf package's names, both LongRoPE
    factor sets as tensors and the converter's keys; loading it gives the same logits."""
    gguf = pytest.importorskip("gguf")
    kind, ref, m, ids, want = case
    rope = ref.config.rope_parameters
    reader = gguf_checks.check_gguf_of_checkpoint(
        ref, m.directory, str(tmp_path / "p.gguf"), gguf.MODEL_ARCH.PHI3, ids, want, VOCAB, prefill=30,
        extra={"rope_factors_long.weight": rope["long_factor"], "rope_factors_short.weight": rope["short_factor"]})

    def key(name):
        return reader.fields[name].contents()
    assert key("phi3.rope.dimension_count") == int(16 * rope["partial_rotary_factor"])
    assert key("phi3.rope.scaling.original_context_length") == ref.config.original_max_position_embeddings
    assert key("phi3.rope.scaling.attn_factor") == pytest.approx(ref.model.rotary_emb.attention_scaling)
    assert key("phi3.attention.sliding_window") == (ref.config.sliding_window or 0)
