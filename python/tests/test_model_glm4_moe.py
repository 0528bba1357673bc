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

import checkpoint_edits as edits  # noqa: E402
import gguf_checks  # noqa: E402
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


_randomize = checks.randomize_with_correction_bias(1.0)
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
    d = edits.copy_with(m.directory, tmp_path / "whole", config_edit=whole)
    assert abs(Model.load(d).forward(ids) - want).max() > 1e-2

    def unbiased(t):
        for n in [n for n in t if n.endswith("e_score_correction_bias")]:
            t[n] = np.zeros_like(t[n])
    d = edits.copy_with(m.directory, tmp_path / "unbiased", tensors_edit=unbiased)
    assert abs(Model.load(d).forward(ids) - want).max() > 1e-2


def test_multi_token_prediction_layer_is_not_read(case, tmp_path):
    """A checkpoint carrying the release's MTP layer (model.layers.3.*, num_nextn_predict_layers 1) gives the same
    logits: the layer is loaded by nothing."""
    kind, ref, m, ids, want = case
    d = edits.copy_with(m.directory, tmp_path / "mtp", config_edit=lambda c: c.update(num_nextn_predict_layers=1),
                        tensors_edit=lambda t: _mtp_layer(t, 3, 64))
    checks.check_full_prompt(Model.load(d), ids, want, VOCAB)


def test_bad_config_is_named(case, tmp_path):
    kind, ref, m, ids, want = case
    edits.check_config_error_is_named(m.directory, tmp_path / "bad", "n_routed_experts", n_routed_experts=0)
    edits.check_missing_tensors_are_named(m.directory, tmp_path, ["model.layers.1.mlp.shared_experts.up_proj.weight",
                                                                  "model.layers.2.self_attn.k_norm.weight"])


def _write_gguf(directory, path):
    """convert_hf_to_gguf.py's Glm4MoeModel restated with the gguf package for the checkpoint in `directory`: the
    standard keys, the MoE keys, nextn_predict_layers and block_count counting the MTP layers, each layer's experts
    stacked as ffn_{gate,up,down}_exps, e_score_correction_bias as exp_probs_b.bias, no Q / K permutation."""
    import json
    import os
    from safetensors.numpy import load_file
    import gguf
    with open(os.path.join(directory, "config.json")) as f:
        cfg = json.load(f)
    state = load_file(os.path.join(directory, "model.safetensors"))
    layers, mtp = cfg["num_hidden_layers"], cfg.get("num_nextn_predict_layers", 0)
    mtp = mtp if f"model.layers.{layers}.eh_proj.weight" in state else 0
    w = gguf.GGUFWriter(path, "glm4moe")
    gguf_checks.add_converter_attention_keys(w, cfg, layers + mtp)
    w.add_rope_dimension_count(int(cfg["head_dim"] * cfg["rope_parameters"]["partial_rotary_factor"]))
    w.add_expert_count(cfg["n_routed_experts"])
    w.add_expert_used_count(cfg["num_experts_per_tok"])
    w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    w.add_expert_shared_count(cfg["n_shared_experts"])
    w.add_leading_dense_block_count(cfg["first_k_dense_replace"])
    w.add_expert_weights_scale(cfg["routed_scaling_factor"])
    w.add_expert_weights_norm(cfg["norm_topk_prob"])
    if mtp:
        w.add_nextn_predict_layers(mtp)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.GLM4_MOE, layers + mtp)
    for i in range(layers + mtp):
        if f"model.layers.{i}.mlp.experts.0.up_proj.weight" not in state:
            continue
        for proj, name in (("gate_proj", "ffn_gate_exps"), ("up_proj", "ffn_up_exps"), ("down_proj", "ffn_down_exps")):
            stacked = [state.pop(f"model.layers.{i}.mlp.experts.{e}.{proj}.weight") for e in range(EXPERTS)]
            w.add_tensor(f"blk.{i}.{name}.weight", np.stack(stacked))
    for name, data in state.items():
        new_name = names.get_name(name.replace("e_score_correction_bias", "e_score_correction.bias"),
                                  try_suffixes=(".weight", ".bias"))
        assert new_name is not None, name
        w.add_tensor(new_name, np.ascontiguousarray(data))
    gguf_checks.finish_gguf(w)


_GGUF_KEYS = ("block_count", "expert_count", "expert_used_count", "expert_feed_forward_length", "expert_gating_func",
              "expert_shared_count", "leading_dense_block_count", "expert_weights_scale", "expert_weights_norm",
              "nextn_predict_layers", "rope.dimension_count", "attention.key_length", "feed_forward_length")


def test_gguf_from_quantize_and_the_converter(tmp_path):
    """A checkpoint with llama.cpp's routing (one expert group) and an MTP layer: `attnzoo quantize` at F32 writes
    the converter's tensors and keys value for value (the gguf package's file above), both load with transformers'
    logits, and the MTP block is read back under the release's names and left unused. Groups that drop experts
    are refused by name."""
    import attnzoo
    ungrouped = _config("qk_norm_grouped")
    ungrouped.n_group = ungrouped.topk_group = 1
    src = tmp_path / "hf"
    ref = checks.save_random_model("glm4moe-gguf", ungrouped, src, _randomize, attn_implementation="eager",
                                   experts_implementation="eager")
    ids = _prompt()
    want = checks.meaningful_logits(ref, ids)
    d = edits.copy_with(src, tmp_path / "mtp", config_edit=lambda c: c.update(num_nextn_predict_layers=1),
                        tensors_edit=lambda t: _mtp_layer(t, 3, 64))
    g, got = gguf_checks.check_quantize_matches_converter(d, _write_gguf, "glm4moe", _GGUF_KEYS, ids, want, VOCAB,
                                                          tmp_path)
    assert "blk.3.nextn.eh_proj.weight" in {t.name for t in got.tensors}
    assert g.config["num_hidden_layers"] == 3 and g.config["num_nextn_predict_layers"] == 1
    assert [x["kind"] for x in g.inspect()["layers"]] == ["attention"] * 3

    grouped = edits.copy_with(src, tmp_path / "grouped", config_edit=lambda c: c.update(n_group=2))
    with pytest.raises(ValueError, match="n_group"):
        attnzoo.quantize(str(grouped), str(tmp_path / "g.gguf"), type="F32")


def test_gguf_keys_gguf_cannot_mean_are_refused_by_name(tmp_path):
    """A glm4moe file whose nextn_predict_layers leaves no decoder block, or whose gating is softmax, is refused
    naming the key (a wrong layer count or router would give silent garbage)."""
    import gguf
    src = tmp_path / "hf"
    checks.save_random_model("glm4moe-keys", _config("qk_norm_grouped"), src, _randomize, attn_implementation="eager",
                             experts_implementation="eager")
    path = str(tmp_path / "g.gguf")
    _write_gguf(src, path)
    u32 = gguf.GGUFValueType.UINT32
    for key, value in (("glm4moe.nextn_predict_layers", 3), ("glm4moe.expert_gating_func", 1)):
        bad = gguf_checks.rewrite_gguf(path, tmp_path / "bad.gguf", "glm4moe", values={key: (value, u32)})
        edits.expect_load_error(bad, key.replace(".", r"\."))
