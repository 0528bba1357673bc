"""Qwen3-Next (Gated DeltaNet + gated attention hybrid, sparse MoE with a shared expert) against transformers'
pure-PyTorch path (float32) on tiny random checkpoints: whole prompt, prompt in pieces (the conv tail and the
delta-rule state carried exactly), token-by-token decode, greedy continuation, ragged batches, the per-layer
state `inspect` reports, and load errors."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import checkpoint_edits as edits  # noqa: E402
import model_checks as checks  # noqa: E402
from conftest import matmul_precision  # noqa: E402
from attnzoo.model import Model  # noqa: E402

VOCAB = 160
PIECES = [1, 17, 64, 100]  # decode-sized, short-chunk and chunk-sized pieces (the chunk kernel's 64)
PROMPT_LEN = sum(PIECES)


def _config(kind):
    common = dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
                  num_key_value_heads=2, linear_num_key_heads=2, linear_num_value_heads=4, linear_conv_kernel_dim=4,
                  max_position_embeddings=512, rms_norm_eps=1e-6, initializer_range=0.1,
                  tie_word_embeddings=False)
    if kind == "moe_interval":  # full attention every 2nd layer, MoE everywhere with a shared expert
        return transformers.Qwen3NextConfig(
            head_dim=16, partial_rotary_factor=0.5, linear_key_head_dim=16, linear_value_head_dim=32,
            intermediate_size=96, full_attention_interval=2, num_experts=4, num_experts_per_tok=2,
            moe_intermediate_size=32, shared_expert_intermediate_size=48, norm_topk_prob=True, **common)
    if kind == "dense_layer_types":  # explicit layer_types, every layer a dense MLP
        return transformers.Qwen3NextConfig(
            head_dim=32, partial_rotary_factor=0.25, linear_key_head_dim=32, linear_value_head_dim=16,
            intermediate_size=80, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
            shared_expert_intermediate_size=48, mlp_only_layers=[0, 1, 2, 3],
            layer_types=["linear_attention", "linear_attention", "full_attention", "linear_attention"], **common)
    if kind == "sparse_step_unnormalized":  # MoE on odd layers only (decoder_sparse_step 2), raw top-k weights
        return transformers.Qwen3NextConfig(
            head_dim=16, partial_rotary_factor=0.5, linear_key_head_dim=16, linear_value_head_dim=16,
            intermediate_size=64, full_attention_interval=4, num_experts=6, num_experts_per_tok=3,
            moe_intermediate_size=24, shared_expert_intermediate_size=40, decoder_sparse_step=2,
            norm_topk_prob=False, **common)
    if kind == "qwen3_5":  # Qwen3.5 text: separate in_proj_qkv / z / b / a, dense MLPs
        common.pop("tie_word_embeddings")
        return transformers.Qwen3_5TextConfig(
            head_dim=16, linear_key_head_dim=16, linear_value_head_dim=24, intermediate_size=96,
            full_attention_interval=2, tie_word_embeddings=True, **common)
    raise ValueError(kind)


KINDS = ["moe_interval", "dense_layer_types", "sparse_step_unnormalized", "qwen3_5"]


def _uses_torch_path():
    """The reference must be transformers' own PyTorch Gated DeltaNet, not an fla / causal-conv1d kernel."""
    from transformers.models.qwen3_5 import modeling_qwen3_5
    from transformers.models.qwen3_next import modeling_qwen3_next
    return checks.runs_torch_forms(fn for mod in (modeling_qwen3_next, modeling_qwen3_5) for fn in (
        mod.torch_chunk_gated_delta_rule, mod.torch_recurrent_gated_delta_rule, mod.causal_conv1d_fn,
        mod.causal_conv1d_update))


def _randomize(model):
    for name, p in model.named_parameters():
        if name.endswith("A_log"):  # decay rates exp(A_log) in [0.05, 1): the state keeps a long memory
            p.copy_(torch.empty_like(p).uniform_(0.05, 1.0).log())
        elif name.endswith("linear_attn.norm.weight"):  # the gated norm multiplies by w itself
            p.copy_(1.0 + 0.2 * torch.randn_like(p))
        elif p.ndim == 1:  # zero-centred (1 + w) norms, dt_bias
            p.copy_(0.2 * torch.randn_like(p))


checks.define_family_tests(globals(), _config, KINDS, _randomize, VOCAB, PROMPT_LEN, (PIECES, PIECES[::-1]),
                           prefill=3, stop=70, block_size=16, torch_path=_uses_torch_path)


