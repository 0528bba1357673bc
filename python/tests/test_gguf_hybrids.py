"""GGUF files of the state-space / hybrid families (mamba, mamba2, falcon-h1, lfm2, qwen3next) as a model source:
tiny random transformers models written to GGUF the way llama.cpp's converter (convert_hf_to_gguf.py's
MambaModel, Mamba2Model, FalconH1Model, LFM2Model, Qwen3NextModel) writes them — its metadata keys, tensor names
from the gguf package's own name map, and its edits: A_log stored as -exp(A_log), conv kernels squeezed, Mamba-2's
A / D / gated norm reshaped, Falcon-H1's muP multipliers folded into the weights, Qwen3-Next's norms stored as
1 + w and its in_proj_qkvz split into attn_qkv / attn_gate — in F32, F16 and Q8_0 (gguf.quants), loaded with
Model.load and compared with the transformers model holding the values the file decodes to; for mamba and lfm2
also with transformers' own GGUF loader. `attnzoo quantize` of the mamba / mamba2 / falcon-h1 checkpoints must
write the same F32 files."""
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


def _config(kind):
    if kind == "mamba":
        return transformers.MambaConfig(vocab_size=VOCAB, hidden_size=32, state_size=8, conv_kernel=4, expand=2,
                                        num_hidden_layers=2, layer_norm_epsilon=1e-5, use_bias=True,
                                        tie_word_embeddings=False)
    if kind == "falcon_mamba":  # tied, rms-normed dt / B / C with the layer epsilon (llama.cpp's rule)
        return transformers.FalconMambaConfig(vocab_size=VOCAB, hidden_size=32, state_size=12, conv_kernel=3,
                                              expand=2, time_step_rank=4, num_hidden_layers=2,
                                              layer_norm_epsilon=1e-5, mixer_rms_eps=1e-5, tie_word_embeddings=True)
    if kind == "mamba2":
        return transformers.Mamba2Config(vocab_size=VOCAB, hidden_size=64, num_heads=8, head_dim=16, state_size=8,
                                         n_groups=2, conv_kernel=4, num_hidden_layers=2, layer_norm_epsilon=1e-5,
                                         chunk_size=32, tie_word_embeddings=False)
    if kind == "mamba2_tied_nobias":
        return transformers.Mamba2Config(vocab_size=VOCAB, hidden_size=32, num_heads=4, head_dim=16, state_size=16,
                                         n_groups=1, conv_kernel=3, use_conv_bias=False, num_hidden_layers=2,
                                         layer_norm_epsilon=1e-5, chunk_size=32, tie_word_embeddings=True)
    if kind == "falcon_h1":  # muP multipliers everywhere: the converter folds them into the weights
        return transformers.FalconH1Config(
            vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, max_position_embeddings=512, rms_norm_eps=1e-5, mamba_chunk_size=32,
            mamba_d_ssm=64, mamba_n_heads=4, mamba_d_head=16, mamba_n_groups=2, mamba_d_state=8, mamba_d_conv=4,
            mamba_rms_norm=True, mamba_norm_before_gate=False, tie_word_embeddings=False,
            attention_in_multiplier=0.7, attention_out_multiplier=1.3, key_multiplier=0.8, ssm_in_multiplier=1.2,
            ssm_out_multiplier=0.9, embedding_multiplier=2.0, lm_head_multiplier=0.6,
            mlp_multipliers=[0.8, 1.25], ssm_multipliers=[1.1, 0.9, 1.2, 0.8, 1.05], initializer_range=0.1)
    if kind == "falcon_h1_plain":  # no muP (quantized rows stay as quantized), no gated norm, biases
        return transformers.FalconH1Config(
            vocab_size=VOCAB, hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=1, head_dim=16, max_position_embeddings=512, rms_norm_eps=1e-5, mamba_chunk_size=32,
            mamba_d_ssm=64, mamba_n_heads=8, mamba_d_head=8, mamba_n_groups=1, mamba_d_state=16, mamba_d_conv=2,
            mamba_rms_norm=False, attention_bias=True, mlp_bias=True, mamba_proj_bias=True, projectors_bias=True,
            tie_word_embeddings=False, initializer_range=0.1)
    if kind == "lfm2":
        return transformers.Lfm2Config(vocab_size=VOCAB, hidden_size=64, intermediate_size=192, block_multiple_of=32,
                                       num_attention_heads=4, num_key_value_heads=2, conv_L_cache=3,
                                       num_hidden_layers=4, max_position_embeddings=512, norm_eps=1e-5,
                                       layer_types=["conv", "full_attention", "conv", "full_attention"],
                                       initializer_range=0.1, tie_word_embeddings=True)
    if kind == "lfm2_bias_untied":
        return transformers.Lfm2Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=96,
                                       block_auto_adjust_ff_dim=False, num_attention_heads=2, num_key_value_heads=1,
                                       conv_L_cache=2, conv_bias=True, num_hidden_layers=3,
                                       max_position_embeddings=512, norm_eps=1e-5,
                                       layer_types=["full_attention", "conv", "conv"], initializer_range=0.1,
                                       tie_word_embeddings=False)
    if kind == "qwen3next":
        return transformers.Qwen3NextConfig(
            vocab_size=VOCAB, hidden_size=64, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
            head_dim=16, partial_rotary_factor=0.5, linear_num_key_heads=2, linear_num_value_heads=4,
            linear_key_head_dim=16, linear_value_head_dim=32, linear_conv_kernel_dim=4, full_attention_interval=2,
            intermediate_size=96, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
            shared_expert_intermediate_size=64, norm_topk_prob=True, max_position_embeddings=512,
            rms_norm_eps=1e-6, initializer_range=0.1, tie_word_embeddings=False)
    raise ValueError(kind)


