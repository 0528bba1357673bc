"""Lfm2ForCausalLM (gated short-conv blocks + attention blocks with q/k RMSNorm, SwiGLU feed-forwards) against
transformers' pure-torch path (float32, eager) on tiny random checkpoints: whole prompt, the prompt in pieces
(conv tails and KV caches carried), token-by-token decode, greedy continuation, ragged batches, inspect, errors,
and the lfm2 GGUF `attnzoo quantize` writes (the gguf package's names, squeezed conv kernels, same logits)."""
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import checkpoint_edits as edits  # noqa: E402
import gguf_checks  # noqa: E402
import model_checks as checks  # noqa: E402

VOCAB = 160
PIECES = [1, 17, 64, 100]
PROMPT_LEN = sum(PIECES)


def _config(kind):
    common = dict(vocab_size=VOCAB, max_position_embeddings=512, norm_eps=1e-5, initializer_range=0.1)
    if kind == "L3_gqa_tied":
        return transformers.Lfm2Config(hidden_size=64, intermediate_size=192, block_multiple_of=32,
                                       num_attention_heads=4, num_key_value_heads=2, conv_L_cache=3,
                                       num_hidden_layers=4, layer_types=["conv", "full_attention", "conv",
                                                                         "full_attention"], **common)
    if kind == "L2_bias_untied":
        return transformers.Lfm2Config(hidden_size=32, intermediate_size=96, block_auto_adjust_ff_dim=False,
                                       num_attention_heads=2, num_key_value_heads=2, conv_L_cache=2, conv_bias=True,
                                       tie_word_embeddings=False, num_hidden_layers=3,
                                       layer_types=["conv", "full_attention", "conv"], **common)
    if kind == "L4_mqa":
        return transformers.Lfm2Config(hidden_size=48, intermediate_size=80, block_auto_adjust_ff_dim=False,
                                       num_attention_heads=3, num_key_value_heads=1, conv_L_cache=4,
                                       num_hidden_layers=3, layer_types=["conv", "conv", "full_attention"], **common)
    raise ValueError(kind)


KINDS = ["L3_gqa_tied", "L2_bias_untied", "L4_mqa"]


def _randomize(model):
    for name, p in model.named_parameters():
        if p.ndim == 1:
            p.copy_((1.0 if "norm" in name else 0.0) + 0.3 * torch.randn_like(p))
        elif "conv.conv" in name:
            p.copy_(0.5 * torch.randn_like(p))


checks.define_family_tests(globals(), _config, KINDS, _randomize, VOCAB, PROMPT_LEN, (PIECES, PIECES[::-1]),
                           prefill=20, stop=60, pad_token_id=VOCAB + 1, block_size=16)


def test_inspect_reports_conv_state_and_kv_cache(case):
    kind, ref, m, ids, want = case
    cfg = m.config
    hidden, L = cfg["hidden_size"], cfg["conv_L_cache"]
    hd = hidden // cfg["num_attention_heads"]
    kv_per_token = 2 * cfg["num_key_value_heads"] * hd * 4
    info = m.inspect()
    kinds = ["short_conv" if t == "conv" else "attention" for t in cfg["layer_types"]]
    assert [layer["kind"] for layer in info["layers"]] == kinds
    for layer, k in zip(info["layers"], kinds):
        if k == "short_conv":
            assert layer["cache"]["fixed_bytes"] == hidden * (L - 1) * 4 and layer["cache"]["bytes_per_token"] == 0
        else:
            assert layer["cache"]["bytes_per_token"] == kv_per_token and layer["cache"]["fixed_bytes"] == 0
    n_conv, n_attn = kinds.count("short_conv"), kinds.count("attention")
    assert info["cache_bytes_per_token"] == n_attn * kv_per_token
    assert info["cache_bytes_at"][4096] == n_conv * hidden * (L - 1) * 4 + 4096 * n_attn * kv_per_token
    assert info["tied_embeddings"] == (kind != "L2_bias_untied")
    assert info["intermediate_size"] == ref.model.layers[0].feed_forward.w1.out_features


def test_load_errors_name_the_problem(case, tmp_path):
    kind, ref, m, ids, want = case
    if kind != "L2_bias_untied":
        pytest.skip("one checkpoint is enough")
    src = m.directory
    name = "model.layers.2.conv.in_proj.weight"
    edits.check_missing_tensors_are_named(src, tmp_path, [name])
    d = edits.copy_with(src, tmp_path / "b", tensors_edit=lambda t: t.update({name: t[name][:-1].copy()}))
    edits.expect_load_error(d, r"in_proj\.weight")
    edits.check_config_error_is_named(src, tmp_path / "c", "layer_types", layer_types=["conv", "mamba", "conv"])


def test_quantize_writes_lfm2(case, tmp_path):
    kind, ref, m, ids, want = case
    if kind == "L4_mqa":
        pytest.skip("two checkpoints are enough")
    gguf = pytest.importorskip("gguf")
    gguf_checks.check_gguf_of_checkpoint(ref, m.directory, str(tmp_path / "q.gguf"), gguf.MODEL_ARCH.LFM2, ids, want,
                                         VOCAB, prefill=20)
