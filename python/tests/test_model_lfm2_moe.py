"""Lfm2MoeForCausalLM (LFM2's short-conv / attention stack; after num_dense_layers the feed-forwards are sparse
MoEs: sigmoid router scores plus expert_bias choose the top k, the unbiased scores renormalized weigh them) against
transformers (eager, float32) on a tiny random checkpoint: whole prompt, pieces, token-by-token decode over paged
blocks, greedy continuation, ragged batches; the GGUF llama.cpp's converter writes for it (lfm2moe: experts stacked
as ffn_*_exps, expert_bias as exp_probs_b.bias, squeezed conv kernels), written by `attnzoo quantize`, loading with
the same logits."""
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

VOCAB = 160


def _config(kind):
    assert kind == "dense1_top2_of_4"
    return transformers.Lfm2MoeConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
                                      num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                                      num_dense_layers=1, num_experts=4, num_experts_per_tok=2,
                                      routed_scaling_factor=1.5, conv_L_cache=3, max_position_embeddings=256,
                                      norm_eps=1e-5, initializer_range=0.1,
                                      layer_types=["conv", "full_attention", "conv"])


def _randomize(model):
    for name, p in model.named_parameters():
        if p.ndim == 1:
            p.copy_(1.0 + 0.3 * torch.randn_like(p))
        elif "conv.conv" in name:
            p.copy_(0.5 * torch.randn_like(p))
    for name, b in model.named_buffers():
        if name.endswith("expert_bias"):  # steers the choice away from the largest sigmoid scores
            b.copy_(0.3 * torch.randn_like(b))


checks.define_family_tests(globals(), _config, ["dense1_top2_of_4"], _randomize, VOCAB)


def test_layers_and_parameters(case):
    kind, ref, m, ids, want = case
    info = m.inspect()
    assert [x["kind"] for x in info["layers"]] == ["short_conv", "attention", "short_conv"]
    assert info["parameter_count"] == sum(p.numel() for p in ref.parameters()) + 4 * 2  # + the expert_bias buffers
    assert info["intermediate_size"] == 96


def test_quantize_writes_lfm2moe(case, tmp_path):
    """`attnzoo quantize` at F32: every tensor under the gguf package's lfm2moe name (experts stacked per layer,
    conv kernels squeezed), the converter's keys, and the same logits whole and token by token."""
    kind, ref, m, ids, want = case
    path = str(tmp_path / "lfm2moe.gguf")
    import attnzoo
    attnzoo.quantize(m.directory, path, type="F32")
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LFM2MOE, ref.config.num_hidden_layers)
    expect = {}
    from safetensors.numpy import load_file
    state = load_file(os.path.join(m.directory, "model.safetensors"))  # experts as saved, one tensor each
    for i in range(1, ref.config.num_hidden_layers):
        for w in ("w1", "w3", "w2"):
            stacked = np.stack([state.pop(f"model.layers.{i}.feed_forward.experts.{e}.{w}.weight") for e in range(4)])
            gguf_name = names.get_name(f"layers.{i}.feed_forward.experts.{w}.weight", try_suffixes=(".weight",))
            expect[gguf_name] = stacked
        expect[f"blk.{i}.exp_probs_b.bias"] = state.pop(f"model.layers.{i}.feed_forward.expert_bias")
    for name, value in state.items():
        expect[names.get_name(name, try_suffixes=(".weight", ".bias"))] = value.squeeze(1) if "conv.conv" in name \
            else value
    fields = gguf_checks.check_gguf_tensors(path, expect)
    assert fields["general.architecture"] == "lfm2moe"
    assert fields["lfm2moe.expert_count"] == 4 and fields["lfm2moe.expert_used_count"] == 2
    assert fields["lfm2moe.leading_dense_block_count"] == 1 and fields["lfm2moe.expert_feed_forward_length"] == 32
    assert fields["lfm2moe.attention.head_count_kv"] == [0, 2, 0]
    gguf_checks.check_gguf_logits(path, ids, want, VOCAB, prefill=25)
    gguf_checks.check_gguf_as_safetensors(path, m.directory, ids)


def test_load_errors_name_the_problem(case, tmp_path):
    kind, ref, m, ids, want = case
    edits.check_missing_tensors_are_named(m.directory, tmp_path, ["model.layers.2.feed_forward.experts.3.w2.weight",
                                                                  "model.layers.0.feed_forward.w1.weight"])
    edits.check_config_error_is_named(m.directory, tmp_path / "c", "num_dense_layers", num_dense_layers=-1)


def test_quantize_q8_0_is_the_rounded_checkpoint(case, tmp_path):
    """Q8_0: the projections and each MoE layer's stacked experts as 8-bit blocks (each expert's slice read as
    blocks), routers and conv kernels F32; the file computes what the checkpoint rounded the same way computes."""
    import attnzoo
    kind, ref, m, ids, want = case
    path = str(tmp_path / "q8.gguf")
    attnzoo.quantize(m.directory, path, type="Q8_0")
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LFM2MOE, ref.config.num_hidden_layers)

    def gguf_name_of(name):
        if name.endswith("expert_bias"):
            return f"blk.{name.split('.')[2]}.exp_probs_b.bias"
        if ".experts." in name:  # model.layers.L.feed_forward.experts.E.w.weight
            layer, w = name.split(".")[2], name.split(".")[-2]
            name = f"layers.{layer}.feed_forward.experts.{w}.weight"
        return names.get_name(name, try_suffixes=(".weight", ".bias"))

    types = gguf_checks.check_quantized_file_is_its_rounded_checkpoint(m.directory, path, gguf_name_of, tmp_path, ids)
    assert types["blk.1.ffn_down_exps.weight"] == types["blk.1.attn_q.weight"] == "Q8_0"
    assert types["blk.1.ffn_gate_inp.weight"] == types["blk.0.shortconv.conv.weight"] == "F32"