def _arch(kind):
    return {"mamba": "mamba", "falcon_mamba": "mamba", "mamba2": "mamba2", "mamba2_tied_nobias": "mamba2",
            "falcon_h1": "falcon-h1", "falcon_h1_plain": "falcon-h1", "lfm2": "lfm2", "lfm2_bias_untied": "lfm2",
            "qwen3next": "qwen3next"}[kind]


def _randomize(model):
    zero_centered = "qwen3next" in type(model).__name__.lower()  # Qwen3-Next's RMSNorm computes x * (1 + w)
    for name, p in model.named_parameters():
        if name.endswith("A_log"):
            p.copy_(torch.log(torch.rand_like(p) * 2 + 0.2))
        elif name.endswith("dt_proj.bias"):
            p.copy_(-1.0 + 0.8 * torch.randn_like(p))
        elif p.ndim == 1:
            plain_norm = "norm" in name and not (zero_centered and "linear_attn.norm" not in name)
            p.copy_((1.0 if plain_norm else 0.0) + 0.3 * torch.randn_like(p))


# ---- the converter's edits, per family (convert_hf_to_gguf.py) ------------------------------------------------

class Blocks:
    """A quantized matrix as rows of raw blocks: the row operations the converter applies keep blocks intact."""

    def __init__(self, rows):
        self.rows = rows

    def __getitem__(self, idx):
        return Blocks(self.rows[idx])

    @property
    def shape(self):
        return self.rows.shape


def _cat(parts):
    if isinstance(parts[0], Blocks):
        return Blocks(np.concatenate([p.rows for p in parts]))
    return np.concatenate(parts)


