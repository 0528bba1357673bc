"""MiniMax-M2 (MiniMaxM2ForCausalLM: q / k RMS-normed across all heads, RoPE on the first rotary_dim channels of
each head, every layer a MoE whose sigmoid router's e_score_correction_bias steers the top-k choice while the
unbiased scores, renormalized, weigh the experts) against transformers (eager attention and experts, float32) on a
tiny random checkpoint: whole prompt, pieces, token-by-token decode over paged blocks, greedy continuation, ragged
batches; and the F32 GGUF `attnzoo quantize` writes (llama.cpp's minimax-m2), tensor for tensor the converter's
file written with the gguf package, loading with the same logits."""
import json
import os

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
    assert kind == "rotary_half_biased_routing"
    return transformers.MiniMaxM2Config(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, rotary_dim=8, num_local_experts=EXPERTS, num_experts_per_tok=2,
        max_position_embeddings=256, rms_norm_eps=1e-5, initializer_range=0.1, tie_word_embeddings=False,
        bos_token_id=1, eos_token_id=2, pad_token_id=0, rope_theta=500.0)


checks.define_family_tests(globals(), _config, ["rotary_half_biased_routing"],
                           checks.randomize_with_correction_bias(1.0), VOCAB,
                           experts_implementation="eager")


def test_inspect_routing_bias_and_rotary_dim(case, tmp_path):
    """inspect's layers and parameter count; without the correction bias, or with RoPE over whole heads, the
    logits differ (both are really read)."""
    kind, ref, m, ids, want = case
    info = m.inspect()
    assert [x["kind"] for x in info["layers"]] == ["attention"] * 2
    assert info["parameter_count"] == sum(p.numel() for p in ref.parameters()) + sum(
        b.numel() for n, b in ref.named_buffers() if n.endswith("e_score_correction_bias"))

    def unbiased(t):
        for n in [n for n in t if n.endswith("e_score_correction_bias")]:
            t[n] = np.zeros_like(t[n])
    d = edits.copy_with(m.directory, tmp_path / "unbiased", tensors_edit=unbiased)
    assert abs(Model.load(d).forward(ids) - want).max() > 1e-2

    def whole(c):  # the release's form: rotary_dim alone
        c.pop("rope_parameters")
        c["rope_theta"], c["rotary_dim"] = 500.0, 16
    d = edits.copy_with(m.directory, tmp_path / "whole", config_edit=whole)
    assert abs(Model.load(d).forward(ids) - want).max() > 1e-2

    def released(c):  # rotary_dim 8 alone reads as the checkpoint's own half rotation
        c.pop("rope_parameters")
        c["rope_theta"] = 500.0
    d = edits.copy_with(m.directory, tmp_path / "released", config_edit=released)
    checks.check_full_prompt(Model.load(d), ids, want, VOCAB)


def test_missing_tensors_are_named(case, tmp_path):
    kind, ref, m, ids, want = case
    edits.check_missing_tensors_are_named(m.directory, tmp_path, ["model.layers.1.self_attn.q_norm.weight",
                                                                  "model.layers.0.block_sparse_moe.experts.3.w2.weight"])


def _write_gguf(directory, path):
    """convert_hf_to_gguf.py's MiniMaxM2Model restated with the gguf package: the standard keys plus
    expert_feed_forward_length (intermediate_size), rope.dimension_count (rotary_dim) and sigmoid gating; each
    layer's experts stacked as ffn_{gate,up,down}_exps (w1 / w3 / w2), e_score_correction_bias as exp_probs_b.bias."""
    import gguf
    from safetensors.numpy import load_file
    with open(os.path.join(directory, "config.json")) as f:
        cfg = json.load(f)
    state = load_file(os.path.join(directory, "model.safetensors"))
    layers = cfg["num_hidden_layers"]
    w = gguf.GGUFWriter(path, "minimax-m2")
    gguf_checks.add_converter_attention_keys(w, cfg, layers)
    w.add_expert_count(cfg["num_local_experts"])
    w.add_expert_used_count(cfg["num_experts_per_tok"])
    w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    w.add_expert_feed_forward_length(cfg["intermediate_size"])
    w.add_rope_dimension_count(cfg["rotary_dim"])
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.MINIMAXM2, layers)
    for i in range(layers):
        for hf, gg in (("w1", "ffn_gate_exps"), ("w3", "ffn_up_exps"), ("w2", "ffn_down_exps")):
            stacked = [state.pop(f"model.layers.{i}.block_sparse_moe.experts.{e}.{hf}.weight") for e in range(EXPERTS)]
            w.add_tensor(f"blk.{i}.{gg}.weight", np.stack(stacked))
    for name, data in state.items():
        new_name = names.get_name(name.replace("e_score_correction_bias", "e_score_correction.bias"),
                                  try_suffixes=(".weight", ".bias"))
        assert new_name is not None, name
        w.add_tensor(new_name, np.ascontiguousarray(data))
    gguf_checks.finish_gguf(w)


_GGUF_KEYS = ("block_count", "expert_count", "expert_used_count", "expert_feed_forward_length", "expert_gating_func",
              "rope.dimension_count", "attention.key_length", "feed_forward_length", "attention.head_count_kv")


def test_gguf_from_quantize_and_the_converter(case, tmp_path):
    """`attnzoo quantize` at F32 writes the converter's tensors and keys value for value; both files load with
    transformers' logits (ours also token by token)."""
    kind, ref, m, ids, want = case
    g, _ = gguf_checks.check_quantize_matches_converter(m.directory, _write_gguf, "minimax-m2", _GGUF_KEYS, ids, want,
                                                        VOCAB, tmp_path)
    assert g.config["architectures"] == ["MiniMaxM2ForCausalLM"]
