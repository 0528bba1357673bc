"""Kimi Linear (Kimi Delta Attention + NoPE multi-head latent attention hybrid, DeepSeek-style sigmoid MoE) against
transformers' pure-PyTorch path (float32) on tiny random checkpoints: whole prompt, prompt in pieces (the conv tail
and the per-channel-decay delta-rule state carried exactly), token-by-token decode, greedy continuation, ragged
batches, the per-layer state `inspect` reports, and load errors."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import checkpoint_edits as edits  # noqa: E402
import gguf_checks  # noqa: E402
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
    if kind == "dense_qlora":  # every layer dense, q LoRA in the MLA layer, MLA first, conv kernel 3; a large
        # rms_norm_eps, which the MLA's latent norms do not take (transformers builds them with 1e-6)
        return transformers.KimiLinearConfig(
            q_lora_rank=24, moe_intermediate_size=32, num_experts=4, num_experts_per_tok=2,
            first_k_dense_replace=4, linear_attn_config=dict(
                head_dim=32, num_heads=2, short_conv_kernel_size=3, kda_layers=[2, 3, 4], full_attn_layers=[1]),
            **{**common, "rms_norm_eps": 1e-2})
    if kind == "dense_qlora_gguf":  # dense_qlora with as many KDA heads as attention heads, as kimi-linear holds
        return transformers.KimiLinearConfig(
            q_lora_rank=24, moe_intermediate_size=32, num_experts=4, num_experts_per_tok=2,
            first_k_dense_replace=4, linear_attn_config=dict(
                head_dim=16, num_heads=4, short_conv_kernel_size=3, kda_layers=[2, 3, 4], full_attn_layers=[1]),
            **common)
    raise ValueError(kind)


KINDS = ["moe", "dense_qlora"]


def _uses_torch_path():
    """The reference must be transformers' own PyTorch KDA and causal conv, not an fla / causal-conv1d kernel."""
    from transformers.models.kimi_linear import modeling_kimi_linear as mk
    return checks.runs_torch_forms((mk.chunk_kimi_delta_attention, mk.recurrent_kimi_delta_attention,
                                    mk.causal_conv1d_fn, mk.causal_conv1d_update))


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


checks.define_family_tests(globals(), _config, KINDS, _randomize, VOCAB, PROMPT_LEN, (PIECES, PIECES[::-1]),
                           prefill=3, stop=70, block_size=16, torch_path=_uses_torch_path)


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
    d = edits.copy_with(m.directory, tmp_path / "keys", config_edit=edit)
    np.testing.assert_allclose(Model.load(d).forward(ids[:40]), want[:40], atol=1e-4, rtol=0)


def test_tie_word_embeddings_true_still_uses_the_checkpoints_lm_head(case, tmp_path):
    """transformers never ties Kimi Linear: with tie_word_embeddings true in config.json it still loads the
    checkpoint's own lm_head.weight, and so must we."""
    kind, ref, m, ids, want = case
    d = edits.copy_with(m.directory, tmp_path / "tied", config_edit=lambda c: c.update(tie_word_embeddings=True))
    ref_tied = transformers.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32,
                                                                 attn_implementation="eager").eval()
    want_tied = checks.reference_logits(ref_tied, ids[:40])
    np.testing.assert_allclose(want_tied, want[:40], atol=1e-5, rtol=0)  # the premise: transformers ignores the flag
    got = Model.load(d)
    assert got.inspect()["tied_embeddings"] is False
    np.testing.assert_allclose(got.forward(ids[:40]), want_tied, atol=1e-4, rtol=0)


small_dir = edits.checkpoint_fixture(_build, "moe")


def test_load_errors_name_the_problem(small_dir, tmp_path):
    edits.check_missing_tensors_are_named(small_dir, tmp_path, [
        "model.layers.0.self_attn.k_conv1d.weight", "model.layers.1.self_attn.A_log",
        "model.layers.1.self_attn.g_b_proj.weight", "model.layers.2.self_attn.kv_b_proj.weight",
        "model.layers.3.block_sparse_moe.experts.5.w3.weight", "model.layers.0.block_sparse_moe.up_proj.weight"])
    dt = "model.layers.0.self_attn.dt_bias"
    edits.check_edited_tensor_is_named(small_dir, tmp_path / "dt", dt, lambda w: w[:10].copy())
    edits.check_config_error_is_named(small_dir, tmp_path / "types", "layer_types",
                                      layer_types=["full_attention"] * 3)
    edits.check_config_error_is_named(small_dir, tmp_path / "topk", "num_experts_per_tok", num_experts_per_token=9)