def _mup(cfg, name, data):
    """FalconH1Model.modify_tensors: the muP multipliers multiplied into the weights they follow."""
    if "down_proj" in name:
        return data * cfg.mlp_multipliers[1]
    if "gate_proj" in name:
        return data * cfg.mlp_multipliers[0]
    if "k_proj" in name:
        return data * cfg.key_multiplier * cfg.attention_in_multiplier
    if "q_proj" in name or "v_proj" in name:
        return data * cfg.attention_in_multiplier
    if "o_proj" in name:
        return data * cfg.attention_out_multiplier
    if "out_proj" in name:
        return data * cfg.ssm_out_multiplier
    if "in_proj" in name:
        data = data * cfg.ssm_in_multiplier
        inner, gs = cfg.mamba_d_ssm, cfg.mamba_n_groups * cfg.mamba_d_state
        bounds = [0, inner, 2 * inner, 2 * inner + gs, 2 * inner + 2 * gs, data.shape[0]]
        for k, m in enumerate(cfg.ssm_multipliers):
            data[bounds[k]:bounds[k + 1]] *= m
        return data
    if "lm_head" in name:
        return data * cfg.lm_head_multiplier
    if "embed_tokens" in name:
        return data * cfg.embedding_multiplier
    return data


def _qkvz_rows(cfg):
    """Qwen3NextModel.modify_tensors: in_proj_qkvz's rows, [q, k, v, z] per key head, regrouped as
    [all q, all k, all v] (attn_qkv) and [all z] (attn_gate)."""
    nk, dk = cfg.linear_num_key_heads, cfg.linear_key_head_dim
    vz = cfg.linear_num_value_heads // nk * cfg.linear_value_head_dim
    per = 2 * dk + 2 * vz
    part = lambda off, n: np.concatenate([np.arange(h * per + off, h * per + off + n) for h in range(nk)])  # noqa
    return np.concatenate([part(0, dk), part(dk, dk), part(2 * dk, vz)]), part(2 * dk + vz, vz)


def _converted(kind, cfg, state):
    """(gguf name, data) as the converter writes them; data is a float array or Blocks."""
    arch = _arch(kind)
    names = gguf.get_tensor_name_map(next(a for a, n in gguf.MODEL_ARCH_NAMES.items() if n == arch),
                                     cfg.num_hidden_layers)
    out, experts = [], {}
    tied = getattr(cfg, "tie_word_embeddings", False)
    for name, data in state.items():
        if name == "lm_head.weight" and tied:
            continue  # the converter writes no output.weight for a tied head
        if arch in ("mamba2", "falcon-h1", "qwen3next") and name.endswith(".dt_bias"):
            name = name[:-len(".dt_bias")] + ".dt_proj.bias"
        if name.endswith("A_log"):
            data = -np.exp(data.astype(np.float64)).astype(np.float32)
            if arch != "mamba":
                data = data.reshape(*data.shape, 1)
        elif name.endswith("conv1d.weight") or name.endswith("conv.conv.weight"):
            data = data.reshape(data.shape[0], data.shape[2])
        elif name.endswith(".D") and arch != "mamba":
            data = data.reshape(*data.shape, 1)
        elif name.endswith("norm.weight") and (".mixer.norm" in name or ".mamba.norm" in name):
            groups = getattr(cfg, "n_groups", None) or cfg.mamba_n_groups
            data = data.reshape(groups, -1)
        if arch == "falcon-h1":
            data = _mup(cfg, name, data) if not isinstance(data, Blocks) else data
        if arch == "qwen3next":
            if name.endswith("norm.weight") and "linear_attn.norm" not in name:
                data = data + 1
            if name.endswith("in_proj_qkvz.weight"):
                qkv, z = _qkvz_rows(cfg)
                layer = name.split(".")[2]
                out.append((f"blk.{layer}.attn_qkv.weight", data[qkv]))
                out.append((f"blk.{layer}.attn_gate.weight", data[z]))
                continue
            if ".mlp.experts." in name:  # the fused transformers parameters, per expert as checkpoints hold them
                layer = name.split(".")[2]
                inter = cfg.moe_intermediate_size
                if name.endswith("gate_up_proj"):
                    experts[(layer, "gate")], experts[(layer, "up")] = data[:, :inter], data[:, inter:]
                else:
                    experts[(layer, "down")] = data
                continue
        new = names.get_name(name, try_suffixes=(".weight", ".bias"))
        assert new is not None, name
        out.append((new, data))
    for (layer, proj), data in experts.items():  # Qwen2MoeModel stacks the experts
        out.append((f"blk.{layer}.ffn_{proj}_exps.weight", data))
    return out


