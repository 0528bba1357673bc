"""DeepSeek-V2 (DeepseekV2ForCausalLM: the multi-head latent attention of V3 with interleaved RoPE pairs, a softmax
router over all experts picking greedily or group-limited greedily, groups scored by their best expert, no correction
bias) against transformers (eager attention and experts, float32) on tiny random checkpoints: whole prompt, pieces,
token-by-token decode over paged blocks (pieces of 1 and 7 take the absorbed MLA decode path, 17 and 15 the naive
prefill one), greedy continuation, ragged batches; and the F32 `deepseek2` GGUF that
`attnzoo quantize` writes for it (the converter's names, kv_b_proj split into attn_k_b / attn_v_b), loading with the
same logits."""
import glob
import os
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import checkpoint_edits as edits  # noqa: E402
import model_checks as checks  # noqa: E402
from attnzoo.model import Model  # noqa: E402

VOCAB = 160


def _config(kind):
    common = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, n_routed_experts=8,
                  num_experts_per_tok=2, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
                  first_k_dense_replace=1, max_position_embeddings=512, rms_norm_eps=1e-6, initializer_range=0.1,
                  tie_word_embeddings=False)
    if kind == "group_limited_yarn":  # q LoRA, group-limited greedy routing, YaRN with mscale_all_dim, biases
        return transformers.DeepseekV2Config(
            q_lora_rank=48, attention_bias=True, n_shared_experts=1, topk_method="group_limited_greedy", n_group=2,
            topk_group=1, routed_scaling_factor=1.5,
            rope_parameters=dict(rope_type="yarn", rope_theta=10000.0, factor=4.0,
                                 original_max_position_embeddings=128, mscale=0.8, mscale_all_dim=0.8,
                                 beta_fast=32, beta_slow=1), **common)
    if kind == "greedy_plain_q":  # q_proj without LoRA, plain greedy top-k, default RoPE
        return transformers.DeepseekV2Config(
            q_lora_rank=None, attention_bias=False, n_shared_experts=2, topk_method="greedy",
            routed_scaling_factor=1.0, rope_parameters=dict(rope_type="default", rope_theta=1000.0), **common)
    raise ValueError(kind)


KINDS = ["group_limited_yarn", "greedy_plain_q"]


def _randomize(model):
    assert model.config._experts_implementation == "eager"  # the per-expert loop, not a grouped-GEMM kernel
    for name, p in model.named_parameters():
        if name.endswith("norm.weight"):
            p.copy_(1.0 + 0.2 * torch.randn_like(p))
        elif name.endswith(".bias"):
            p.copy_(0.2 * torch.randn_like(p))
        elif name.endswith("gate.weight"):  # a router sharp enough that the groups and top-k decide something
            p.copy_(0.5 * torch.randn_like(p))


checks.define_family_tests(globals(), _config, KINDS, _randomize, VOCAB, experts_implementation="eager")


def test_group_limit_changes_the_routing(case, tmp_path):
    """Switching between greedy and group-limited greedy routing (the best of 2 groups) gives other logits: the
    groups are really applied; an unknown topk_method is refused by name."""
    kind, ref, m, ids, want = case
    assert m.inspect()["architecture"] == "DeepseekV2ForCausalLM"
    other = dict(topk_method="greedy") if kind == "group_limited_yarn" else \
        dict(topk_method="group_limited_greedy", n_group=2, topk_group=1)
    d = edits.copy_with(m.directory, tmp_path / "other", config_edit=lambda c: c.update(other))
    assert np.abs(Model.load(d).forward(ids) - want).max() > 1e-3
    edits.check_config_error_is_named(m.directory, tmp_path / "bad", "topk_method", topk_method="noaux_tc")


