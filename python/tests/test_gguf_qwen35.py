"""Qwen3.5 GGUF files (llama.cpp's qwen35 / qwen35moe) as a model source: tiny random transformers
Qwen3_5ForCausalLM / Qwen3_5MoeForCausalLM models written the way convert_hf_to_gguf.py's Qwen3_5TextModel /
Qwen3_5MoeTextModel writes them — Qwen3NextModel's edits (A_log stored as -exp(A_log), dt_bias as ssm_dt.bias,
squeezed conv kernels, zero-centred norms stored as 1 + w), Qwen2MoeModel's stacked experts (gate_up_proj split,
or kept fused as ffn_gate_up_exps, the converter's option), and
_LinearAttentionVReorderBase's reordering of the linear-attention value heads from grouped by key head to tiled
over the key heads (in_proj_qkv's v rows, in_proj_z, in_proj_b / a, A_log, dt_bias, conv1d's v channels and
out_proj's input columns), restated here in numpy from the converter's math — loaded with Model.load and compared
with transformers and with attnzoo's load of the safetensors checkpoint. The models have 3 value heads per key head,
so the reordering is not the identity: a file written without it gives other logits."""
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")

import gguf_checks  # noqa: E402
import model_checks as checks  # noqa: E402
from attnzoo.model import Model  # noqa: E402

VOCAB = 160
# Quantized files against f32 references at 1e-4 (and token for token): f32 products in every projection
# (conftest.py); the default "auto" is covered by test_gguf_auto_precision.py.
MATMUL_PRECISION = "highest"
PROMPT_LEN = 40
Q8_0 = gguf.GGMLQuantizationType.Q8_0
Q8_0_BLOCK, Q8_0_BYTES = 32, 34


def _config(kind):
    common = dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=16, linear_num_key_heads=2, linear_num_value_heads=6,
                  linear_key_head_dim=16, linear_value_head_dim=32, linear_conv_kernel_dim=4,
                  full_attention_interval=2, max_position_embeddings=512, rms_norm_eps=1e-6,
                  initializer_range=0.1)
    if kind.startswith("dense"):
        return transformers.Qwen3_5TextConfig(intermediate_size=96, tie_word_embeddings=False, **common)
    return transformers.Qwen3_5MoeTextConfig(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                                             shared_expert_intermediate_size=48, tie_word_embeddings=True, **common)


def _arch(kind):
    return "qwen35" if kind.startswith("dense") else "qwen35moe"


def _randomize(model):
    for name, p in model.named_parameters():
        if name.endswith("A_log"):
            p.copy_(torch.empty_like(p).uniform_(0.05, 1.0).log())
        elif name.endswith("linear_attn.norm.weight"):  # the gated norm multiplies by w itself
            p.copy_(1.0 + 0.3 * torch.randn_like(p))
        elif p.ndim == 1:  # zero-centred (1 + w) norms, dt_bias
            p.copy_(0.3 * torch.randn_like(p))


# ---- the converter (convert_hf_to_gguf.py's Qwen3.5 classes), restated ----------------------------------------

def _tile(x, axis, nk, r, head):
    """_LinearAttentionVReorderBase._reorder_v_heads: along `axis`, heads grouped by key head (k * r + j) move to
    tiled order (j * nk + k), `head` units each."""
    x = np.moveaxis(x, axis, 0)
    rest = x.shape[1:]
    x = x.reshape(nk, r, head, *rest).swapaxes(0, 1).reshape(nk * r * head, *rest)
    return np.ascontiguousarray(np.moveaxis(x, 0, axis))


