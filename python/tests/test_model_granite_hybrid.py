"""Granite 4.0-H (GraniteMoeHybridForCausalLM: Mamba-2 / attention layers by layer_types, each followed by a shared
SwiGLU MLP plus a top-k MoE; embedding / residual / attention multipliers and logits_scaling) and Bamba
(BambaForCausalLM: attn_layer_indices, half-head RoPE, a SwiGLU feed-forward) against transformers (eager attention,
float32) on tiny random checkpoints: whole prompt, pieces, token-by-token decode over paged blocks, greedy
continuation, ragged batches; inspect; and the granitehybrid GGUF llama.cpp's converter writes for each (input_linear
split into gate / up, experts stacked, Q / K permuted, Granite's multipliers as *_scale keys, Bamba's RoPE by
rope.scaling.finetuned), written here with the gguf package, loading with the same logits."""
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")

import gguf_checks  # noqa: E402
import model_checks as checks  # noqa: E402
from attnzoo.model import Model  # noqa: E402

VOCAB = 320
KINDS = ["granite_moe_rope", "bamba"]
MAMBA = dict(mamba_n_heads=8, mamba_d_head=16, mamba_n_groups=2, mamba_d_state=16, mamba_d_conv=4,
             mamba_chunk_size=16)


def _config(kind):
    common = dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=256, initializer_range=0.1,
                  tie_word_embeddings=False, **MAMBA)
    if kind == "granite_moe_rope":
        return transformers.GraniteMoeHybridConfig(
            layer_types=["mamba", "attention", "mamba"], intermediate_size=32, shared_intermediate_size=48,
            num_local_experts=4, num_experts_per_tok=2, embedding_multiplier=2.5, residual_multiplier=0.6,
            attention_multiplier=0.2, logits_scaling=1.5, position_embedding_type="rope", rms_norm_eps=1e-5,
            rope_parameters=dict(rope_type="default", rope_theta=1000.0), **common)
    if kind == "bamba":
        return transformers.BambaConfig(attn_layer_indices=[1], intermediate_size=96, rms_norm_eps=1e-5,
                                        rope_parameters=dict(rope_type="default", rope_theta=1000.0), **common)
    raise ValueError(kind)


_randomize = checks.randomize_ssm


checks.define_family_tests(globals(), _config, KINDS, _randomize, VOCAB)


def test_inspect_lists_each_layer_kind(case):
    kind, ref, m, ids, want = case
    info = m.inspect()
    assert [x["kind"] for x in info["layers"]] == ["mamba2", "attention", "mamba2"]
    assert info["parameter_count"] == sum(p.numel() for p in ref.parameters())



def write_converter_gguf(kind, cfg, directory, path):
    """The file convert_hf_to_gguf.py's GraniteHybridModel writes (for Bamba too): head_count_kv per layer (0 for
    Mamba layers), Granite's multipliers as embedding_scale / residual_scale / logit_scale / attention.scale, RoPE
    as rope.scaling.finetuned (Bamba only) with its rope.dimension_count, input_linear split into gate / up
    (ffn_*_exps for the experts, ffn_*_shexp for the shared MLP), Mamba-2's edits, Q / K permuted."""
    from safetensors.numpy import load_file
    moe = kind != "bamba"
    attn = [1]
    n = cfg.num_hidden_layers
    w = gguf.GGUFWriter(path, "granitehybrid")
    w.add_block_count(n)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv([cfg.num_key_value_heads if i in attn else 0 for i in range(n)])
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_rope_freq_base(cfg.rope_parameters["rope_theta"])
    w.add_ssm_conv_kernel(cfg.mamba_d_conv)
    w.add_ssm_state_size(cfg.mamba_d_state)
    w.add_ssm_group_count(cfg.mamba_n_groups)
    w.add_ssm_inner_size(cfg.mamba_n_heads * cfg.mamba_d_head)
    w.add_ssm_time_step_rank(cfg.mamba_n_heads)
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    if moe:
        w.add_attention_scale(cfg.attention_multiplier)
        w.add_embedding_scale(cfg.embedding_multiplier)
        w.add_residual_scale(cfg.residual_multiplier)
        w.add_logit_scale(cfg.logits_scaling)
        w.add_expert_count(cfg.num_local_experts)
        w.add_expert_used_count(cfg.num_experts_per_tok)
        w.add_expert_shared_feed_forward_length(cfg.shared_intermediate_size)
    else:
        w.add_rope_dimension_count(head_dim // 2)  # the converter's attn_rotary_emb (published Bamba configs)
    # the converter's rule: RoPE for Bamba (and the checkpoint here asks for it; a published Granite-H says nope)
    w.add_rope_scaling_finetuned(True)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.GRANITE_HYBRID, n)
    for name, data in load_file(os.path.join(directory, "model.safetensors")).items():
        layer = name.split(".")[2] if name.startswith("model.layers.") else None
        if name.endswith("input_linear.weight"):
            gate, up = np.split(data, 2, axis=-2)
            experts = "block_sparse_moe" in name
            for part, value in (("gate", gate), ("up", up)):
                w.add_tensor(f"blk.{layer}.ffn_{part}_{'exps' if experts else 'shexp'}.weight",
                             np.ascontiguousarray(value))
            continue
        gguf_checks.add_converter_hybrid_tensor(w, names, name, data, cfg.mamba_n_groups, cfg.num_attention_heads,
                                                cfg.num_key_value_heads)
    gguf_checks.finish_gguf(w)


def test_gguf_from_the_converter(case, tmp_path):
    kind, ref, m, ids, want = case
    path = str(tmp_path / "granitehybrid.gguf")
    write_converter_gguf(kind, ref.config, m.directory, path)
    gguf_checks.check_gguf_logits(path, ids, want, VOCAB, prefill=25)
    g = Model.load(path)
    assert g.config["architectures"] == ["GraniteMoeHybridForCausalLM"]
    assert g.config["layer_types"] == ["mamba", "attention", "mamba"]
    assert g.config["num_local_experts"] == (0 if kind == "bamba" else 4)
    assert g.inspect()["parameter_count"] == m.inspect()["parameter_count"]


def test_quantize_writes_the_converters_tensors(case, tmp_path):
    """`attnzoo quantize` at F32: the tensors of the file written above, value for value, and the same logits."""
    import attnzoo
    kind, ref, m, ids, want = case
    ours, theirs = str(tmp_path / "q.gguf"), str(tmp_path / "w.gguf")
    attnzoo.quantize(m.directory, ours, type="F32")
    write_converter_gguf(kind, ref.config, m.directory, theirs)
    gguf_checks.check_same_gguf_tensors(ours, theirs)
    gguf_checks.check_gguf_logits(ours, ids, want, VOCAB, prefill=25)
