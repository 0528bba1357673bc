"""MiniMax-Text-01 / M1 (MiniMaxForCausalLM: lightning attention, a fixed-decay linear attention with ALiBi-like
slopes shrinking with depth, normed and gated, beside softmax attention with RoPE; a Mixtral-style MoE in every
block; "postnorm" blocks adding to the normed input with alpha / beta scalings) against transformers (eager,
float32) on a tiny random checkpoint with 16-token lightning blocks: whole prompt, pieces (the [H, D, D] states
carried in the pool's state slots), token-by-token decode over paged blocks, greedy continuation, ragged batches;
the parameter count from the config alone; the original configs' attn_type_list / layernorm_* keys read alike;
a prefix-cache hit restoring the lightning states from a snapshot."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import checkpoint_edits as edits  # noqa: E402
import model_checks as checks  # noqa: E402
from attnzoo.model import Model  # noqa: E402

VOCAB = 160
TYPES = ["linear_attention", "full_attention", "linear_attention", "linear_attention"]


def _config(kind):
    assert kind == "3to1_scaled"
    return transformers.MiniMaxConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=48, num_hidden_layers=4,
                                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_local_experts=4,
                                      num_experts_per_tok=2, layer_types=TYPES, block_size=16,
                                      full_attn_alpha_factor=1.7, full_attn_beta_factor=0.8,
                                      linear_attn_alpha_factor=1.3, linear_attn_beta_factor=1.1,
                                      mlp_alpha_factor=1.5, mlp_beta_factor=0.9, rms_norm_eps=1e-5,
                                      initializer_range=0.1, max_position_embeddings=256,
                                      rope_parameters=dict(rope_type="default", rope_theta=10000.0))


checks.define_family_tests(globals(), _config, ["3to1_scaled"], checks.randomize_vectors(1.0), VOCAB)


def test_layers_and_parameters(case):
    kind, ref, m, ids, want = case
    info = m.inspect()
    assert [x["kind"] for x in info["layers"]] == ["lightning_attention", "attention"] + ["lightning_attention"] * 2
    state = 4 * 16 * 16 * 4  # heads x D x D f32
    assert [x["cache"]["fixed_bytes"] for x in info["layers"]] == [state, 0, state, state]
    assert info["parameter_count"] == sum(p.numel() for p in ref.parameters())  # the decay buffers left out


def test_original_config_keys(case, tmp_path):
    """attn_type_list (0 lightning, 1 softmax) and layernorm_*_alpha / _beta, as the original releases write them,
    give the same model."""
    kind, ref, m, ids, want = case

    def edit(cfg):
        cfg["attn_type_list"] = [0 if t == "linear_attention" else 1 for t in cfg.pop("layer_types")]
        for hf, original in (("full_attn", "full_attention"), ("linear_attn", "linear_attention"), ("mlp", "mlp")):
            for part in ("alpha", "beta"):
                cfg[f"layernorm_{original}_{part}"] = cfg.pop(f"{hf}_{part}_factor")

    d = edits.copy_with(m.directory, tmp_path / "original", config_edit=edit)
    np.testing.assert_allclose(Model.load(d).forward(ids), want, atol=checks.ATOL, rtol=0)



def test_prefix_hit_restores_the_lightning_state(case):
    """A second prompt sharing 28 tokens (4 blocks of 7) with the first resumes from the states snapshotted there
    and the KV blocks of the softmax layer: its logits, and decoding on, equal a model without prefix caching fed
    the same pieces."""
    kind, ref, m, ids, want = case
    cached = Model.load(m.directory, block_size=7, snapshot_interval_blocks=1)
    cold = Model.load(m.directory, block_size=7, enable_prefix_caching=False)
    cached.forward(np.concatenate([ids[:30], ids[5:9]]), last_only=True)
    b = np.concatenate([ids[:30], ids[10:20]])
    seq, cold_seq = cached.new_sequence(), cold.new_sequence()
    got = cached.forward(b, seq=seq, last_only=True)
    assert seq.cached_tokens == 28
    cold.forward(b[:28], seq=cold_seq)
    np.testing.assert_allclose(got, cold.forward(b[28:], seq=cold_seq, last_only=True), atol=1e-5, rtol=0)
    for t in (5, 17):
        np.testing.assert_allclose(cached.forward([t], seq=seq), cold.forward([t], seq=cold_seq), atol=1e-5, rtol=0)


def test_load_errors_name_the_problem(case, tmp_path):
    kind, ref, m, ids, want = case
    edits.check_missing_tensors_are_named(m.directory, tmp_path, [
        "model.layers.2.self_attn.output_gate.weight", "model.layers.1.block_sparse_moe.experts.3.w3.weight"])
    edits.check_config_error_is_named(m.directory, tmp_path / "c", r"layer_types\[1\]",
                                      layer_types=["linear_attention", "mamba", "linear_attention", "full_attention"])
    edits.check_config_error_is_named(m.directory, tmp_path / "d", "sliding_window", sliding_window=8)


def test_quantize_names_why_it_refuses(case, tmp_path):
    """llama.cpp has no architecture for MiniMax-Text-01's lightning attention: quantize names the class and the
    reason, and writes nothing."""
    import attnzoo
    kind, ref, m, ids, want = case
    path = tmp_path / "x.gguf"
    with pytest.raises(ValueError, match=r"'MiniMaxForCausalLM' \(MiniMax-Text-01 / M1\) cannot be quantized to GGUF: "
                                         r"llama.cpp has no architecture for its lightning attention"):
        attnzoo.quantize(m.directory, str(path), type="F32")
    assert not path.exists()