GGUF_LEN = 40  # prompt tokens of the GGUF checks (decode from 30)


def _gguf_name(name, layers):
    """The GGUF tensor convert_hf_to_gguf.py's KimiLinearModel writes Hugging Face tensor `name` into (an expert:
    its layer's stack), by the gguf package's name map."""
    gguf = pytest.importorskip("gguf")
    parts = name.split(".")
    if ".experts." in name:
        return f"blk.{parts[2]}.ffn_{dict(w1='gate', w2='down', w3='up')[parts[-2]]}_exps.weight"
    name = name.replace("e_score_correction_bias", "e_score_correction.bias").replace(".dt_bias", ".dt_proj.bias")
    for proj in ("gate_proj", "up_proj", "down_proj"):  # the dense layers' MLP, as the released checkpoints name it
        name = name.replace(f"block_sparse_moe.{proj}", f"mlp.{proj}")
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.KIMI_LINEAR, layers)
    return names.get_name(name, try_suffixes=(".weight", ".bias"))


def _write_converter_gguf(directory, path, split_kv_b=True):
    """The kimi-linear file convert_hf_to_gguf.py's KimiLinearModel writes for the checkpoint in `directory`,
    restated with the gguf package: head_count_kv 0 / 1 per layer (KDA / MLA), the KDA and MLA keys, the MoE's
    (sigmoid gating: a released config's moe_router_activation_func), the short-conv kernels as [1, C, 1, K], A_log
    as -exp(A_log) (in double, rounded once, as attnzoo does; the converter's f32 exp may differ in the last bit),
    dt_bias as ssm_dt.bias, the experts stacked per layer, kv_b_proj split into attn_k_b / attn_v_b (or kept whole
    as attn_kv_b when not split_kv_b)."""
    import os
    import gguf
    import deepseek_gguf
    from safetensors.numpy import load_file
    cfg = transformers.AutoConfig.from_pretrained(directory)
    layers, heads, nope = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.qk_nope_head_dim
    rope, rank, experts = cfg.qk_rope_head_dim, cfg.kv_lora_rank, cfg.num_local_experts
    dense = cfg.mlp_layer_types.count("dense")
    w = gguf.GGUFWriter(path, "kimi-linear")
    w.add_block_count(layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(heads)
    w.add_head_count_kv([1 if t == "full_attention" else 0 for t in cfg.layer_types])
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_expert_count(experts)
    w.add_expert_used_count(cfg.num_experts_per_tok)
    w.add_expert_group_count(cfg.n_group)
    w.add_expert_group_used_count(cfg.topk_group)
    w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    w.add_vocab_size(cfg.vocab_size)
    w.add_ssm_conv_kernel(cfg.linear_conv_kernel_dim)
    w.add_kda_head_dim(cfg.linear_head_dim)
    if cfg.q_lora_rank:
        w.add_q_lora_rank(cfg.q_lora_rank)
    w.add_kv_lora_rank(rank)
    w.add_rope_dimension_count(rope)
    w.add_key_length(rank + rope)
    w.add_key_length_mla(nope + rope)
    w.add_value_length_mla(cfg.v_head_dim)
    w.add_expert_feed_forward_length(cfg.moe_intermediate_size)
    w.add_expert_shared_count(cfg.n_shared_experts)
    w.add_leading_dense_block_count(dense)
    w.add_expert_weights_scale(cfg.routed_scaling_factor)
    state = load_file(os.path.join(directory, "model.safetensors"))
    for i in range(dense, layers):
        for wid in ("w1", "w2", "w3"):
            stem = f"model.layers.{i}.block_sparse_moe.experts."
            w.add_tensor(_gguf_name(f"{stem}0.{wid}.weight", layers),
                         np.stack([state.pop(f"{stem}{e}.{wid}.weight") for e in range(experts)]))
    for name, data in state.items():
        if name.endswith(("q_conv1d.weight", "k_conv1d.weight", "v_conv1d.weight")):
            data = data.reshape(1, data.shape[0], 1, data.shape[-1])
        elif name.endswith(".A_log"):
            data = (-np.exp(data.astype(np.float64))).astype(np.float32)
        elif name.endswith("kv_b_proj.weight") and split_kv_b:
            blk = f"blk.{name.split('.')[2]}"
            k_b, v_b = deepseek_gguf.kv_b_halves(data, heads, nope)
            w.add_tensor(f"{blk}.attn_k_b.weight", k_b)
            w.add_tensor(f"{blk}.attn_v_b.weight", v_b)
            continue
        new = _gguf_name(name, layers)
        assert new is not None, name
        w.add_tensor(new, np.ascontiguousarray(data))
    gguf_checks.finish_gguf(w)


KEYS = ["attention.head_count_kv", "ssm.conv_kernel", "kda.head_dim", "attention.kv_lora_rank", "attention.key_length",
        "attention.key_length_mla", "attention.value_length_mla", "rope.dimension_count", "expert_count",
        "expert_used_count", "expert_gating_func", "expert_feed_forward_length", "expert_shared_count",
        "leading_dense_block_count", "expert_weights_scale", "feed_forward_length", "context_length", "vocab_size"]


def test_gguf_from_quantize_and_the_converter(case, tmp_path):
    """`attnzoo quantize` at F32 writes the converter's kimi-linear file tensor for tensor with the same keys; it,
    the converter's file and the older whole-attn_kv_b form load with transformers' logits (the layer kinds and
    logits of the directory), and the synthesized config keeps the layer pattern."""
    gguf = pytest.importorskip("gguf")
    kind, ref, m, ids, want = case
    if kind != "moe":
        pytest.skip("the KDA heads of dense_qlora differ from its attention heads: refused (test below)")
    ids, want = ids[:GGUF_LEN], want[:GGUF_LEN]
    ours, reader = gguf_checks.check_quantize_matches_converter(
        m.directory, _write_converter_gguf, "kimi-linear", KEYS + ["expert_group_count", "expert_group_used_count"],
        ids, want, VOCAB, tmp_path)
    assert ours.config["layer_types"] == ref.config.layer_types
    assert ours.config["architectures"] == ["KimiLinearForCausalLM"]
    gguf_checks.check_gguf_as_safetensors(str(tmp_path / "ours.gguf"), m.directory, ids)
    whole = str(tmp_path / "whole.gguf")
    _write_converter_gguf(m.directory, whole, split_kv_b=False)
    checks.check_full_prompt(Model.load(whole), ids, want, VOCAB)
    # `attnzoo inspect` of a directory holding the GGUF describes what the safetensors directory's describes
    import json
    import os
    import shutil
    import subprocess
    gguf_dir = tmp_path / "gguf_dir"
    gguf_dir.mkdir()
    shutil.copy(tmp_path / "ours.gguf", gguf_dir / "model.gguf")
    cli = os.environ.get("ATTNZOO_CLI", os.path.join(os.path.dirname(__file__), "..", "..", "build", "attnzoo"))
    got, expect = (json.loads(subprocess.run([cli, "inspect", str(d), "--json"], capture_output=True, text=True,
                                             timeout=120, check=True).stdout) for d in (gguf_dir, m.directory))
    for key in ("architecture", "num_layers", "parameter_count", "layers", "cache_bytes_per_token"):
        assert got[key] == expect[key], key


def test_gguf_q8_0_is_the_rounded_checkpoint(case, tmp_path):
    """Q8_0: projections and stacked experts as 8-bit blocks, attn_k_b and ssm_f_b (rows of 16: no whole block) as F16,
    conv kernels, A and the router F32; the file computes what the checkpoint rounded the same way computes."""
    import attnzoo
    import deepseek_gguf
    kind, ref, m, ids, want = case
    if kind != "moe":
        pytest.skip("refused (test below)")
    path = str(tmp_path / "q8.gguf")
    attnzoo.quantize(m.directory, path, type="Q8_0")
    cfg = ref.config

    def kv_b(name, value, types):
        if not name.endswith("kv_b_proj.weight"):
            return None
        blk = f"blk.{name.split('.')[2]}"
        k_b, v_b = deepseek_gguf.kv_b_halves(value, cfg.num_attention_heads, cfg.qk_nope_head_dim)
        k_b = gguf_checks.round_as(k_b, types[f"{blk}.attn_k_b.weight"])
        v_b = gguf_checks.round_as(v_b, types[f"{blk}.attn_v_b.weight"])
        return np.concatenate([k_b.transpose(0, 2, 1), v_b], axis=1).reshape(value.shape)

    types = gguf_checks.check_quantized_file_is_its_rounded_checkpoint(
        m.directory, path, lambda name: _gguf_name(name, cfg.num_hidden_layers), tmp_path, ids[:GGUF_LEN], kv_b)
    assert types["blk.1.ffn_gate_exps.weight"] == types["blk.0.ssm_f_a.weight"] == types["blk.2.attn_v_b.weight"] \
        == "Q8_0"
    assert types["blk.2.attn_k_b.weight"] == types["blk.0.ssm_f_b.weight"] == "F16"
    assert types["blk.0.ssm_conv1d_q.weight"] == types["blk.0.ssm_a"] == types["blk.1.ffn_gate_inp.weight"] == "F32"


def test_quantize_refuses_what_kimi_linear_cannot_hold(case, tmp_path):
    """llama.cpp's kimi-linear runs the KDA layers with the attention head count: dense_qlora's 2 KDA heads beside 4
    attention heads are refused by key, nothing written; so is a dense layer after an MoE one."""
    import attnzoo
    kind, ref, m, ids, want = case
    path = tmp_path / "x.gguf"
    directory = m.directory
    match = "linear_attn_config.num_heads"
    if kind == "moe":
        directory = edits.copy_with(m.directory, tmp_path / "late_dense", config_edit=lambda c: c.update(
            mlp_layer_types=["dense", "sparse", "sparse", "dense"]))
        match = "mlp_layer_types': dense layer 3"
    with pytest.raises(ValueError, match=match):
        attnzoo.quantize(directory, str(path), type="F32")
    assert not path.exists()


def test_gguf_q_lora_and_dense_layers(tmp_path):
    """q LoRA in the MLA layer (attention.q_lora_rank, attn_q_a / attn_q_b / attn_q_a_norm), the MLA layer first and
    every feed-forward dense (leading_dense_block_count = the layer count): quantize writes the converter's file,
    and both load with the directory's logits (this checkpoint's own distance to transformers, 1.05e-4 at one
    logit, is the directory load's: the standard tests above cover it)."""
    pytest.importorskip("gguf")
    _build("dense_qlora_gguf", tmp_path / "hf")
    ids = _prompt(GGUF_LEN)
    want = Model.load(tmp_path / "hf").forward(ids)
    assert want.std() > 0.1
    ours, reader = gguf_checks.check_quantize_matches_converter(
        tmp_path / "hf", _write_converter_gguf, "kimi-linear", KEYS + ["attention.q_lora_rank"], ids, want, VOCAB,
        tmp_path)
    assert reader.fields["kimi-linear.leading_dense_block_count"].contents() == 4
    assert "blk.0.attn_q_a.weight" in {t.name for t in reader.tensors}


def test_gguf_load_errors_name_the_tensor(case, tmp_path):
    """A short-conv kernel of another shape, an A that is not -exp(A_log) and an attn_k_b without its attn_v_b are
    refused naming the tensor."""
    gguf = pytest.importorskip("gguf")
    import attnzoo
    kind, ref, m, ids, want = case
    if kind != "moe":
        pytest.skip("one file is enough")
    src = str(tmp_path / "src.gguf")
    attnzoo.quantize(m.directory, src, type="F32")
    reader = gguf.GGUFReader(src)

    def edited(name, edit, match):
        path = str(tmp_path / f"{name}.gguf")
        w = gguf.GGUFWriter(path, "kimi-linear")
        for field in reader.fields.values():
            if field.name.startswith("kimi-linear."):
                w.add_key_value(field.name, field.contents(), field.types[0])
        for t in reader.tensors:
            data = np.asarray(t.data).reshape([int(d) for d in reversed(t.shape)])
            data = edit(data) if t.name == name else data
            if data is not None:
                w.add_tensor(t.name, np.ascontiguousarray(data))
        gguf_checks.finish_gguf(w)
        edits.expect_load_error(path, match)

    edited("blk.0.ssm_conv1d_q.weight", lambda d: d.reshape(d.shape[1], -1),
           r"tensor 'blk\.0\.ssm_conv1d_q\.weight': expected a \[1, channels, 1, kernel\]")
    edited("blk.1.ssm_a", lambda d: -d, r"tensor 'blk\.1\.ssm_a': value .* is not negative")
    edited("blk.2.attn_v_b.weight", lambda d: None, r"tensor 'blk\.2\.attn_k_b\.weight': its other half")