def _attention_metadata(w, cfg):
    """TextModel.set_gguf_parameters' attention keys, as Falcon-H1 and Qwen3-Next write them."""
    w.add_context_length(cfg.max_position_embeddings)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_key_length(cfg.head_dim)
    w.add_value_length(cfg.head_dim)
    w.add_rope_freq_base(cfg.rope_parameters["rope_theta"])


def _metadata(w, kind, cfg):
    arch = _arch(kind)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_embedding_length(cfg.hidden_size)
    if arch in ("mamba", "mamba2"):
        inner = cfg.intermediate_size if arch == "mamba" else cfg.expand * cfg.hidden_size
        w.add_context_length(2 ** 20)
        w.add_feed_forward_length(0)
        w.add_head_count(0)
        w.add_ssm_conv_kernel(cfg.conv_kernel)
        w.add_ssm_inner_size(inner)
        w.add_ssm_state_size(cfg.state_size)
        w.add_layer_norm_rms_eps(cfg.layer_norm_epsilon)
        if arch == "mamba":
            w.add_ssm_time_step_rank(cfg.time_step_rank)
            w.add_ssm_dt_b_c_rms(kind == "falcon_mamba")
        else:
            w.add_ssm_time_step_rank(inner // cfg.head_dim)
            w.add_ssm_group_count(cfg.n_groups)
    elif arch == "falcon-h1":
        w.add_ssm_conv_kernel(cfg.mamba_d_conv)
        w.add_ssm_inner_size(cfg.mamba_d_ssm)
        w.add_ssm_state_size(cfg.mamba_d_state)
        w.add_ssm_time_step_rank(cfg.mamba_d_ssm // cfg.mamba_d_head)
        w.add_ssm_group_count(cfg.mamba_n_groups)
        w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
        w.add_vocab_size(cfg.vocab_size)
        _attention_metadata(w, cfg)
    elif arch == "lfm2":
        w.add_context_length(cfg.max_position_embeddings)
        w.add_head_count(cfg.num_attention_heads)
        w.add_head_count_kv([cfg.num_key_value_heads if t != "conv" else 0 for t in cfg.layer_types])
        w.add_rope_freq_base(cfg.rope_parameters["rope_theta"])
        w.add_vocab_size(cfg.vocab_size)
        w.add_shortconv_l_cache(cfg.conv_L_cache)
        w.add_layer_norm_rms_eps(cfg.norm_eps)
        ff = cfg.intermediate_size  # LFM2Model._add_feed_forward_length
        if cfg.block_auto_adjust_ff_dim:
            ff = int(2 * ff / 3)
            if cfg.block_ffn_dim_multiplier is not None:
                ff = int(cfg.block_ffn_dim_multiplier * ff)
            ff = cfg.block_multiple_of * ((ff + cfg.block_multiple_of - 1) // cfg.block_multiple_of)
        w.add_feed_forward_length(ff)
    elif arch == "qwen3next":
        _attention_metadata(w, cfg)
        w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
        w.add_expert_count(cfg.num_experts)
        w.add_expert_used_count(cfg.num_experts_per_tok)
        w.add_expert_feed_forward_length(cfg.moe_intermediate_size)
        w.add_expert_shared_feed_forward_length(cfg.shared_expert_intermediate_size)
        w.add_ssm_conv_kernel(cfg.linear_conv_kernel_dim)
        w.add_ssm_state_size(cfg.linear_key_head_dim)
        w.add_ssm_group_count(cfg.linear_num_key_heads)
        w.add_ssm_time_step_rank(cfg.linear_num_value_heads)
        w.add_ssm_inner_size(cfg.linear_value_head_dim * cfg.linear_num_value_heads)
        interval = cfg.layer_types.index("full_attention") + 1  # transformers keeps only the layer types
        assert cfg.layer_types == ["full_attention" if (i + 1) % interval == 0 else "linear_attention"
                                   for i in range(cfg.num_hidden_layers)]
        w.add_full_attention_interval(interval)
        factor = cfg.rope_parameters.get("partial_rotary_factor", getattr(cfg, "partial_rotary_factor", 0.25))
        w.add_rope_dimension_count(int(cfg.head_dim * factor))
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"t{i}" for i in range(cfg.vocab_size)])
    w.add_token_types([1] * cfg.vocab_size)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)


