"""Jamba (JambaForCausalLM: Mamba-1 mixers with RMS-normed dt / B / C, attention without positions every
attn_layer_period-th layer, a softmax top-k MoE (not renormalized) every expert_layer_period-th layer) against
transformers (eager, float32) on a tiny random checkpoint: whole prompt, pieces (conv tails, SSM states and KV
caches carried), token-by-token decode over paged blocks, greedy continuation, ragged batches; the parameter count
of the config alone; and the jamba GGUF `attnzoo quantize` writes (the gguf package's names, experts stacked,
A_log as -exp(A_log), conv kernels squeezed) loading with the same logits."""
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
EXPERTS = 4


def _config(kind):
    assert kind == "attn_every_2nd_moe_every_2nd"
    return transformers.JambaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=48, num_hidden_layers=4,
                                    num_attention_heads=4, num_key_value_heads=2, num_experts=EXPERTS,
                                    num_experts_per_tok=2, attn_layer_period=2, attn_layer_offset=1,
                                    expert_layer_period=2, expert_layer_offset=0, mamba_d_state=8, mamba_d_conv=4,
                                    mamba_expand=2, mamba_dt_rank=8, rms_norm_eps=1e-5, initializer_range=0.1,
                                    max_position_embeddings=256, tie_word_embeddings=False)


def _randomize(model):
    for name, p in model.named_parameters():
        if p.ndim == 1 and not name.endswith((".D", "dt_proj.bias", "conv1d.bias")):
            p.copy_(1.0 + 0.3 * torch.randn_like(p))


checks.define_family_tests(globals(), _config, ["attn_every_2nd_moe_every_2nd"], _randomize, VOCAB)


def test_layers_and_parameters(case):
    kind, ref, m, ids, want = case
    info = m.inspect()
    assert [x["kind"] for x in info["layers"]] == ["mamba", "attention"] * 2
    assert info["parameter_count"] == sum(p.numel() for p in ref.parameters())


def test_quantize_writes_jamba(case, tmp_path):
    """`attnzoo quantize` at F32: every tensor under the gguf package's jamba name (experts stacked per MoE layer,
    A = -exp(A_log), conv kernels squeezed), the converter's keys, and the same logits whole and token by token;
    the file read back gives the checkpoint's config (periods and offsets from head_count_kv and the routers)."""
    import attnzoo
    from safetensors.numpy import load_file
    kind, ref, m, ids, want = case
    path = str(tmp_path / "jamba.gguf")
    attnzoo.quantize(m.directory, path, type="F32")
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.JAMBA, ref.config.num_hidden_layers)
    state = load_file(os.path.join(m.directory, "model.safetensors"))
    expect = {}
    for i in (0, 2):
        for proj in ("gate_proj", "up_proj", "down_proj"):
            stacked = np.stack([state.pop(f"model.layers.{i}.feed_forward.experts.{e}.{proj}.weight")
                                for e in range(EXPERTS)])
            expect[names.get_name(f"model.layers.{i}.mlp.experts.{proj}.weight", try_suffixes=(".weight",))] = stacked
    for name, value in state.items():
        if name.endswith("A_log"):
            value = -np.exp(value)
        expect[names.get_name(name, try_suffixes=(".weight", ".bias"))] = value
    fields = gguf_checks.check_gguf_tensors(path, expect, close=("ssm_a",))  # -exp from f64 (ours), f32 (numpy)
    assert fields["general.architecture"] == "jamba"
    assert fields["jamba.attention.head_count_kv"] == [0, 2, 0, 2]
    assert (fields["jamba.ssm.inner_size"], fields["jamba.ssm.time_step_rank"]) == (128, 8)
    gguf_checks.check_gguf_logits(path, ids, want, VOCAB, prefill=25)
    gguf_checks.check_synthesized_config(path, ref.config, ["attn_layer_period", "attn_layer_offset",
                                                            "expert_layer_period", "expert_layer_offset", "num_experts",
                                                            "mamba_dt_rank", "mamba_d_state", "mamba_expand",
                                                            "intermediate_size"])


def test_load_errors_name_the_problem(case, tmp_path):
    kind, ref, m, ids, want = case
    edits.check_missing_tensors_are_named(m.directory, tmp_path, [
        "model.layers.2.mamba.dt_layernorm.weight", "model.layers.2.feed_forward.experts.3.up_proj.weight"])
    edits.check_config_error_is_named(m.directory, tmp_path / "c", "attn_layer_offset", attn_layer_offset=2)



def test_quantize_q8_0_is_the_rounded_checkpoint(case, tmp_path):
    """Q8_0: the projections and each layer's stacked experts as 8-bit blocks (each expert's slice read as blocks),
    the routers, A and the conv kernels F32 as the converter keeps them; the file computes what the checkpoint
    rounded the same way computes."""
    import attnzoo
    kind, ref, m, ids, want = case
    path = str(tmp_path / "q8.gguf")
    attnzoo.quantize(m.directory, path, type="Q8_0")
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.JAMBA, ref.config.num_hidden_layers)

    def gguf_name_of(name):
        if ".experts." in name:  # model.layers.L.feed_forward.experts.E.proj.weight
            layer, proj = name.split(".")[2], name.split(".")[-2]
            name = f"model.layers.{layer}.mlp.experts.{proj}.weight"
        return names.get_name(name, try_suffixes=(".weight", ".bias"))

    types = gguf_checks.check_quantized_file_is_its_rounded_checkpoint(m.directory, path, gguf_name_of, tmp_path, ids)
    assert types["blk.0.ffn_up_exps.weight"] == types["blk.1.attn_q.weight"] == "Q8_0"
    assert types["blk.0.ffn_gate_inp.weight"] == types["blk.0.ssm_a"] == types["blk.0.ssm_conv1d.weight"] == "F32"