def _reorder(cfg, name, data, quantized):
    """The value-head reordering of one linear-attention tensor (`data` in Hugging Face order; for a quantized
    matrix its rows of raw Q8_0 blocks, which the row and block-aligned column moves keep whole)."""
    nk, nv = cfg.linear_num_key_heads, cfg.linear_num_value_heads
    r, dk, dv = nv // nk, cfg.linear_key_head_dim, cfg.linear_value_head_dim
    qk = 2 * nk * dk
    if name.endswith(("in_proj_qkv.weight", "conv1d.weight")):
        return np.concatenate([data[:qk], _tile(data[qk:], 0, nk, r, dv)])
    if name.endswith("in_proj_z.weight"):
        return _tile(data, 0, nk, r, dv)
    if name.endswith(("in_proj_b.weight", "in_proj_a.weight", "A_log", "dt_bias")):
        return _tile(data, 0, nk, r, 1)
    if name.endswith("out_proj.weight"):
        return _tile(data, 1, nk, r, dv // Q8_0_BLOCK * Q8_0_BYTES if quantized else dv)
    return data


def _converted(kind, cfg, state, quantized, tile=True):
    """(gguf name, data, is Q8_0 blocks) as the converter writes them."""
    arch = _arch(kind)
    names = gguf.get_tensor_name_map(next(a for a, n in gguf.MODEL_ARCH_NAMES.items() if n == arch),
                                     cfg.num_hidden_layers)
    out = []
    for name, data in state.items():
        if name == "lm_head.weight" and cfg.tie_word_embeddings:
            continue
        q = name in quantized
        if ".linear_attn." in name and tile:
            data = _reorder(cfg, name, data, q)
        if name.endswith(".A_log"):  # Qwen3NextModel.modify_tensors
            data = -np.exp(data.astype(np.float64)).astype(np.float32)
        elif name.endswith(".dt_bias"):
            name = name[:-len(".dt_bias")] + ".dt_proj.bias"
        elif name.endswith("conv1d.weight"):
            data = data.reshape(data.shape[0], data.shape[2])
        elif name.endswith("norm.weight") and "linear_attn.norm" not in name:
            data = data + 1
        if ".mlp.experts." in name:  # Qwen2MoeModel: gate_up_proj split, the experts stacked as they come
            layer = name.split(".")[2]
            if name.endswith("gate_up_proj") and kind == "moe_fused":  # the converter's optional fusion
                out.append((f"blk.{layer}.ffn_gate_up_exps.weight", data, q))
            elif name.endswith("gate_up_proj"):
                inter = data.shape[1] // 2
                out.append((f"blk.{layer}.ffn_gate_exps.weight", data[:, :inter], q))
                out.append((f"blk.{layer}.ffn_up_exps.weight", data[:, inter:], q))
            else:
                out.append((f"blk.{layer}.ffn_down_exps.weight", data, q))
            continue
        new = names.get_name(name, try_suffixes=(".weight", ".bias"))
        assert new is not None, name
        out.append((new, data, q))
    return out


def _metadata(w, cfg, mtp, key_heads=None):
    """TextModel, Qwen2MoeModel, Qwen3NextModel and the Qwen3.5 mixins' set_gguf_parameters."""
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers + mtp)
    if getattr(cfg, "intermediate_size", None) is not None:
        w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_rope_freq_base(cfg.rope_parameters["rope_theta"])
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_key_length(cfg.head_dim)
    w.add_value_length(cfg.head_dim)
    if getattr(cfg, "num_experts", None):
        w.add_expert_count(cfg.num_experts)
        w.add_expert_used_count(cfg.num_experts_per_tok)
        w.add_expert_feed_forward_length(cfg.moe_intermediate_size)
        w.add_expert_shared_feed_forward_length(cfg.shared_expert_intermediate_size)
    w.add_ssm_conv_kernel(cfg.linear_conv_kernel_dim)
    w.add_ssm_state_size(cfg.linear_key_head_dim)
    w.add_ssm_group_count(key_heads or cfg.linear_num_key_heads)
    w.add_ssm_time_step_rank(cfg.linear_num_value_heads)
    w.add_ssm_inner_size(cfg.linear_value_head_dim * cfg.linear_num_value_heads)
    interval = cfg.layer_types.index("full_attention") + 1
    assert cfg.layer_types == ["full_attention" if (i + 1) % interval == 0 else "linear_attention"
                               for i in range(cfg.num_hidden_layers)]
    w.add_full_attention_interval(interval)
    w.add_rope_dimension_count(int(cfg.head_dim * cfg.rope_parameters["partial_rotary_factor"]))
    w.add_rope_dimension_sections([11, 11, 10, 0])  # _Qwen35MRopeMixin's default
    if mtp:
        w.add_nextn_predict_layers(mtp)
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"t{i}" for i in range(cfg.vocab_size)])
    w.add_token_types([1] * cfg.vocab_size)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)


def _mtp_block(cfg, rng):
    """The prediction block _Qwen35MtpMixin appends after the decoder (block num_hidden_layers): random weights
    that a text forward pass never reads."""
    b, h = cfg.num_hidden_layers, cfg.hidden_size
    t = {f"blk.{b}.nextn.eh_proj.weight": (2 * h, h), f"blk.{b}.nextn.enorm.weight": (h,),
         f"blk.{b}.nextn.hnorm.weight": (h,), f"blk.{b}.nextn.shared_head_norm.weight": (h,),
         f"blk.{b}.attn_norm.weight": (h,), f"blk.{b}.attn_q.weight": (2 * cfg.num_attention_heads * cfg.head_dim, h),
         f"blk.{b}.attn_k.weight": (cfg.num_key_value_heads * cfg.head_dim, h),
         f"blk.{b}.attn_v.weight": (cfg.num_key_value_heads * cfg.head_dim, h),
         f"blk.{b}.attn_output.weight": (h, cfg.num_attention_heads * cfg.head_dim)}
    return {k: rng.standard_normal(s).astype(np.float32) for k, s in t.items()}