# The converter keeps these in F32 whatever the file type (besides every 1-D tensor and every norm).
_ALWAYS_F32 = ("ssm_conv1d.weight", "shortconv.conv.weight", "ssm_a", "ssm_d", "ffn_gate_inp.weight",
               "ffn_gate_inp_shexp.weight")


_KERNELS = ("conv1d.weight", "conv.conv.weight")  # convolution kernels (F32 in the file)


def _quantizable(name, p):
    return (p.ndim == 2 and p.shape[1] % 32 == 0 and "norm" not in name and not name.endswith(("A_log", ".D"))
            and not name.endswith(_KERNELS + ("mlp.gate.weight", "shared_expert_gate.weight")))


def write_gguf(model, kind, path, ftype):
    """The converter's file for `model`; for q8_0 the quantizable matrices are quantized in Hugging Face row
    order (the converter's row edits commute with blocks that run along rows) and the model is given the values
    the blocks decode to."""
    cfg = model.config
    state = {}
    with torch.no_grad():
        for name, p in model.state_dict().items():
            data = p.float().numpy().copy()
            if ftype == "q8_0" and _quantizable(name, data):
                blocks = gguf.quants.quantize(np.ascontiguousarray(data), Q8_0)
                p.copy_(torch.from_numpy(gguf.quants.dequantize(blocks, Q8_0).reshape(data.shape)))
                data = Blocks(blocks)
            elif ftype == "f16" and data.ndim > 1 and "norm" not in name and not name.endswith(_KERNELS):
                data = data.astype(np.float16).astype(np.float32)
                p.copy_(torch.from_numpy(data))
            state[name] = data
        if kind == "qwen3next" and ftype == "q8_0":  # the fused experts, quantized per expert matrix
            for name, p in model.named_parameters():
                if ".mlp.experts." in name:
                    data = p.detach().float().numpy()
                    blocks = np.stack([gguf.quants.quantize(np.ascontiguousarray(e), Q8_0) for e in data])
                    p.copy_(torch.from_numpy(np.stack([gguf.quants.dequantize(b, Q8_0) for b in blocks])))
                    state[name] = Blocks(blocks)
    w = gguf.GGUFWriter(path, _arch(kind))
    _metadata(w, kind, cfg)
    for new, data in _converted(kind, cfg, state):
        if isinstance(data, Blocks):
            w.add_tensor(new, np.ascontiguousarray(data.rows), raw_dtype=Q8_0)
            continue
        data = np.ascontiguousarray(data, dtype=np.float32)
        if ftype == "f16" and data.ndim > 1 and not new.endswith(("_norm.weight", "norm")) and \
                not new.endswith(_ALWAYS_F32):
            data = data.astype(np.float16)
        w.add_tensor(new, data)
    gguf_checks.finish_gguf(w)


def _build(kind, ftype, directory):
    return gguf_checks.save_gguf_and_checkpoint(kind, _config(kind), _randomize, directory, ftype,
                                                lambda model, path: write_gguf(model, kind, path, ftype))


