"""OLMo 2 (Olmo2ForCausalLM: RMSNorms after the attention and the MLP instead of before them, q / k RMS-normed
across all heads, GQA, untied head) against transformers (eager attention, float32) on a tiny random checkpoint:
whole prompt, pieces, token-by-token decode over paged blocks, greedy continuation, ragged batches; and the F32
GGUF `attnzoo quantize` writes for it (names as the gguf package maps them), loading with the same logits."""
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")

import checkpoint_edits as edits  # noqa: E402
import gguf_checks  # noqa: E402
import model_checks as checks  # noqa: E402

VOCAB = 320


def _config(kind):
    assert kind == "gqa_untied"
    return transformers.Olmo2Config(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                                    rms_norm_eps=1e-5, initializer_range=0.1, tie_word_embeddings=False,
                                    rope_parameters=dict(rope_type="default", rope_theta=500.0))


checks.define_family_tests(globals(), _config, ["gqa_untied"], checks.randomize_vectors(1.0), VOCAB)


def test_inspect_and_errors(case, tmp_path):
    """inspect's layers; a missing norm, or a per-head q norm (Qwen3's shape) where OLMo 2 has one across all
    heads, is refused by name."""
    kind, ref, m, ids, want = case
    info = m.inspect()
    assert [x["kind"] for x in info["layers"]] == ["attention"] * 2 and not info["tied_embeddings"]
    edits.check_missing_tensors_are_named(m.directory, tmp_path, ["model.layers.1.self_attn.k_norm.weight"])

    def per_head(t):
        t["model.layers.0.self_attn.q_norm.weight"] = t["model.layers.0.self_attn.q_norm.weight"][:16].copy()
    edits.expect_load_error(edits.copy_with(m.directory, tmp_path / "perhead", tensors_edit=per_head),
                            r"model\.layers\.0\.self_attn\.q_norm\.weight' has shape \[16\], expected \[64\]")


def test_gguf_from_quantize(case, tmp_path):
    kind, ref, m, ids, want = case
    gguf_checks.check_gguf_of_checkpoint(ref, m.directory, str(tmp_path / "o.gguf"), gguf.MODEL_ARCH.OLMO2, ids, want,
                                         VOCAB, prefill=30)