def test_gguf_from_quantize(case, tmp_path):
    """The F32 deepseek2 GGUF `attnzoo quantize` writes: the gguf package's names for every tensor, kv_b_proj
    split per head into attn_k_b (transposed) and attn_v_b as the converter does, experts stacked; softmax
    gating and the groups in the metadata; the same logits."""
    gguf = pytest.importorskip("gguf")
    import deepseek_gguf
    kind, ref, m, ids, want = case
    reader = deepseek_gguf.check_quantized_gguf(ref, m.directory, str(tmp_path / "v2.gguf"), ids, want, VOCAB)
    assert reader.fields["deepseek2.expert_gating_func"].contents() == gguf.ExpertGatingFuncType.SOFTMAX
    g = Model.load(str(tmp_path / "v2.gguf"))
    assert g.config["architectures"] == ["DeepseekV2ForCausalLM"]
    assert g.config["topk_method"] == ref.config.topk_method


def test_gguf_missing_half_of_kv_b_is_named(case, tmp_path):
    """A split kv_b_proj missing its attn_v_b half fails to load, naming it."""
    pytest.importorskip("gguf")
    import deepseek_gguf
    kind, ref, m, ids, want = case
    path = str(tmp_path / "no_v_b.gguf")
    deepseek_gguf.write_converter_gguf(ref, m.directory, path, drop=("blk.1.attn_v_b.weight",))
    edits.expect_load_error(path, r"blk\.1\.attn_v_b\.weight")


def _type_of(path, name):
    import gguf
    return next(t.tensor_type.name for t in gguf.GGUFReader(path).tensors if t.name == name)


def _relative_error(path, ids, want):
    return np.sqrt(np.mean((Model.load(path).forward(ids) - want) ** 2)) / want.std()


def test_gguf_kv_b_halves_in_two_types(case, tmp_path):
    """attn_k_b and attn_v_b in different types (llama-quantize's mixtures give attn_k_b's rows of qk_nope a
    fallback type that attn_v_b's rows of kv_lora_rank need not take): kv_b_proj is joined from each half read in
    its own type, and the logits stay near the f32 model's."""
    import attnzoo
    kind, ref, m, ids, want = case
    path = str(tmp_path / "mixed.gguf")
    attnzoo.quantize(m.directory, path, type="Q8_0", tensor_types={"attn_k_b": "F16"})
    assert (_type_of(path, "blk.1.attn_k_b.weight"), _type_of(path, "blk.1.attn_v_b.weight")) == ("F16", "Q8_0")
    err = _relative_error(path, ids, want)
    assert err < 0.05, err  # measured 0.018 and 0.025


def test_llama_quantize_q4_k_m_file(case, tmp_path):
    """llama-quantize's own Q4_K_M of the converter's file (attn_k_b's rows of 16 F16, attn_v_b's of 32 Q5_0)
    loads; the bound is test_quantize_mixtures.py's for 4-bit files."""
    import deepseek_gguf
    cache = os.environ.get("ATTNZOO_LLAMA_CACHE", os.path.expanduser("~/.cache/attnzoo/llama.cpp"))
    tool = sorted(glob.glob(os.path.join(cache, "build-*", "bin", "llama-quantize")))
    if not tool:
        pytest.skip(f"llama-quantize not built under {cache}/build-*/bin (scripts/build_llama_bench.sh builds it)")
    kind, ref, m, ids, want = case
    if ref.config.q_lora_rank is None:  # the converter writes no q_lora_rank then; llama-quantize requires it
        pytest.skip("llama-quantize refuses a deepseek2 file without deepseek2.attention.q_lora_rank")
    src, out = str(tmp_path / "f32.gguf"), str(tmp_path / "q4_k_m.gguf")
    deepseek_gguf.write_converter_gguf(ref, m.directory, src)
    r = subprocess.run([tool[-1], src, out, "Q4_K_M", "2"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert _type_of(out, "blk.1.attn_k_b.weight") != _type_of(out, "blk.1.attn_v_b.weight")
    err = _relative_error(out, ids, want)
    assert err < 0.5, err  # measured 0.11