# falcon_h1 in F32 only: its F16 weights would be rounded after the multipliers are folded in, so no transformers
# model holds exactly the values of the file
CASES = [(k, f) for k in ("mamba", "falcon_mamba", "mamba2", "mamba2_tied_nobias", "falcon_h1_plain", "lfm2",
                          "lfm2_bias_untied", "qwen3next") for f in ("f32", "f16")] + \
        [("falcon_h1", "f32"), ("mamba", "q8_0"), ("mamba2", "q8_0"), ("falcon_h1_plain", "q8_0"), ("lfm2", "q8_0"),
         ("qwen3next", "q8_0")]


gguf_checks.add_gguf_case_tests(globals(), CASES, _build, VOCAB, PROMPT_LEN, against_safetensors=True)


def test_synthesized_config(case):
    kind, ftype, directory, path, ids, want = case
    cfg = gguf_checks.check_synthesized_config(path, _config(kind), (
        "hidden_size", "num_hidden_layers", "vocab_size", "num_attention_heads", "num_key_value_heads",
        "state_size", "conv_kernel", "n_groups", "num_heads", "head_dim", "time_step_rank", "layer_types",
        "conv_L_cache", "mamba_d_ssm", "mamba_n_heads", "mamba_d_head", "mamba_n_groups", "mamba_d_state",
        "mamba_d_conv", "mamba_rms_norm", "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
        "linear_value_head_dim", "linear_conv_kernel_dim", "partial_rotary_factor", "num_experts",
        "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size"))
    assert cfg["bos_token_id"] == 1 and cfg["eos_token_id"] == 2


def test_transformers_gguf_loader_agrees(case):
    """transformers reads mamba and lfm2 GGUFs itself, undoing A = -exp(A_log) and the squeezed kernels with its
    own tensor processors; run under the true config (its synthesized one drops e.g. LFM2's layer types)."""
    kind, ftype, directory, path, ids, want = case
    if _arch(kind) not in ("mamba", "lfm2") or kind == "falcon_mamba":
        pytest.skip("transformers' GGUF loader has no " + kind)
    if kind == "lfm2_bias_untied":
        pytest.skip("transformers' GGUF loader does not map shortconv.conv.bias (it leaves conv.conv.bias random)")
    pytest.importorskip("accelerate")
    ref = transformers.AutoModelForCausalLM.from_pretrained(
        directory, gguf_file=os.path.basename(path), config=_config(kind), dtype=torch.float32).eval()
    np.testing.assert_allclose(Model.load(path).forward(ids), checks.reference_logits(ref, ids),
                               atol=checks.ATOL, rtol=0)


# the kinds `attnzoo quantize` writes
_QUANTIZABLE = ("mamba", "falcon_mamba", "mamba2", "mamba2_tied_nobias", "falcon_h1", "falcon_h1_plain")


