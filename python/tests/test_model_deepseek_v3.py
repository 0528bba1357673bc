"""DeepSeek-V3 (multi-head latent attention with a latent cache, sigmoid grouped-top-k MoE with shared experts)
against transformers' eager float32 path on tiny random checkpoints: whole prompt, prompt in pieces (decode-sized
pieces take the absorbed MLA path, longer ones the naive one), token-by-token decode, greedy continuation, ragged
batches, what `inspect` reports and load errors."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import checkpoint_edits as edits  # noqa: E402
import model_checks as checks  # noqa: E402
from attnzoo.model import Model  # noqa: E402

VOCAB = 160
PIECES = [1, 7, 17, 40]  # 1 and 7 go through mla_decode (absorbed), 17 and 40 through mla_prefill (naive)
PROMPT_LEN = sum(PIECES)
KV_LORA, ROPE_DIM = 32, 8


def _config(kind):
    common = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
                  num_attention_heads=4, num_key_value_heads=4, n_routed_experts=8, num_experts_per_tok=2,
                  n_group=2, topk_group=1, kv_lora_rank=KV_LORA, qk_nope_head_dim=16, qk_rope_head_dim=ROPE_DIM,
                  v_head_dim=16, first_k_dense_replace=1, max_position_embeddings=512, rms_norm_eps=1e-6,
                  initializer_range=0.1, tie_word_embeddings=False)
    if kind == "q_lora_yarn":  # q LoRA, YaRN with mscale / mscale_all_dim (softmax scale * mscale^2), biases
        return transformers.DeepseekV3Config(
            num_hidden_layers=3, q_lora_rank=48, attention_bias=True, n_shared_experts=1, norm_topk_prob=True,
            routed_scaling_factor=2.5, rope_interleave=True,
            rope_scaling=dict(type="yarn", factor=4.0, original_max_position_embeddings=128, mscale=0.9,
                              mscale_all_dim=0.7, beta_fast=32, beta_slow=1), **common)
    if kind == "plain_q":  # q_proj without LoRA, default RoPE in the half layout, raw top-k weights; a large
        # rms_norm_eps, which the latent norms do not take (transformers builds them with 1e-6)
        return transformers.DeepseekV3Config(
            num_hidden_layers=2, q_lora_rank=None, attention_bias=False, n_shared_experts=2, norm_topk_prob=False,
            routed_scaling_factor=1.5, rope_interleave=False, **{**common, "rms_norm_eps": 1e-2})
    raise ValueError(kind)


KINDS = ["q_lora_yarn", "plain_q"]


def _randomize(model):
    # The reference must be the plain per-expert loop, not a grouped-GEMM kernel.
    assert model.config._experts_implementation == "eager"
    for name, p in model.named_parameters():
        if name.endswith("norm.weight"):
            p.copy_(1.0 + 0.2 * torch.randn_like(p))
        elif name.endswith(".bias"):
            p.copy_(0.2 * torch.randn_like(p))
    for name, b in model.named_buffers():
        if name.endswith("e_score_correction_bias"):  # large enough to change which experts win
            b.copy_(0.05 * torch.randn_like(b))


checks.define_family_tests(globals(), _config, KINDS, _randomize, VOCAB, PROMPT_LEN, (PIECES, PIECES[::-1]),
                           prefill=20, block_size=16, experts_implementation="eager")


def test_correction_bias_changes_the_routing(case, tmp_path):
    """Without e_score_correction_bias the logits differ: the bias is really read (and only steers the choice,
    which the match above checks)."""
    kind, ref, m, ids, want = case
    directory = m.directory

    def zero_bias(t):
        for k in t:
            if k.endswith("e_score_correction_bias"):
                t[k] = np.zeros_like(t[k])
    d = edits.copy_with(directory, tmp_path / "nobias", tensors_edit=zero_bias)
    assert np.abs(Model.load(d).forward(ids[:30]) - want[:30]).max() > 1e-3


def test_linear_rope_scales_the_softmax_by_mscale_all_dim(case, tmp_path):
    """transformers multiplies the softmax scale by mscale(factor, mscale_all_dim)^2 for any scaled RoPE, not only
    YaRN: a linear one gives its logits too."""
    import torch
    import transformers
    kind, ref, m, ids, want = case

    def linear(c):
        c.pop("rope_scaling", None)
        c["rope_parameters"] = dict(rope_type="linear", rope_theta=10000.0, factor=4.0, mscale_all_dim=1.0)
    d = edits.copy_with(m.directory, tmp_path / "linear", config_edit=linear)
    ref = transformers.AutoModelForCausalLM.from_pretrained(d, attn_implementation="eager", dtype=torch.float32,
                                                            experts_implementation="eager")
    checks.check_full_prompt(Model.load(d), ids[:30], checks.meaningful_logits(ref.eval(), ids[:30]), VOCAB)


def test_inspect_reports_latent_cache(case):
    kind, ref, m, ids, want = case
    info = m.inspect()
    assert info["architecture"] == "DeepseekV3ForCausalLM"
    layers = info["layers"]
    assert len(layers) == ref.config.num_hidden_layers
    for layer in layers:
        assert layer["kind"] == "mla" and layer["cache"]["kind"] == "latent"
        assert layer["cache"]["bytes_per_token"] == (KV_LORA + ROPE_DIM) * 4  # one f32 [c_kv ; k_pe] row
        assert layer["cache"]["fixed_bytes"] == 0
    assert info["cache_bytes_per_token"] == len(layers) * (KV_LORA + ROPE_DIM) * 4


def test_bf16_weights_stay_close(case):
    kind, ref, m, ids, want = case
    directory = m.directory
    got = Model.load(directory, dtype="bfloat16").forward(ids[:40])
    rel = np.sqrt(((got - want[:40]) ** 2).sum() / (want[:40] ** 2).sum())
    assert 0 < rel <= 3e-2, rel


small_dir = edits.checkpoint_fixture(_build, "q_lora_yarn")


def test_load_errors_name_the_problem(small_dir, tmp_path):
    edits.check_missing_tensors_are_named(small_dir, tmp_path, [
        "model.layers.0.self_attn.kv_b_proj.weight", "model.layers.1.self_attn.q_a_layernorm.weight",
        "model.layers.2.mlp.experts.5.down_proj.weight", "model.layers.1.mlp.shared_experts.up_proj.weight",
        "model.layers.2.mlp.gate.weight"])
    kv_a = "model.layers.0.self_attn.kv_a_proj_with_mqa.weight"
    edits.check_edited_tensor_is_named(small_dir, tmp_path / "kv_a", kv_a, lambda w: w[:-1].copy())
    for key, value in [("n_group", 3), ("topk_group", 3), ("num_experts_per_tok", 9)]:
        edits.check_config_error_is_named(small_dir, tmp_path / key, key, **{key: value})



@pytest.fixture(scope="module")
def gguf_case(tmp_path_factory):
    """q_lora_yarn as DeepSeek releases it for llama.cpp: YaRN's mscale equal to mscale_all_dim (cos / sin
    unscaled), the only form deepseek2 can hold; qk_nope_head_dim 32, so that attn_k_b's rows make Q8_0 blocks."""
    directory = tmp_path_factory.mktemp("gguf")
    config = _config("q_lora_yarn")
    config.rope_parameters["mscale"] = config.rope_parameters["mscale_all_dim"]
    config.qk_nope_head_dim = 32
    config.qk_head_dim = 32 + ROPE_DIM
    ref = checks.save_random_model("q_lora_yarn", config, directory, _randomize, attn_implementation="eager",
                                   experts_implementation="eager")
    ids = _prompt(40)
    return ref, directory, ids, checks.meaningful_logits(ref, ids)


