"""Nemotron-H (NemotronHForCausalLM: one sublayer per layer as hybrid_override_pattern / layers_block_type says:
Mamba-2 with a grouped gated RMSNorm, attention without RoPE, or an ungated relu2 MLP) against transformers
(eager attention, float32) on tiny random checkpoints: whole prompt, pieces, token-by-token decode over paged
blocks, greedy continuation, ragged batches; the pattern string of published configs; inspect; errors; and the GGUF
llama.cpp's converter writes for it (nemotron_h: the layer pattern in the per-layer head_count_kv /
feed_forward_length arrays, Mamba-2's edits, Q / K permuted), written here with the gguf package, loading with the
same logits."""
import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")

import checkpoint_edits as edits  # noqa: E402
import gguf_checks  # noqa: E402
import model_checks as checks  # noqa: E402
from attnzoo.model import Model  # noqa: E402

VOCAB = 320
PATTERN = "-M*-M"
MOE_PATTERN = "ME*E"


def _config(kind):
    """biased_grouped: a leading MLP layer, two SSM groups, biases, no conv bias; tie_word_embeddings, which
    transformers' class ignores (its lm_head stays its own). moe: Nemotron 3's MoE layers (see moe_case)."""
    if kind == "moe":
        return transformers.NemotronHConfig(
            hybrid_override_pattern=MOE_PATTERN, vocab_size=VOCAB, hidden_size=64, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, intermediate_size=96, mamba_num_heads=8, mamba_head_dim=16,
            n_groups=2, ssm_state_size=16, conv_kernel=4, chunk_size=16, n_routed_experts=4, num_experts_per_tok=2,
            n_group=2, topk_group=1, moe_intermediate_size=32, moe_shared_expert_intermediate_size=48,
            routed_scaling_factor=1.5, layer_norm_epsilon=1e-5, initializer_range=0.1, max_position_embeddings=256)
    assert kind == "biased_grouped"
    return transformers.NemotronHConfig(hybrid_override_pattern=PATTERN, vocab_size=VOCAB, hidden_size=64,
                                        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                        intermediate_size=96, mamba_num_heads=8, mamba_head_dim=16, n_groups=2,
                                        ssm_state_size=16, conv_kernel=4, chunk_size=16, use_bias=True,
                                        mlp_bias=True, use_conv_bias=False, tie_word_embeddings=True,
                                        layer_norm_epsilon=1e-5, initializer_range=0.1, max_position_embeddings=256)


_randomize = checks.randomize_ssm


checks.define_family_tests(globals(), _config, ["biased_grouped"], _randomize, VOCAB)


def test_dt_is_clamped_by_time_step_min_not_time_step_limit(case, tmp_path):
    """transformers' Nemotron-H clamps softplus(dt) to (time_step_min, inf) and never reads time_step_limit."""
    import torch
    kind, ref, m, ids, want = case
    d = edits.copy_with(m.directory, tmp_path / "clamped",
                        config_edit=lambda c: c.update(time_step_min=1.0, time_step_limit=[0.05, 0.3]))
    clamped = checks.meaningful_logits(transformers.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval(),
                                       ids)
    assert abs(clamped - want).max() > 1e-2  # the clamp bites
    checks.check_full_prompt(Model.load(d), ids, clamped, VOCAB)


def test_inspect_lists_each_layer_kind(case):
    kind, ref, m, ids, want = case
    info = m.inspect()
    kinds = {"M": "mamba2", "*": "attention", "-": "mlp"}
    assert [x["kind"] for x in info["layers"]] == [kinds[c] for c in PATTERN]
    assert info["parameter_count"] == sum(p.numel() for p in ref.parameters())
    assert not info["tied_embeddings"]