def test_quantize_writes_the_converters_file(case, tmp_path):
    """`attnzoo quantize` at F32 on the checkpoint the converter-style file was made from: the same tensors (names,
    shapes, types, values: A = -exp(A_log), squeezed kernels, Mamba-2's reshaped A / D / gated norm, Falcon-H1's
    muP multipliers folded in, no tied output), the same <arch>.* keys, and the transformers model's logits from
    the file."""
    import attnzoo
    kind, ftype, directory, path, ids, want = case
    if ftype != "f32" or kind not in _QUANTIZABLE:
        pytest.skip("quantize is checked at F32 on " + ", ".join(_QUANTIZABLE))
    out = str(tmp_path / "quantized.gguf")
    attnzoo.quantize(os.path.join(directory, "hf"), out, type="F32")
    theirs, ours = gguf.GGUFReader(path), gguf.GGUFReader(out)
    want_tensors = {t.name: t for t in theirs.tensors}
    got_tensors = {t.name: t for t in ours.tensors}
    assert set(got_tensors) == set(want_tensors)
    for name, t in want_tensors.items():
        got, value = np.asarray(got_tensors[name].data), np.asarray(t.data)
        assert (got.shape, got_tensors[name].tensor_type) == (value.shape, t.tensor_type), name
        if name.endswith("ssm_a"):  # -exp in f64 (ours) and f64 then f32 (the test's): equal up to rounding
            np.testing.assert_allclose(got, value, rtol=1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(got, value, err_msg=name)
    prefix = _arch(kind) + "."
    keys = lambda r: {f.name: f.contents() for f in r.fields.values() if f.name.startswith(prefix)}  # noqa: E731
    assert keys(ours) == keys(theirs)
    gguf_checks.check_gguf_logits(out, ids, want, VOCAB, prefill=30)


@pytest.mark.parametrize("updates, match", [
    (dict(mamba_norm_before_gate=True), r"mamba_norm_before_gate': GGUF \(llama.cpp's falcon-h1\) normalizes after"),
    (dict(tie_word_embeddings=True), r"lm_head_multiplier': a tied head's multiplier must equal embedding_multiplier"),
    (dict(ssm_multipliers=[1.0, 1.0]), r"ssm_multipliers': expected 5 values"),
])
def test_quantize_refuses_what_falcon_h1_files_cannot_say(updates, match, tmp_path):
    """llama.cpp's falcon-h1 gates before its norm and folds the head's multiplier into the one tied table: a
    config saying otherwise is refused by key, as is a multiplier list of the wrong length."""
    import attnzoo
    import json
    directory = tmp_path / "hf"
    checks.save_random_model("falcon_h1", _config("falcon_h1"), str(directory), _randomize)
    cfg = json.loads((directory / "config.json").read_text())
    cfg.update(updates)
    (directory / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match=match):
        attnzoo.quantize(str(directory), str(tmp_path / "out.gguf"), type="F32")


_TINY_META = {"embedding_length": 4, "block_count": 1, "ssm.inner_size": 8, "ssm.state_size": 2,
              "ssm.conv_kernel": 2, "ssm.time_step_rank": 2, "ssm.group_count": 1, "attention.head_count": 1,
              "expert_count": 2, "expert_used_count": 1, "expert_feed_forward_length": 4,
              "expert_shared_feed_forward_length": 4}


def _tiny_file(path, arch, tensors):
    """A file with just enough metadata for the config, and the given tensors."""
    w = gguf.GGUFWriter(path, arch)
    for k, v in _TINY_META.items():
        w.add_uint32(f"{arch}.{k}", v)
    for name, data in tensors.items():
        w.add_tensor(name, data)
    gguf_checks.finish_gguf(w)


def test_a_that_is_not_negative_is_refused(tmp_path):
    path = str(tmp_path / "m.gguf")
    _tiny_file(path, "mamba", {"token_embd.weight": np.zeros((8, 4), np.float32),
                               "blk.0.ssm_a": np.array([[-1.0, 0.5]], np.float32)})
    with pytest.raises(ValueError, match=r"m\.gguf: tensor 'blk\.0\.ssm_a': value 0\.5.* is not negative"):
        Model.load(path)


def test_unknown_hybrid_tensor_is_named(tmp_path):
    path = str(tmp_path / "m.gguf")
    _tiny_file(path, "mamba2", {"token_embd.weight": np.zeros((8, 4), np.float32),
                                "blk.0.mystery.weight": np.zeros((4,), np.float32)})
    with pytest.raises(ValueError, match=r"tensor 'blk\.0\.mystery\.weight': no Hugging Face counterpart for a "
                                         r"mamba2 model"):
        Model.load(path)


def test_qkv_without_its_gate_is_named(tmp_path):
    path = str(tmp_path / "m.gguf")
    _tiny_file(path, "qwen3next", {"token_embd.weight": np.zeros((8, 4), np.float32),
                                   "blk.0.attn_qkv.weight": np.zeros((8, 4), np.float32)})
    with pytest.raises(ValueError, match=r"tensor 'blk\.0\.attn_qkv\.weight': comes without "
                                         r"'blk\.0\.attn_gate\.weight'"):
        Model.load(path)
