"""gpt-oss with MXFP4 experts and from GGUF. A tiny random checkpoint (test_model_gpt_oss.py's gpt-oss-shaped one)
gets its experts written as the released checkpoints store them (`_blocks` / `_scales`: E2M1 codes two to a byte,
one E8M0 exponent per 32 values), quantized by the gguf package's MXFP4 quantizer and checked against transformers'
own dequantizer; attnzoo computes on the MXFP4 blocks, and its logits are compared with transformers loading the
same directory (it dequantizes on CPU). Then the GGUF llama.cpp's converter writes (architecture gpt-oss: sinks,
biased router, experts split into gate / up and stacked with their biases, MXFP4 experts kept as they are), written
here with the gguf package: at F32 from the dense checkpoint against transformers, with MXFP4 experts from the
MXFP4 one against attnzoo's load of that directory; and `attnzoo quantize` writing both files tensor for tensor."""
import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")

import checkpoint_edits as edits  # noqa: E402
import gguf_checks  # noqa: E402
import model_checks as checks  # noqa: E402
import test_model_gpt_oss as dense  # noqa: E402
from conftest import matmul_precision  # noqa: E402
from attnzoo.model import Model  # noqa: E402

MXFP4 = gguf.GGMLQuantizationType.MXFP4
KIND = "alternating_no_truncate"  # llama.cpp's layer pattern, its fixed SwiGLU clamp, YaRN without truncation
EXPERTS = ("gate_up_proj", "down_proj")