def write_gguf(model, kind, path, ftype, tile=True, mtp=0, key_heads=None):
    """The converter's file for `model`; for q8_0 the 2-D matrices are quantized in Hugging Face order (the
    converter reorders first, but its moves keep Q8_0 blocks whole, so the two orders give the same bytes) and the
    model is given the values the blocks decode to."""
    cfg = model.config
    state, quantized = {}, set()
    with torch.no_grad():
        for name, p in model.state_dict().items():
            data = p.float().numpy().copy()
            if ftype == "q8_0" and data.ndim >= 2 and data.shape[-1] % Q8_0_BLOCK == 0 and "conv1d" not in name \
                    and not name.endswith(("mlp.gate.weight", "shared_expert_gate.weight")):
                blocks = gguf.quants.quantize(np.ascontiguousarray(data), Q8_0)
                p.copy_(torch.from_numpy(gguf.quants.dequantize(blocks, Q8_0).reshape(data.shape)))
                data = blocks
                quantized.add(name)
            state[name] = data
    w = gguf.GGUFWriter(path, _arch(kind))
    _metadata(w, cfg, mtp, key_heads)
    for new, data, q in _converted(kind, cfg, state, quantized, tile):
        if q:
            w.add_tensor(new, np.ascontiguousarray(data), raw_dtype=Q8_0)
        else:
            w.add_tensor(new, np.ascontiguousarray(data, dtype=np.float32))
    for new, data in (_mtp_block(cfg, np.random.default_rng(7)).items() if mtp else ()):
        w.add_tensor(new, data)
    gguf_checks.finish_gguf(w)


def _build(kind, ftype, directory):
    return gguf_checks.save_gguf_and_checkpoint(
        kind, _config(kind), _randomize, directory, ftype,
        lambda model, path: write_gguf(model, kind, path, ftype, mtp=1 if kind == "dense_mtp" else 0))


CASES = [("dense", "f32"), ("dense", "q8_0"), ("dense_mtp", "f32"), ("moe", "f32"), ("moe", "q8_0"),
         ("moe_fused", "q8_0")]


gguf_checks.add_gguf_case_tests(globals(), CASES, _build, VOCAB, PROMPT_LEN, against_safetensors=True)


def test_synthesized_config(case):
    kind, ftype, directory, path, ids, want = case
    ref = _config(kind)
    cfg = gguf_checks.check_synthesized_config(path, ref, (
        "hidden_size", "num_hidden_layers", "vocab_size", "num_attention_heads", "num_key_value_heads", "head_dim",
        "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
        "linear_conv_kernel_dim", "intermediate_size", "num_experts", "num_experts_per_tok", "moe_intermediate_size",
        "shared_expert_intermediate_size", "tie_word_embeddings"))
    assert cfg["num_hidden_layers"] == ref.num_hidden_layers  # the prediction block is not counted
    assert cfg["partial_rotary_factor"] == ref.rope_parameters["partial_rotary_factor"]


def test_the_reordering_is_not_the_identity(tmp_path):
    """The same model written without the value-head reordering: its logits differ, so the tests above would
    fail if the loader did not move the heads back."""
    kind = "dense"
    model = checks.random_model(kind, _config(kind), _randomize).eval()
    ids = checks.prompt(VOCAB, PROMPT_LEN)
    want = checks.meaningful_logits(model, ids)
    path = str(tmp_path / "grouped.gguf")
    write_gguf(model, kind, path, "f32", tile=False)
    assert np.abs(Model.load(path).forward(ids) - want).max() > 100 * checks.ATOL


def test_inconsistent_head_counts_are_named(tmp_path):
    kind = "dense"
    model = checks.random_model(kind, _config(kind), _randomize).eval()
    path = str(tmp_path / "m.gguf")
    write_gguf(model, kind, path, "f32", key_heads=4)  # 6 value heads do not split over 4 key heads
    with pytest.raises(ValueError, match=r"key 'qwen35\.ssm\.time_step_rank' \(6 value heads\) is not a multiple of "
                                         r"'qwen35\.ssm\.group_count' \(4 key heads\)"):
        Model.load(path)
