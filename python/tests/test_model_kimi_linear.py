"""Kimi Linear (Kimi Delta Attention + NoPE multi-head latent attention hybrid, DeepSeek-style sigmoid MoE) against
transformers' pure-PyTorch path (float32) on tiny random checkpoints: whole prompt, prompt in pieces (the conv tail
and the per-channel-decay delta-rule state carried exactly), token-by-token decode, greedy continuation, ragged
batches, the per-layer state `inspect` reports, and load errors."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import model_checks as checks  # noqa: E402
from attnzoo.model import Model  # noqa: E402

VOCAB = 160
PIECES = [1, 17, 64, 70]  # decode-sized, short-chunk and chunk-sized pieces (the chunk kernel's 64)
PROMPT_LEN = sum(PIECES)


def _config(kind):
    common = dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
                  num_key_value_heads=4, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
                  intermediate_size=96, rms_norm_eps=1e-5, initializer_range=0.1, tie_word_embeddings=False,
                  pad_token_id=0, bos_token_id=1, eos_token_id=2)
    if kind == "moe":  # 3 KDA + 1 MLA, first layer dense, grouped sigmoid MoE with a shared expert after
        return transformers.KimiLinearConfig(
            q_lora_rank=None, moe_intermediate_size=32, num_experts=6, num_experts_per_tok=2, n_group=2,
            topk_group=1, n_shared_experts=1, routed_scaling_factor=2.5, first_k_dense_replace=1,
            linear_attn_config=dict(head_dim=16, num_heads=4, short_conv_kernel_size=4, kda_layers=[1, 2, 4],
                                    full_attn_layers=[3]), **common)
    if kind == "dense_qlora":  # every layer dense, q LoRA in the MLA layer, MLA first, conv kernel 3
        return transformers.KimiLinearConfig(
            q_lora_rank=24, moe_intermediate_size=32, num_experts=4, num_experts_per_tok=2,
            first_k_dense_replace=4, linear_attn_config=dict(
                head_dim=32, num_heads=2, short_conv_kernel_size=3, kda_layers=[2, 3, 4], full_attn_layers=[1]),
            **common)
    raise ValueError(kind)


KINDS = ["moe", "dense_qlora"]


def _uses_torch_path():
    """The reference must be transformers' own PyTorch KDA and causal conv, not an fla / causal-conv1d kernel."""
    import inspect
    from transformers.models.kimi_linear import modeling_kimi_linear as mk
    for fn in (mk.chunk_kimi_delta_attention, mk.recurrent_kimi_delta_attention, mk.causal_conv1d_fn,
               mk.causal_conv1d_update):
        if inspect.getclosurevars(fn).nonlocals.get("is_new_implementation", True):
            return False
    return True


def _randomize(model):
    for name, p in model.named_parameters():
        if name.endswith("A_log"):  # decay rates exp(A_log) in [0.05, 1): the state keeps a long memory
            p.copy_(torch.empty_like(p).uniform_(0.05, 1.0).log())
        elif name.endswith("dt_bias"):
            p.copy_(0.5 * torch.randn_like(p) - 2.0)
        elif p.ndim == 1:  # every RMSNorm (the gated o_norm too) multiplies by w itself
            p.copy_(1.0 + 0.2 * torch.randn_like(p))
    for name, b in model.named_buffers():
        if name.endswith("e_score_correction_bias"):  # steers the expert choice only
            b.copy_(0.1 * torch.randn_like(b))


def _build(kind, directory):
    return checks.save_random_model(kind, _config(kind), directory, _randomize, attn_implementation="eager")


def _prompt(n=PROMPT_LEN, seed=0):
    return checks.prompt(VOCAB, n, seed)


@pytest.fixture(scope="module", params=KINDS)
def case(request, tmp_path_factory):
    assert _uses_torch_path()
    directory = tmp_path_factory.mktemp(request.param)
    ref = _build(request.param, directory)
    ids = _prompt()
    want = checks.meaningful_logits(ref, ids)
    return request.param, ref, Model.load(directory), ids, want