def _quantize(w):
    """[E, rows, cols] f32 -> the gguf package's MXFP4 blocks [E, rows, cols / 32, 17], the Hugging Face form
    (blocks [E, rows, cols / 32, 16], scales [E, rows, cols / 32]) and the values they hold."""
    e, rows, cols = w.shape
    blocks = gguf.quants.quantize(w.reshape(-1, cols), MXFP4).reshape(e, rows, cols // 32, 17)
    values = gguf.quants.dequantize(blocks.reshape(e * rows, -1), MXFP4).reshape(w.shape)
    # GGUF: byte j holds codes j (low nibble) and j + 16; Hugging Face: codes 2j (low) and 2j + 1
    codes = np.concatenate([blocks[..., 1:] & 0xF, blocks[..., 1:] >> 4], axis=-1)
    hf_blocks = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)
    return blocks, np.ascontiguousarray(hf_blocks), np.ascontiguousarray(blocks[..., 0]), values


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    from safetensors.numpy import load_file, save_file
    dense_dir, mx_dir = str(tmp_path_factory.mktemp("dense")), str(tmp_path_factory.mktemp("mxfp4"))
    ref = dense._build(KIND, dense_dir)
    ids = dense._prompt()
    state = load_file(os.path.join(dense_dir, "model.safetensors"))
    gguf_blocks, values = {}, {}
    for name in [n for n in state if n.endswith(EXPERTS)]:
        w = state.pop(name)  # x @ W layout: [E, in, out]; the blocks run along the input features
        gguf_blocks[name], state[name + "_blocks"], state[name + "_scales"], v = _quantize(
            np.ascontiguousarray(w.transpose(0, 2, 1)))
        values[name] = v.transpose(0, 2, 1)
    save_file(state, os.path.join(mx_dir, "model.safetensors"))
    with open(os.path.join(dense_dir, "config.json")) as f:
        cfg = json.load(f)
    cfg["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
    with open(os.path.join(mx_dir, "config.json"), "w") as f:
        json.dump(cfg, f)
    hf_mx = transformers.AutoModelForCausalLM.from_pretrained(mx_dir, dtype=torch.float32, attn_implementation="eager",
                                                              experts_implementation="eager")
    return dict(ref=ref, dense_dir=dense_dir, mx_dir=mx_dir, ids=ids, gguf_blocks=gguf_blocks, values=values,
                want=checks.meaningful_logits(ref, ids), want_mx=checks.meaningful_logits(hf_mx.eval(), ids),
                hf_mx=hf_mx)


def test_mxfp4_layout_is_transformers(case):
    """The Hugging Face blocks written here dequantize, by transformers' own converter, to exactly the values the
    gguf package's MXFP4 blocks hold; and transformers' load of the directory holds those values."""
    from safetensors.numpy import load_file
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors
    state = load_file(os.path.join(case["mx_dir"], "model.safetensors"))
    for name, values in case["values"].items():
        got = convert_moe_packed_tensors(torch.from_numpy(state[name + "_blocks"]),
                                         torch.from_numpy(state[name + "_scales"]), dtype=torch.float32)
        np.testing.assert_array_equal(got.numpy(), values, err_msg=name)
        np.testing.assert_array_equal(case["hf_mx"].get_parameter(name).detach().numpy(), values, err_msg=name)
    # The quantization really moved the experts: the dense checkpoint's logits are not the MXFP4 one's.
    assert np.abs(case["want"] - case["want_mx"]).max() > 1e-2


def test_mxfp4_experts_match_transformers(case):
    """Computed on as MXFP4 (held as the repacked blocks, not dequantized at load): f32 products equal transformers
    on the dequantized weights within 1e-4 (whole prompt, decode token by token); the default 8-bit products
    within the quantized models' 3% relative error."""
    ids, want = case["ids"], case["want_mx"]
    with matmul_precision("highest"):  # f32 products and, chosen at load, an f32 cache
        m = Model.load(case["mx_dir"], block_size=4)
        checks.check_full_prompt(m, ids, want, dense.VOCAB)
        checks.check_token_by_token_decode(m, ids, want, prefill=25, stop=len(ids))
    cfg = case["ref"].config
    info = m.inspect()
    per_expert = 3 * cfg.intermediate_size * cfg.hidden_size // 32 * 17  # gate, up, down in 17-byte blocks
    assert info["owned_weight_bytes"] == cfg.num_hidden_layers * cfg.num_local_experts * per_expert
    assert info["parameter_count"] == sum(p.numel() for p in case["ref"].parameters())
    m = Model.load(case["mx_dir"])
    assert m.formats["decode_activations"] == "int8" and m.formats["kv_cache_dtype"] == "bfloat16", m.formats
    got = m.forward(ids)
    rel = np.sqrt(((got - want) ** 2).sum() / (want ** 2).sum())
    assert 0 < rel <= 3e-2, rel


def _write_gguf(case, path, mxfp4, skip=()):
    """convert_hf_to_gguf.py's GptOssModel file for the checkpoint: gpt-oss keys, tensors under the gguf package's
    names (sinks + '.weight'), experts split into gate (even rows of gate_up) and up (odd rows), stacked
    [n_expert, rows, cols] with biases [n_expert, rows]; `mxfp4`: the experts' MXFP4 blocks as raw MXFP4 tensors,
    else the dense experts in F32; the tensors named in `skip` left out."""
    from safetensors.numpy import load_file
    cfg = case["ref"].config
    rope = cfg.rope_parameters
    w = gguf.GGUFWriter(path, "gpt-oss")
    gguf_checks.add_converter_attention_keys(w, cfg.to_dict(), cfg.num_hidden_layers)
    w.add_expert_count(cfg.num_local_experts)
    w.add_expert_used_count(cfg.num_experts_per_tok)
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(rope["factor"])
    w.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
    w.add_rope_scaling_yarn_beta_fast(rope["beta_fast"])
    w.add_rope_scaling_yarn_beta_slow(rope["beta_slow"])
    w.add_sliding_window(cfg.sliding_window)
    w.add_expert_feed_forward_length(cfg.intermediate_size)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.GPT_OSS, cfg.num_hidden_layers)
    add_tensor = w.add_tensor
    w.add_tensor = lambda name, *args, **kwargs: None if name in skip else add_tensor(name, *args, **kwargs)
    state = load_file(os.path.join(case["dense_dir"], "model.safetensors"))
    for name, data in state.items():
        blk = name.split(".mlp.experts.")[0].replace("model.layers.", "blk.")
        if name.endswith("gate_up_proj_bias"):
            w.add_tensor(f"{blk}.ffn_gate_exps.bias", np.ascontiguousarray(data[:, 0::2]))
            w.add_tensor(f"{blk}.ffn_up_exps.bias", np.ascontiguousarray(data[:, 1::2]))
        elif name.endswith("down_proj_bias"):
            w.add_tensor(f"{blk}.ffn_down_exps.bias", data)
        elif name.endswith(EXPERTS) and mxfp4:
            q = case["gguf_blocks"][name]  # [E, out, in / 32, 17]
            q = q.reshape(q.shape[0], q.shape[1], -1)
            if name.endswith("gate_up_proj"):
                w.add_tensor(f"{blk}.ffn_gate_exps.weight", np.ascontiguousarray(q[:, 0::2]), raw_dtype=MXFP4)
                w.add_tensor(f"{blk}.ffn_up_exps.weight", np.ascontiguousarray(q[:, 1::2]), raw_dtype=MXFP4)
            else:
                w.add_tensor(f"{blk}.ffn_down_exps.weight", q, raw_dtype=MXFP4)
        elif name.endswith("gate_up_proj"):
            t = data.transpose(0, 2, 1)
            w.add_tensor(f"{blk}.ffn_gate_exps.weight", np.ascontiguousarray(t[:, 0::2]))
            w.add_tensor(f"{blk}.ffn_up_exps.weight", np.ascontiguousarray(t[:, 1::2]))
        elif name.endswith("down_proj"):
            w.add_tensor(f"{blk}.ffn_down_exps.weight", np.ascontiguousarray(data.transpose(0, 2, 1)))
        else:
            new = names.get_name(name, try_suffixes=(".weight", ".bias"))
            assert new is not None, name
            w.add_tensor(new + (".weight" if name.endswith("sinks") else ""), np.ascontiguousarray(data))
    gguf_checks.finish_gguf(w)


