"""FalconH1ForCausalLM (attention and Mamba-2 side by side in every layer, muP multipliers everywhere) against
transformers' pure-torch path (float32, eager) on tiny random checkpoints: whole prompt, the prompt in pieces (KV
caches and SSM states carried together), token-by-token decode, greedy continuation, ragged batches, inspect,
errors."""
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import checkpoint_edits as edits  # noqa: E402
import model_checks as checks  # noqa: E402

VOCAB = 160
PIECES = [1, 17, 64, 100]  # decode-sized, recurrent-sized and chunk-scan-sized pieces
PROMPT_LEN = sum(PIECES)


MUP = dict(embedding_multiplier=1.5, lm_head_multiplier=0.7, mlp_multipliers=[1.3, 0.8], key_multiplier=0.6,
           attention_in_multiplier=0.9, attention_out_multiplier=1.2, ssm_multipliers=[1.1, 0.9, 1.2, 0.8, 1.05],
           ssm_in_multiplier=1.1, ssm_out_multiplier=0.9)


def _config(kind):
    common = dict(vocab_size=VOCAB, num_hidden_layers=2, max_position_embeddings=512, rms_norm_eps=1e-5,
                  mamba_chunk_size=32, hidden_size=32, intermediate_size=64, num_attention_heads=4,
                  initializer_range=0.1)
    if kind == "gated_norm_g2":
        return transformers.FalconH1Config(num_key_value_heads=2, mamba_d_ssm=64, mamba_n_heads=4, mamba_d_head=16,
                                           mamba_n_groups=2, mamba_d_state=8, mamba_d_conv=4, mamba_rms_norm=True,
                                           mamba_norm_before_gate=False, **MUP, **common)
    if kind == "no_norm_g1_biases":
        return transformers.FalconH1Config(num_key_value_heads=4, mamba_d_ssm=None, mamba_expand=2, mamba_n_heads=8,
                                           mamba_d_head=8, mamba_n_groups=1, mamba_d_state=16, mamba_d_conv=2,
                                           mamba_rms_norm=False, attention_bias=True, mlp_bias=True,
                                           projectors_bias=True, mamba_proj_bias=True, **MUP, **common)
    if kind == "norm_before_gate_tied":
        return transformers.FalconH1Config(num_key_value_heads=1, mamba_d_ssm=48, mamba_n_heads=6, mamba_d_head=8,
                                           mamba_n_groups=2, mamba_d_state=12, mamba_d_conv=3, mamba_rms_norm=True,
                                           mamba_norm_before_gate=True, mamba_conv_bias=False,
                                           tie_word_embeddings=True, **common)
    raise ValueError(kind)


KINDS = ["gated_norm_g2", "no_norm_g1_biases", "norm_before_gate_tied"]


checks.define_family_tests(globals(), _config, KINDS, checks.randomize_ssm, VOCAB, PROMPT_LEN, (PIECES, PIECES[::-1]),
                           prefill=20, stop=60, pad_token_id=VOCAB + 1, block_size=16)


def test_inspect_reports_kv_and_ssm_state_per_layer(case):
    kind, ref, m, ids, want = case
    cfg = m.config
    inner, heads = cfg["mamba_n_heads"] * cfg["mamba_d_head"], cfg["num_attention_heads"]
    conv_dim = inner + 2 * cfg["mamba_n_groups"] * cfg["mamba_d_state"]
    pad = lambda n: (n + 15) // 16 * 16  # noqa: E731  (pool slots start every part on a cache line)
    fixed = 4 * pad(pad(conv_dim * (cfg["mamba_d_conv"] - 1)) + inner * cfg["mamba_d_state"])
    kv = 2 * cfg["num_key_value_heads"] * (cfg["hidden_size"] // heads) * 4
    info = m.inspect()
    assert [layer["kind"] for layer in info["layers"]] == ["attention+mamba2"] * 2
    for layer in info["layers"]:
        assert layer["cache"]["fixed_bytes"] == fixed and layer["cache"]["bytes_per_token"] == kv
        assert layer["cache"]["kind"] == "kv_state"
    assert info["cache_bytes_at"][4096] == 2 * (fixed + 4096 * kv)
    seq = m.new_sequence()
    m.forward(ids[:50], seq=seq)
    assert seq.cache_bytes == 2 * (fixed + 64 * kv)  # four KV blocks of 16 tokens + the SSM state, per layer
    assert info["tied_embeddings"] == (kind == "norm_before_gate_tied")


def test_load_errors_name_the_problem(case, tmp_path):
    kind, ref, m, ids, want = case
    if kind != "gated_norm_g2":
        pytest.skip("one checkpoint is enough")
    src = m.directory
    edits.check_missing_tensors_are_named(src, tmp_path, ["model.layers.1.mamba.norm.weight",
                                                          "model.layers.0.self_attn.k_proj.weight"])
    edits.check_config_error_is_named(src, tmp_path / "m", "ssm_multipliers", ssm_multipliers=[1.0, 2.0])
    edits.check_config_error_is_named(src, tmp_path / "g", "mamba_n_groups", mamba_n_groups=3)