def test_gguf_from_quantize(gguf_case, tmp_path):
    """The F32 deepseek2 GGUF `attnzoo quantize` writes: the converter's tensors value for value (kv_b_proj split
    per head into attn_k_b / attn_v_b, experts stacked, the correction bias as exp_probs_b.bias), sigmoid gating,
    YaRN's mscale_all_dim as the log multiplier; it, the converter's file and the older whole-attn_kv_b form load
    with transformers' logits."""
    gguf = pytest.importorskip("gguf")
    import deepseek_gguf
    ref, directory, ids, want = gguf_case
    path = str(tmp_path / "v3.gguf")
    reader = deepseek_gguf.check_quantized_gguf(ref, directory, path, ids, want, VOCAB, prefill=30)
    assert reader.fields["deepseek2.expert_gating_func"].contents() == gguf.ExpertGatingFuncType.SIGMOID
    assert reader.fields["deepseek2.rope.scaling.yarn_log_multiplier"].contents() == pytest.approx(0.07)
    cfg = Model.load(path).config
    assert cfg["architectures"] == ["DeepseekV3ForCausalLM"] and cfg["rope_scaling"]["mscale"] == pytest.approx(0.7)

    # A multi-token-prediction layer past num_hidden_layers (as DeepSeek-V3 ships one) is left out, as the
    # converter leaves it out.
    def add_mtp(t):
        for name in [k for k in t if k.startswith("model.layers.2.")]:
            t[name.replace("model.layers.2.", "model.layers.3.")] = t[name]
    mtp = edits.copy_with(directory, tmp_path / "mtp", tensors_edit=add_mtp)
    import attnzoo
    attnzoo.quantize(mtp, str(tmp_path / "mtp.gguf"), type="F32")
    assert {t.name for t in gguf.GGUFReader(str(tmp_path / "mtp.gguf")).tensors} == {t.name for t in reader.tensors}