checks.add_standard_tests(globals(), VOCAB, (PIECES, PIECES[::-1]),
                          prefill=3, stop=70, pad_token_id=0, other_prompt=_prompt(23, seed=1))


def test_inspect_reports_fixed_state_beside_latent(case):
    kind, ref, m, ids, want = case
    la = m.config["linear_attn_config"]
    heads, K, W = la["num_heads"], la["head_dim"], la["short_conv_kernel_size"]
    state = 4 * (3 * heads * K * (W - 1) + heads * K * K)
    latent = 4 * (m.config["kv_lora_rank"] + m.config["qk_rope_head_dim"])
    info = m.inspect()
    assert info["owned_weight_bytes"] == 0
    kinds = [layer["kind"] for layer in info["layers"]]
    assert kinds == ["mla" if t == "full_attention" else "linear_attention" for t in ref.config.layer_types]
    for layer in info["layers"]:
        c = layer["cache"]
        if layer["kind"] == "linear_attention":
            assert (c["kind"], c["fixed_bytes"], c["bytes_per_token"]) == ("state", state, 0)
        else:
            assert (c["fixed_bytes"], c["bytes_per_token"]) == (0, latent)


def test_layer_types_and_mlp_types_from_the_checkpoint_keys(case, tmp_path):
    """Original Moonshot configs carry no layer_types / mlp_layer_types: linear_attn_config and
    first_k_dense_replace decide."""
    kind, ref, m, ids, want = case

    def edit(c):
        c.pop("layer_types")
        c.pop("mlp_layer_types")
    d = checks.copy_with(m.directory, tmp_path / "keys", config_edit=edit)
    np.testing.assert_allclose(Model.load(d).forward(ids[:40]), want[:40], atol=1e-4, rtol=0)


def test_tie_word_embeddings_true_still_uses_the_checkpoints_lm_head(case, tmp_path):
    """transformers never ties Kimi Linear: with tie_word_embeddings true in config.json it still loads the
    checkpoint's own lm_head.weight, and so must we."""
    kind, ref, m, ids, want = case
    d = checks.copy_with(m.directory, tmp_path / "tied", config_edit=lambda c: c.update(tie_word_embeddings=True))
    ref_tied = transformers.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32,
                                                                 attn_implementation="eager").eval()
    want_tied = checks.reference_logits(ref_tied, ids[:40])
    np.testing.assert_allclose(want_tied, want[:40], atol=1e-5, rtol=0)  # the premise: transformers ignores the flag
    got = Model.load(d)
    assert got.inspect()["tied_embeddings"] is False
    np.testing.assert_allclose(got.forward(ids[:40]), want_tied, atol=1e-4, rtol=0)


@pytest.fixture(scope="module")
def small_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("small")
    _build("moe", directory)
    return directory


def test_load_errors_name_the_problem(small_dir, tmp_path):
    checks.check_missing_tensors_are_named(small_dir, tmp_path, [
        "model.layers.0.self_attn.k_conv1d.weight", "model.layers.1.self_attn.A_log",
        "model.layers.1.self_attn.g_b_proj.weight", "model.layers.2.self_attn.kv_b_proj.weight",
        "model.layers.3.block_sparse_moe.experts.5.w3.weight", "model.layers.0.block_sparse_moe.up_proj.weight"])
    dt = "model.layers.0.self_attn.dt_bias"

    def shrink(t):
        t[dt] = t[dt][:10].copy()
    checks.expect_load_error(checks.copy_with(small_dir, tmp_path / "dt", tensors_edit=shrink), dt.replace(".", r"\."))
    checks.check_config_error_is_named(small_dir, tmp_path / "types", "layer_types",
                                       layer_types=["full_attention"] * 3)
    checks.check_config_error_is_named(small_dir, tmp_path / "topk", "num_experts_per_tok", num_experts_per_token=9)
