"""Gemma 1 (GemmaForCausalLM: the plain pre-norm block with Gemma's (1 + w) norms, sqrt(hidden) embedding scale,
GeGLU, head_dim != hidden / heads, MQA, tied head) against transformers (eager attention, float32) on a tiny
random checkpoint: whole prompt, pieces, token-by-token decode over paged blocks, greedy continuation, ragged
batches; and the F32 GGUF `attnzoo quantize` writes for it (names and 1 + w norms as the gguf package maps
them), loading with the same logits."""
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")

import checkpoint_edits as edits  # noqa: E402
import gguf_checks  # noqa: E402
import model_checks as checks  # noqa: E402
from attnzoo.model import Model  # noqa: E402

VOCAB = 320


def _config(kind):
    assert kind == "gemma_mqa_hd32"
    return transformers.GemmaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=1, head_dim=32,
                                    max_position_embeddings=256, rms_norm_eps=1e-5, initializer_range=0.1,
                                    rope_parameters=dict(rope_type="default", rope_theta=500.0))


checks.define_family_tests(globals(), _config, ["gemma_mqa_hd32"], checks.randomize_vectors(0.0), VOCAB)  # (1 + w) norms


def test_inspect_and_the_released_activation_name(case, tmp_path):
    """inspect's layers; and the released configs' hidden_act "gelu", which means the tanh approximation (as
    transformers' GemmaConfig reads it), gives the same logits."""
    kind, ref, m, ids, want = case
    info = m.inspect()
    assert [(x["kind"], x["window"]) for x in info["layers"]] == [("attention", 0)] * 2
    assert info["tied_embeddings"] and info["cache_bytes_per_token"] == 2 * 2 * 1 * 32 * 4
    d = edits.copy_with(m.directory, tmp_path / "released", config_edit=lambda c: c.update(hidden_act="gelu"))
    checks.check_full_prompt(Model.load(d), ids, want, VOCAB)


def test_gguf_from_quantize(case, tmp_path):
    kind, ref, m, ids, want = case
    gguf_checks.check_gguf_of_checkpoint(ref, m.directory, str(tmp_path / "g.gguf"), gguf.MODEL_ARCH.GEMMA, ids, want,
                                         VOCAB, prefill=30, edits=(("norm.weight", lambda w: w + 1),))
