"""GLM-4.5 / GLM-4.6 (Glm4MoeForCausalLM: biased q / k / v, per-head q / k norms, RoPE on half of each head in the
half-rotation layout, a dense first layer, then DeepSeek-V3's sigmoid grouped-top-k MoE with a correction bias,
routed_scaling_factor and a shared expert) against transformers (eager attention and experts, float32) on a tiny
random checkpoint: whole prompt, pieces, token-by-token decode over paged blocks, greedy continuation, ragged
batches; the release's multi-token-prediction layer past num_hidden_layers left unread; and the F32 GGUF
`attnzoo quantize` writes (llama.cpp's glm4moe) loading with the same logits."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import model_checks as checks  # noqa: E402
from attnzoo.model import Model  # noqa: E402

VOCAB = 320
EXPERTS = 8


def _config(kind):
    assert kind == "qk_norm_grouped"
    return transformers.Glm4MoeConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, attention_bias=True, use_qk_norm=True,
        n_routed_experts=EXPERTS, num_experts_per_tok=2, n_group=2, topk_group=1, n_shared_experts=1,
        routed_scaling_factor=2.0, norm_topk_prob=True, first_k_dense_replace=1, max_position_embeddings=256,
        rms_norm_eps=1e-5, initializer_range=0.1, tie_word_embeddings=False, pad_token_id=0,
        rope_parameters=dict(rope_type="default", rope_theta=500.0, partial_rotary_factor=0.5))


def _randomize(model):
    checks.randomize_vectors(1.0)(model)
    for name, b in model.named_buffers():
        if name.endswith("e_score_correction_bias"):  # large enough to change which experts win
            b.copy_(0.05 * torch.randn_like(b))


checks.define_family_tests(globals(), _config, ["qk_norm_grouped"], _randomize, VOCAB,
                           experts_implementation="eager")


def _mtp_layer(tensors, layer, hidden):
    """A stand-in for the release's multi-token-prediction layer `layer`: a whole decoder layer's tensors (copied
    from the last one) plus its eh_proj / enorm / hnorm / shared_head, all random."""
    last = layer - 1
    rng = np.random.default_rng(3)
    for name in [n for n in tensors if n.startswith(f"model.layers.{last}.")]:
        tensors[name.replace(f".{last}.", f".{layer}.", 1)] = rng.standard_normal(tensors[name].shape, np.float32)
    p = f"model.layers.{layer}."
    tensors[p + "eh_proj.weight"] = rng.standard_normal((hidden, 2 * hidden), np.float32)
    for n in ("enorm.weight", "hnorm.weight", "shared_head.norm.weight"):
        tensors[p + n] = rng.standard_normal(hidden, np.float32)


def test_inspect_routing_and_the_rotary_share(case, tmp_path):
    """inspect's layers and parameter count; rotating whole heads, or dropping the correction bias, gives other
    logits (both are really read)."""
    kind, ref, m, ids, want = case
    info = m.inspect()
    assert [x["kind"] for x in info["layers"]] == ["attention"] * 3
    assert info["parameter_count"] == sum(p.numel() for p in ref.parameters()) + sum(
        b.numel() for n, b in ref.named_buffers() if n.endswith("e_score_correction_bias"))

    def whole(c):
        c["rope_parameters"]["partial_rotary_factor"] = 1.0
    d = checks.copy_with(m.directory, tmp_path / "whole", config_edit=whole)
    assert abs(Model.load(d).forward(ids) - want).max() > 1e-2

    def unbiased(t):
        for n in [n for n in t if n.endswith("e_score_correction_bias")]:
            t[n] = np.zeros_like(t[n])
    d = checks.copy_with(m.directory, tmp_path / "unbiased", tensors_edit=unbiased)
    assert abs(Model.load(d).forward(ids) - want).max() > 1e-2


def test_multi_token_prediction_layer_is_not_read(case, tmp_path):
    """A checkpoint carrying the release's MTP layer (model.layers.3.*, num_nextn_predict_layers 1) gives the same
    logits: the layer is loaded by nothing."""
    kind, ref, m, ids, want = case
    d = checks.copy_with(m.directory, tmp_path / "mtp", config_edit=lambda c: c.update(num_nextn_predict_layers=1),
                         tensors_edit=lambda t: _mtp_layer(t, 3, 64))
    checks.check_full_prompt(Model.load(d), ids, want, VOCAB)


def test_bad_config_is_named(case, tmp_path):
    kind, ref, m, ids, want = case
    checks.check_config_error_is_named(m.directory, tmp_path / "bad", "n_routed_experts", n_routed_experts=0)
    checks.check_missing_tensors_are_named(m.directory, tmp_path, ["model.layers.1.mlp.shared_experts.up_proj.weight",
                                                                   "model.layers.2.self_attn.k_norm.weight"])