def test_gguf_at_f32_matches_transformers(case, tmp_path):
    path = str(tmp_path / "gpt-oss-f32.gguf")
    _write_gguf(case, path, mxfp4=False)
    gguf_checks.check_gguf_logits(path, case["ids"], case["want"], dense.VOCAB, prefill=25)
    cfg = gguf_checks.check_synthesized_config(path, case["ref"].config, [
        "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
        "intermediate_size", "num_local_experts", "num_experts_per_tok", "sliding_window", "layer_types"])
    assert cfg["rope_scaling"]["truncate"] is False and cfg["rope_scaling"]["beta_fast"] == 32
    assert [x["window"] for x in Model.load(path).inspect()["layers"]] == [8, 0, 8, 0]


def test_gguf_with_mxfp4_experts_equals_the_mxfp4_checkpoint(case, tmp_path):
    """The converter's MXFP4 file and the MXFP4 directory compute on the same blocks: the same logits."""
    path = str(tmp_path / "gpt-oss-mxfp4.gguf")
    _write_gguf(case, path, mxfp4=True)
    g, h = Model.load(path), Model.load(case["mx_dir"])
    cfg = case["ref"].config
    assert f"MXFP4 x{3 * cfg.num_hidden_layers * cfg.num_local_experts}" in g.inspect()["checkpoint_dtype"]
    assert g.formats["checkpoint"] == "GGUF, mostly MXFP4" and g.formats["kv_cache_dtype"] == "bfloat16"
    for precision in ("highest", "auto"):
        with matmul_precision(precision):
            np.testing.assert_allclose(g.forward(case["ids"]), h.forward(case["ids"]), atol=1e-5, rtol=0)


def test_bad_mxfp4_and_gguf_experts_are_named(case, tmp_path):
    x = "model.layers.1.mlp.experts.gate_up_proj"

    def as_float(t):  # codes stored as another dtype
        t[x + "_blocks"] = t[x + "_blocks"].astype(np.float32)
    edits.expect_load_error(edits.copy_with(case["mx_dir"], tmp_path / "f32", tensors_edit=as_float),
                            x.replace(".", r"\.") + "_blocks.*U8")

    def short(t):  # one 32-value block too few per row
        t[x + "_scales"] = np.ascontiguousarray(t[x + "_scales"][..., :-1])
    edits.expect_load_error(edits.copy_with(case["mx_dir"], tmp_path / "short", tensors_edit=short),
                            x.replace(".", r"\.") + "_scales")
    path = str(tmp_path / "nobias.gguf")
    _write_gguf(case, path, mxfp4=True, skip=("blk.2.ffn_up_exps.bias",))
    edits.expect_load_error(path, r"model\.layers\.2\.mlp\.experts\.0\.up_proj\.bias")