@pytest.fixture(scope="module")
def moe_case(tmp_path_factory):
    """Nemotron 3's MoE layers: sigmoid-scored top-2 of 4 relu² experts in 2 groups (1 kept), the correction bias
    steering the choice, a shared relu² MLP, routed_scaling_factor."""
    cfg = _config("moe")
    directory = str(tmp_path_factory.mktemp("moe"))

    def randomize(model):
        checks.randomize_ssm(model)
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.copy_(0.2 * torch.randn_like(b))
    ref = checks.save_random_model("moe", cfg, directory, randomize, attn_implementation="eager")
    ids = _prompt()
    return ref, Model.load(directory, block_size=4), ids, checks.meaningful_logits(ref, ids)


def test_moe_gguf_and_quantize(moe_case, tmp_path):
    """The nemotron_h_moe file the converter writes and the one `attnzoo quantize` writes: the same tensors, and
    the transformers logits from either."""
    import attnzoo
    ref, m, ids, want = moe_case
    theirs, ours = str(tmp_path / "w.gguf"), str(tmp_path / "q.gguf")
    write_converter_gguf(ref.config, m.directory, theirs, MOE_PATTERN)
    gguf_checks.check_gguf_logits(theirs, ids, want, VOCAB, prefill=25)
    cfg = Model.load(theirs).config
    assert cfg["hybrid_override_pattern"] == MOE_PATTERN and cfg["routed_scaling_factor"] == 1.5
    attnzoo.quantize(m.directory, ours, type="F32")
    gguf_checks.check_same_gguf_tensors(ours, theirs)
    gguf_checks.check_gguf_logits(ours, ids, want, VOCAB, prefill=25)


def test_moe_layers_match_transformers(moe_case):
    ref, m, ids, want = moe_case
    checks.check_full_prompt(m, ids, want, VOCAB)
    checks.check_prompt_in_pieces(m, ids, want, ([1, 7, 17, 15],))
    checks.check_token_by_token_decode(m, ids, want, prefill=25, stop=len(ids))
    kinds = {"M": "mamba2", "*": "attention", "E": "moe"}
    assert [x["kind"] for x in m.inspect()["layers"]] == [kinds[c] for c in MOE_PATTERN]
    assert [x["kind"] for x in m.trace(ids[:8])] == [kinds[c] for c in MOE_PATTERN]  # the explainer's view
    assert m.inspect()["parameter_count"] == sum(p.numel() for p in ref.parameters()) + sum(
        b.numel() for n, b in ref.named_buffers() if n.endswith("e_score_correction_bias"))


def test_pattern_string_reads_as_the_list(case, tmp_path):
    """Published configs carry hybrid_override_pattern (transformers saves layers_block_type): the same model."""
    kind, ref, m, ids, want = case

    def edit(cfg):
        del cfg["layers_block_type"]
        cfg["hybrid_override_pattern"] = PATTERN
    edits.copy_with(m.directory, str(tmp_path), config_edit=edit)
    np.testing.assert_allclose(Model.load(str(tmp_path)).forward(ids), want, atol=checks.ATOL, rtol=0)


def test_bad_patterns_are_named(case, tmp_path):
    kind, ref, m, ids, want = case
    edits.check_config_error_is_named(m.directory, str(tmp_path / "a"), "hybrid_override_pattern.*'X'",
                                      hybrid_override_pattern="M*X-M")
    edits.check_config_error_is_named(m.directory, str(tmp_path / "b"), "moe_latent_size",
                                      layers_block_type=["mamba", "moe"], moe_latent_size=16)
    edits.check_missing_tensors_are_named(m.directory, tmp_path / "c", ["backbone.layers.0.mixer.up_proj.weight"])



