"""GLM-4-0414 (Glm4ForCausalLM: four RMSNorms per block, biased q / k / v, fused gate_up_proj, RoPE on half of each
head with interleaved channel pairs) against transformers (eager attention, float32) on a tiny random checkpoint:
whole prompt, pieces, token-by-token decode over paged blocks, greedy continuation, ragged batches; and the F32 GGUF
`attnzoo quantize` writes for it."""
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import checkpoint_edits as edits  # noqa: E402
import gguf_checks  # noqa: E402
import model_checks as checks  # noqa: E402
from attnzoo.model import Model  # noqa: E402

VOCAB = 320


def _config(kind):
    assert kind == "partial_rope_bias"
    return transformers.Glm4Config(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, head_dim=16, attention_bias=True,
                                   max_position_embeddings=256, rms_norm_eps=1e-5, initializer_range=0.1,
                                   tie_word_embeddings=False, pad_token_id=0,
                                   rope_parameters=dict(rope_type="default", rope_theta=500.0,
                                                        partial_rotary_factor=0.5))


checks.define_family_tests(globals(), _config, ["partial_rope_bias"], checks.randomize_vectors(1.0), VOCAB)


def test_inspect_and_the_rotary_share(case, tmp_path):
    """inspect's layers; rotating the whole head instead of its first half gives other logits."""
    kind, ref, m, ids, want = case
    assert [x["kind"] for x in m.inspect()["layers"]] == ["attention"] * 2
    assert ref.config.rope_parameters["partial_rotary_factor"] == 0.5

    def whole(c):
        c["rope_parameters"]["partial_rotary_factor"] = 1.0
    d = edits.copy_with(m.directory, tmp_path / "whole", config_edit=whole)
    assert abs(Model.load(d).forward(ids) - want).max() > 1e-2


def test_gguf_from_quantize(case, tmp_path):
    """The F32 GGUF `attnzoo quantize` writes (llama.cpp's glm4: the fused gate_up as ffn_up, the norms after the
    sublayers as post_attention_norm / post_ffw_norm, RoPE width as rope.dimension_count), loading with the same
    logits."""
    gguf = pytest.importorskip("gguf")
    kind, ref, m, ids, want = case
    reader = gguf_checks.check_gguf_of_checkpoint(ref, m.directory, str(tmp_path / "g.gguf"), gguf.MODEL_ARCH.GLM4, ids,
                                                  want, VOCAB, prefill=30)
    assert reader.fields["glm4.rope.dimension_count"].contents() == 8