def test_inspect_reports_fixed_state_beside_kv(case):
    kind, ref, m, ids, want = case
    cfg = m.config
    K, V = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
    HK, HV = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    conv_dim = 2 * HK * K + HV * V
    state = 4 * (conv_dim * (cfg["linear_conv_kernel_dim"] - 1) + HV * K * V)
    kv = 2 * cfg["num_key_value_heads"] * cfg["head_dim"] * 4
    info = m.inspect()
    assert info["owned_weight_bytes"] == 0  # f32 weights, the DeltaNet projections included, stay borrowed
    kinds = [layer["kind"] for layer in info["layers"]]
    assert kinds == ["attention" if t == "full_attention" else "linear_attention" for t in ref.config.layer_types]
    for layer in info["layers"]:
        c = layer["cache"]
        if layer["kind"] == "linear_attention":
            assert (c["kind"], c["fixed_bytes"], c["bytes_per_token"]) == ("state", state, 0)
        else:
            assert (c["fixed_bytes"], c["bytes_per_token"]) == (0, kv)
    n_attn, n_linear = kinds.count("attention"), kinds.count("linear_attention")
    assert info["cache_bytes_per_token"] == n_attn * kv
    assert info["cache_bytes_at"][4096] == n_linear * state + n_attn * kv * 4096
    seq = m.new_sequence()
    m.forward(ids[:10], seq=seq)
    assert seq.cache_bytes >= n_linear * state


def test_full_attention_interval_without_layer_types(case, tmp_path):
    kind, ref, m, ids, want = case
    if "layer_types" in kind:
        pytest.skip("its pattern is not an interval")
    # transformers saves only the expanded layer_types; put the interval back in their place.
    interval = ref.config.layer_types.index("full_attention") + 1

    def edit(c):
        c.pop("layer_types")
        c["full_attention_interval"] = interval
    d = edits.copy_with(m.directory, tmp_path / "interval", config_edit=edit)
    np.testing.assert_allclose(Model.load(d).forward(ids[:40]), want[:40], atol=1e-4, rtol=0)


def test_bf16_checkpoint_and_bf16_weights(tmp_path):
    ref = _build("moe_interval", tmp_path / "f32")
    ids = _prompt(70)
    ref.to(torch.bfloat16).save_pretrained(tmp_path / "bf16", safe_serialization=True)
    ref = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "bf16", dtype=torch.float32).eval()
    want = checks.reference_logits(ref, ids).astype(np.float64)
    # bf16 weights widen exactly when held as f32 (the default "auto" holds them as bf16, with bf16 products and
    # cache): only summation order differs from transformers.
    np.testing.assert_allclose(Model.load(tmp_path / "bf16", dtype="float32").forward(ids), want, atol=1e-4, rtol=0)
    m = Model.load(tmp_path / "f32", dtype="bfloat16")  # f32 weights rounded once at load (in_proj included)
    with matmul_precision("highest"):  # the rounding alone
        got = m.forward(ids)
    fast = m.forward(ids)  # the default "auto": bf16 products for bf16-held weights
    again = _build("moe_interval", tmp_path / "again")
    want32 = checks.reference_logits(again, ids)
    with torch.no_grad():
        torch_bf16 = again.to(torch.bfloat16)(torch.from_numpy(np.asarray(ids))[None]).logits[0].double().numpy()
    def rel(a):
        return np.sqrt(((a - want32) ** 2).sum() / (want32 ** 2).sum())
    assert 0 < rel(got) <= 3e-2, rel(got)
    # no further from the f32 model than transformers' own bf16 model (measured 0.033 vs 0.062)
    assert 0 < rel(fast) <= rel(torch_bf16), (rel(fast), rel(torch_bf16))
    assert m.inspect()["owned_weight_bytes"] > 0


small_dir = edits.checkpoint_fixture(_build, "moe_interval")


def test_load_errors_name_the_problem(small_dir, tmp_path):
    edits.check_missing_tensors_are_named(small_dir, tmp_path, [
        "model.layers.0.linear_attn.in_proj_ba.weight", "model.layers.0.linear_attn.A_log",
        "model.layers.2.mlp.experts.3.up_proj.weight", "model.layers.1.self_attn.q_norm.weight"])
    conv = "model.layers.0.linear_attn.conv1d.weight"
    edits.check_edited_tensor_is_named(small_dir, tmp_path / "conv", conv, lambda w: w[:, :, :3].copy())
    edits.check_config_error_is_named(small_dir, tmp_path / "gva", "linear_num_value_heads", linear_num_value_heads=3)
    edits.check_config_error_is_named(small_dir, tmp_path / "types", "layer_types",
                                      layer_types=["full_attention"] * 3)
    edits.check_config_error_is_named(small_dir, tmp_path / "topk", "num_experts_per_tok", num_experts_per_tok=9)