def write_converter_gguf(cfg, directory, path, pattern):
    """The file convert_hf_to_gguf.py's NemotronHModel writes for the checkpoint in `directory`: per-layer
    feed_forward_length (MLP layers) and head_count_kv (attention layers), the Mamba-2 keys, A_log as -exp(A_log)
    [H, 1], D [H, 1], the gated norm [groups, inner / groups], conv kernels squeezed, dt_bias as ssm_dt.bias; with
    MoE layers ("E") the nemotron_h_moe architecture: their feed_forward_length, the expert_* keys, experts stacked
    into ffn_up_exps / ffn_down_exps, the router's correction bias as exp_probs_b.bias."""
    from safetensors.numpy import load_file
    moe = "E" in pattern
    w = gguf.GGUFWriter(path, "nemotron_h_moe" if moe else "nemotron_h")
    w.add_block_count(len(pattern))
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length([cfg.moe_intermediate_size if c == "E" else cfg.intermediate_size if c == "-" else 0
                               for c in pattern])
    if moe:
        w.add_expert_used_count(cfg.num_experts_per_tok)
        w.add_expert_feed_forward_length(cfg.moe_intermediate_size)
        w.add_expert_shared_feed_forward_length(cfg.moe_shared_expert_intermediate_size)
        w.add_expert_count(cfg.n_routed_experts)
        w.add_expert_shared_count(cfg.n_shared_experts)
        w.add_expert_weights_norm(cfg.norm_topk_prob)
        w.add_expert_weights_scale(cfg.routed_scaling_factor)
        w.add_expert_group_count(cfg.n_group)
        w.add_expert_group_used_count(cfg.topk_group)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv([cfg.num_key_value_heads if c == "*" else 0 for c in pattern])
    w.add_key_length(cfg.head_dim)
    w.add_value_length(cfg.head_dim)
    w.add_ssm_conv_kernel(cfg.conv_kernel)
    w.add_ssm_state_size(cfg.ssm_state_size)
    w.add_ssm_group_count(cfg.n_groups)
    w.add_ssm_inner_size(cfg.mamba_num_heads * cfg.mamba_head_dim)
    w.add_ssm_time_step_rank(cfg.mamba_num_heads)
    w.add_layer_norm_rms_eps(cfg.layer_norm_epsilon)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.NEMOTRON_H_MOE if moe else gguf.MODEL_ARCH.NEMOTRON_H,
                                     len(pattern))
    state = load_file(os.path.join(directory, "model.safetensors"))
    for i, c in enumerate(pattern):
        if c == "E":
            for proj in ("up", "down"):
                stacked = [state.pop(f"backbone.layers.{i}.mixer.experts.{e}.{proj}_proj.weight")
                           for e in range(cfg.n_routed_experts)]
                w.add_tensor(f"blk.{i}.ffn_{proj}_exps.weight", np.stack(stacked))
    for name, data in state.items():
        name = name.replace("gate.e_score_correction_bias", "gate.e_score_correction.bias")
        gguf_checks.add_converter_hybrid_tensor(w, names, name, data, cfg.n_groups, cfg.num_attention_heads,
                                                cfg.num_key_value_heads)
    gguf_checks.finish_gguf(w)


def test_gguf_from_the_converter(case, tmp_path):
    kind, ref, m, ids, want = case
    path = str(tmp_path / "nemotron_h.gguf")
    write_converter_gguf(ref.config, m.directory, path, PATTERN)
    gguf_checks.check_gguf_logits(path, ids, want, VOCAB, prefill=25)
    gguf_checks.check_gguf_as_safetensors(path, m.directory, ids)
    cfg = gguf_checks.check_synthesized_config(path, ref.config, ["hidden_size", "intermediate_size", "n_groups",
                                                                  "mamba_num_heads", "mamba_head_dim", "ssm_state_size",
                                                                  "conv_kernel", "num_key_value_heads", "head_dim"])
    assert cfg["hybrid_override_pattern"] == PATTERN


def test_quantize_writes_the_converters_tensors(case, tmp_path):
    """`attnzoo quantize` at F32: the tensors of the file written above, value for value, and the same logits."""
    import attnzoo
    kind, ref, m, ids, want = case
    ours, theirs = str(tmp_path / "q.gguf"), str(tmp_path / "w.gguf")
    attnzoo.quantize(m.directory, ours, type="F32")
    write_converter_gguf(ref.config, m.directory, theirs, PATTERN)
    gguf_checks.check_same_gguf_tensors(ours, theirs)
    gguf_checks.check_gguf_logits(ours, ids, want, VOCAB, prefill=25)

