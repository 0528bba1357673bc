"""gpt-oss (attention sinks, alternating sliding / full layers, q/k/v/o biases, YaRN RoPE, top-k-then-softmax MoE
with fused interleaved experts and the clamped SwiGLU) against transformers' eager attention and eager experts
(float32) on tiny random checkpoints: whole prompt, prompt in pieces, token-by-token decode, greedy
continuation, ragged batches, `inspect`, bf16 storage and load errors."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import checkpoint_edits as edits  # noqa: E402
import model_checks as checks  # noqa: E402
from conftest import matmul_precision  # noqa: E402
from attnzoo.model import Model  # noqa: E402

VOCAB = 160
PROMPT_LEN = 40
WINDOW = 8  # well inside the prompt, so the sliding layers really drop keys


def _config(kind):
    common = dict(vocab_size=VOCAB, hidden_size=64, head_dim=16, intermediate_size=32, num_local_experts=4,
                  sliding_window=WINDOW, max_position_embeddings=512, rms_norm_eps=1e-5, initializer_range=0.1,
                  tie_word_embeddings=False)
    if kind == "alternating_no_truncate":  # gpt-oss's own pattern and rope settings (smaller original context)
        return transformers.GptOssConfig(
            num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, num_experts_per_tok=2,
            rope_parameters=dict(rope_type="yarn", rope_theta=150000.0, factor=32.0, beta_fast=32.0, beta_slow=1.0,
                                 truncate=False, original_max_position_embeddings=16), **common)
    if kind == "layer_types_low_limit":  # explicit layer_types, MQA, truncated yarn, a limit that clamps often
        return transformers.GptOssConfig(
            num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=1, num_experts_per_tok=3,
            layer_types=["full_attention", "sliding_attention", "sliding_attention"], swiglu_limit=0.3,
            swiglu_alpha=1.2, rope_parameters=dict(rope_type="yarn", rope_theta=10000.0, factor=4.0,
                                                   original_max_position_embeddings=24), **common)
    raise ValueError(kind)


KINDS = ["alternating_no_truncate", "layer_types_low_limit"]


def _randomize(model):
    # The reference is transformers' own eager attention (sinks in the softmax) and its per-expert loop.
    assert model.config._attn_implementation == "eager" and model.config._experts_implementation == "eager"
    for name, p in model.named_parameters():
        if "norm" in name:
            p.copy_(1.0 + 0.2 * torch.randn_like(p))
        elif name.endswith("sinks"):  # logits comparable to the scores, so the sink takes a real share
            p.copy_(torch.randn_like(p))
        elif "bias" in name:
            p.copy_(0.2 * torch.randn_like(p))


checks.define_family_tests(globals(), _config, KINDS, _randomize, VOCAB, PROMPT_LEN,
                           ([1, 7, 17, 15], [15, 17, 7, 1]), prefill=3, block_size=16, experts_implementation="eager")


def test_sinks_and_clamp_matter(case, tmp_path):
    """The comparison above would catch a missing sink or clamp: without them the logits move far past 1e-4."""
    kind, ref, m, ids, want = case

    def zero_sinks(t):
        for k in t:
            if k.endswith("sinks"):
                t[k] = np.full_like(t[k], -1e30)  # exp(-inf): the sink takes no share
    d = edits.copy_with(m.directory, tmp_path / "nosinks", tensors_edit=zero_sinks)
    assert np.abs(Model.load(d).forward(ids) - want).max() > 1e-2
    d = edits.copy_with(m.directory, tmp_path / "nolimit", config_edit=lambda c: c.update(swiglu_limit=1e9))
    diff = np.abs(Model.load(d).forward(ids) - want).max()
    if kind == "layer_types_low_limit":
        assert diff > 1e-2
    else:
        assert diff <= 1e-4  # limit 7 is never reached by these small activations


def test_inspect_reports_layer_kinds_and_owned_experts(case):
    kind, ref, m, ids, want = case
    info = m.inspect()
    cfg = ref.config
    kinds = [layer["kind"] for layer in info["layers"]]
    assert kinds == ["sliding_attention" if t == "sliding_attention" else "attention" for t in cfg.layer_types]
    assert [layer["window"] for layer in info["layers"]] == [WINDOW if t == "sliding_attention" else 0
                                                             for t in cfg.layer_types]
    per_token = 2 * cfg.num_key_value_heads * cfg.head_dim * 4
    assert info["cache_bytes_per_token"] == len(kinds) * per_token
    # The experts are re-laid out once at load ([out, in], gate rows before up rows): f32 copies of all of them.
    expert_bytes = 4 * cfg.num_local_experts * 3 * cfg.intermediate_size * cfg.hidden_size
    assert info["owned_weight_bytes"] == cfg.num_hidden_layers * expert_bytes


def test_bf16_weights(tmp_path):
    """Held in bf16, the projection and expert weights are rounded once at load; the result tracks a transformers
    model holding the same rounded values (norms, biases, sinks and the embedding stay f32, as attnzoo keeps them)."""
    ref = _build("alternating_no_truncate", tmp_path)
    ids = _prompt()
    m = Model.load(tmp_path, dtype="bfloat16")
    with matmul_precision("highest"):  # the weights' rounding alone, f32 products
        got = m.forward(ids)
    fast = m.forward(ids)  # the default "auto": bf16-held weights take bf16 products too
    with torch.no_grad():
        exact = ref(torch.from_numpy(ids)[None]).logits[0].numpy().astype(np.float64)
        for name, p in ref.named_parameters():
            if p.ndim >= 2 and "embed_tokens" not in name:
                p.copy_(p.to(torch.bfloat16).float())
        want = ref(torch.from_numpy(ids)[None]).logits[0].numpy()
        torch_bf16 = ref.to(torch.bfloat16)(torch.from_numpy(ids)[None]).logits[0].double().numpy()
    def rel(a, b):
        return np.sqrt(((a - b) ** 2).sum() / (b ** 2).sum())
    # Not to 1e-4: attnzoo's bf16 path differs from rounding-then-f32 in more than summation order (see report),
    # but it sits far closer to the rounded model than to the exact one.
    assert rel(got, want) <= 5e-3, rel(got, want)
    assert rel(got, exact) > 4 * rel(got, want)
    # bf16 products: no further from the exact model than transformers' own bf16 model (measured 0.035 vs 0.043).
    assert 0 < rel(fast, exact) <= rel(torch_bf16, exact), (rel(fast, exact), rel(torch_bf16, exact))
    cfg = ref.config
    assert m.inspect()["owned_weight_bytes"] > 2 * cfg.num_hidden_layers * cfg.num_local_experts * 3 * 32 * 64


small_dir = edits.checkpoint_fixture(_build, "layer_types_low_limit")


def test_load_errors_name_the_problem(small_dir, tmp_path):
    edits.check_missing_tensors_are_named(small_dir, tmp_path, [
        "model.layers.0.self_attn.sinks", "model.layers.1.mlp.experts.gate_up_proj_bias",
        "model.layers.2.mlp.experts.down_proj", "model.layers.0.mlp.router.weight"])
    gu = "model.layers.1.mlp.experts.gate_up_proj"
    edits.check_edited_tensor_is_named(small_dir, tmp_path / "shape", gu, lambda w: w[:, :, :-2].copy())

    def mxfp4(t):  # MXFP4 blocks without their exponents
        t[gu + "_blocks"] = np.zeros((4, 64, 2, 16), np.uint8)
    edits.expect_load_error(edits.copy_with(small_dir, tmp_path / "mxfp4", tensors_edit=mxfp4),
                            gu.replace(".", r"\.") + "_scales")
    edits.check_config_error_is_named(small_dir, tmp_path / "topk", "num_experts_per_tok", num_experts_per_tok=5)
    edits.check_config_error_is_named(small_dir, tmp_path / "types", "layer_types",
                                      layer_types=["full_attention"] * 2)