@pytest.mark.parametrize("source", ["dense", "mxfp4"])
def test_quantize_writes_the_converters_file(case, tmp_path, source):
    """`attnzoo quantize` at F32: the converter's tensors value for value (MXFP4 experts kept byte for byte) and the
    same keys the loader reads."""
    import attnzoo
    ours, theirs = str(tmp_path / "q.gguf"), str(tmp_path / "w.gguf")
    attnzoo.quantize(case[f"{source}_dir" if source == "dense" else "mx_dir"], ours, type="F32")
    _write_gguf(case, theirs, mxfp4=source == "mxfp4")
    got, expect = gguf.GGUFReader(ours), gguf.GGUFReader(theirs)
    tensors = {t.name: t for t in got.tensors}
    assert set(tensors) == {t.name for t in expect.tensors}
    for t in expect.tensors:
        assert tensors[t.name].tensor_type == t.tensor_type, t.name
        np.testing.assert_array_equal(np.asarray(tensors[t.name].data), np.asarray(t.data), err_msg=t.name)
    for key in [k for k in expect.fields if k.startswith("gpt-oss.")]:
        assert key in got.fields, key
        assert got.fields[key].contents() == pytest.approx(expect.fields[key].contents()), key
    assert Model.load(ours).config == Model.load(theirs).config


def test_quantize_at_q8_0(case, tmp_path):
    """At Q8_0 the dense experts become Q8_0 blocks equal to the gguf package's of the split, transposed rows; the
    MXFP4 checkpoint's experts stay MXFP4 (as the converter keeps them) while its other matrices take Q8_0."""
    import attnzoo
    from safetensors.numpy import load_file
    q8 = gguf.GGMLQuantizationType.Q8_0
    dense_q, mx_q = str(tmp_path / "dense.gguf"), str(tmp_path / "mx.gguf")
    attnzoo.quantize(case["dense_dir"], dense_q, type="Q8_0")
    attnzoo.quantize(case["mx_dir"], mx_q, type="Q8_0")
    got = {t.name: t for t in gguf.GGUFReader(dense_q).tensors}
    gate_up = load_file(os.path.join(case["dense_dir"], "model.safetensors"))["model.layers.1.mlp.experts.gate_up_proj"]
    gate = np.ascontiguousarray(gate_up.transpose(0, 2, 1)[:, 0::2])
    t = got["blk.1.ffn_gate_exps.weight"]
    assert t.tensor_type == q8
    np.testing.assert_array_equal(np.asarray(t.data).reshape(-1), gguf.quants.quantize(gate, q8).reshape(-1))
    mx = {t.name: t.tensor_type for t in gguf.GGUFReader(mx_q).tensors}
    assert mx["blk.1.ffn_up_exps.weight"] == MXFP4 and mx["blk.1.attn_q.weight"] == q8
    want = case["want_mx"]
    m = Model.load(mx_q)
    # The prompt on the bf16 panels, then on the 8-bit integer rows (what "auto" takes on VNNI CPUs without AMX):
    # those round every activation to 8 bits, and gpt-oss's attention sinks and clamped SwiGLU pass that on (0.047
    # measured on Zen 4, against 0.02 on the panels)
    saved = attnzoo._core.linear_prompt_int8()
    try:
        for route, bound in (("off", 3e-2), ("on", 6e-2)):
            attnzoo._core.set_linear_prompt_int8(route)
            rel = np.sqrt(((m.forward(case["ids"]) - want) ** 2).sum() / (want ** 2).sum())
            assert rel <= bound, (route, rel)
    finally:
        attnzoo._core.set_linear_prompt_int8(saved)