def test_quantize_refuses_what_deepseek2_cannot_hold(case, tmp_path):
    """RoPE on half-split channels (rope_interleave false) and a YaRN mscale apart from mscale_all_dim have no
    deepseek2 form: refused by key, nothing written."""
    import attnzoo
    kind, ref, m, ids, want = case
    directory = m.directory
    path = tmp_path / "x.gguf"
    with pytest.raises(ValueError, match="rope_interleave" if kind == "plain_q" else "mscale_all_dim"):
        attnzoo.quantize(directory, str(path), type="F32")
    assert not path.exists()


def test_gguf_with_q8_0_kv_b_halves(gguf_case, tmp_path):
    """attn_k_b / attn_v_b stored as Q8_0 (k_b's rows run along qk_nope, transposed from kv_b_proj): dequantized
    and joined back, the logits are transformers' on the weights the blocks decode to."""
    gguf = pytest.importorskip("gguf")
    import copy
    import deepseek_gguf
    ref, directory, ids, want = gguf_case
    path = str(tmp_path / "q8.gguf")
    deepseek_gguf.write_converter_gguf(ref, directory, path, kv_b_q8_0=True)
    q8 = gguf.GGMLQuantizationType.Q8_0
    rounded = copy.deepcopy(ref)
    cfg = ref.config
    with torch.no_grad():
        for layer in rounded.model.layers:
            w = layer.self_attn.kv_b_proj.weight
            k_b, v_b = deepseek_gguf.kv_b_halves(w.numpy(), cfg.num_attention_heads, cfg.qk_nope_head_dim)
            k_b, v_b = (gguf.quants.dequantize(gguf.quants.quantize(x, q8), q8).reshape(x.shape) for x in (k_b, v_b))
            w.copy_(torch.from_numpy(np.concatenate([k_b.transpose(0, 2, 1), v_b], axis=1).reshape(w.shape)))
    expect = checks.meaningful_logits(rounded, ids)
    assert np.abs(expect - want).max() > 1e-6  # the rounding is visible, so the match below is about it
    checks.check_full_prompt(Model.load(path), ids, expect, VOCAB)
