"""attnzoo quantize on Qwen3.5 / Qwen3.5-MoE (qwen35 / qwen35moe GGUF) against test_gguf_qwen35's restatement of
llama.cpp's converter (convert_hf_to_gguf.py's Qwen3_5TextModel / Qwen3_5MoeTextModel: norms as 1 + w,
A = -exp(A_log), dt_bias as ssm_dt.bias, squeezed conv kernels, the fused experts split and stacked, and the
linear-attention value heads reordered from grouped by key head to tiled over the key heads), written with the gguf
package from the same tiny transformers model with 3 value heads per key head, so the reordering is not the
identity: in F32 the same tensors (names, shapes, values) and the same <arch>.* metadata, and logits equal to
transformers'; in Q8_0 (written through the Python API) every block equal to the gguf package's quantization of
the reordered reference tensor — the heads moved before quantizing — and logits close to transformers'."""
import copy
import os
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")

import attnzoo  # noqa: E402
import checkpoint_edits as edits  # noqa: E402
import gguf_checks  # noqa: E402
import model_checks as checks  # noqa: E402
import test_gguf_qwen35 as qwen35  # noqa: E402
from attnzoo.model import Model  # noqa: E402
from test_quantize_qwen3next import CLI, _fields, _quantize, _tensors  # noqa: E402

Q8_0 = gguf.GGMLQuantizationType.Q8_0
# The linear-attention tensors whose value heads move, as GGUF names end.
# Quantized files against f32 references at 1e-4: f32 products in every projection (conftest.py); the
# default "auto" is covered by test_gguf_auto_precision.py.
MATMUL_PRECISION = "highest"
REORDERED = ("attn_qkv.weight", "attn_gate.weight", "ssm_beta.weight", "ssm_alpha.weight", "ssm_a",
             "ssm_dt.bias", "ssm_conv1d.weight", "ssm_out.weight")


@pytest.fixture(scope="module", params=["dense", "moe"])
def case(request, tmp_path_factory):
    """The reference file (f32), the checkpoint it was written from and the prompt's reference logits."""
    kind = request.param
    directory = str(tmp_path_factory.mktemp(f"quantize-{kind}"))
    model, ref_path = qwen35._build(kind, "f32", directory)
    ids = checks.prompt(qwen35.VOCAB, qwen35.PROMPT_LEN)
    return kind, os.path.join(directory, "hf"), ref_path, ids, checks.meaningful_logits(model, ids), model


def _fused_expert(hf_name):
    """transformers' fused expert parameter that a saved per-expert tensor (the stack's first) comes from."""
    if ".mlp.experts." not in hf_name:
        return hf_name
    stem, _, rest = hf_name.partition(".mlp.experts.")
    return stem + ".mlp.experts." + ("down_proj" if rest.endswith("down_proj.weight") else "gate_up_proj")


def test_f32_file_is_the_converters(case, tmp_path):
    kind, hf, ref_path, _, _, _ = case
    ours = _quantize(hf, str(tmp_path / "ours.gguf"), "F32")
    got, want = _tensors(ours), _tensors(ref_path)
    assert sorted(got) == sorted(want)
    assert sum(name.endswith(REORDERED) for name in want) >= 8
    for name, w in want.items():
        g = got[name]
        assert g.tensor_type == gguf.GGMLQuantizationType.F32, name
        assert g.shape.tolist() == w.shape.tolist(), name
        if name.endswith("ssm_a"):  # -exp in f64 (the reference) or f32 (ours)
            np.testing.assert_allclose(g.data.ravel(), w.data.ravel(), rtol=1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(g.data.ravel(), w.data.ravel(), err_msg=name)
    arch = qwen35._arch(kind)
    assert _fields(ours, arch + ".") == _fields(ref_path, arch + ".")
    assert _fields(ours, "general.architecture")["general.architecture"] == [list(arch.encode())]


def test_f32_logits_match_transformers(case, tmp_path):
    kind, hf, _, ids, want, _ = case
    path = _quantize(hf, str(tmp_path / "f32.gguf"), "F32")
    gguf_checks.check_gguf_logits(path, ids, want, qwen35.VOCAB, prefill=30)


def test_q8_0_blocks_and_logits(case, tmp_path):
    """Each Q8_0 tensor holds the gguf package's blocks of the reference's reordered f32 tensor (quantizing before
    the column move of ssm_out would give the same blocks only by the block alignment; rows of attn_qkv / attn_gate
    / ssm_beta / ssm_alpha are quantized after their move here)."""
    kind, hf, ref_path, ids, _, model = case
    path = str(tmp_path / "q8_0.gguf")
    summary = attnzoo.quantize(hf, path, type="Q8_0")
    assert summary["architecture"] == qwen35._arch(kind)
    got, ref = _tensors(path), _tensors(ref_path)
    assert sorted(got) == sorted(ref)
    quantized = set()
    for name, w in ref.items():
        g = got[name]
        if g.tensor_type == Q8_0:
            blocks = gguf.quants.quantize(np.ascontiguousarray(w.data, dtype=np.float32), Q8_0)
            np.testing.assert_array_equal(np.asarray(g.data).ravel(), blocks.ravel(), err_msg=name)
            quantized.add(name)
        elif g.tensor_type == gguf.GGMLQuantizationType.F16:
            np.testing.assert_array_equal(g.data.ravel(), w.data.astype(np.float16).ravel(), err_msg=name)
        else:
            assert g.tensor_type == gguf.GGMLQuantizationType.F32, name
            np.testing.assert_allclose(g.data.ravel(), w.data.ravel(), rtol=1e-6, atol=0, err_msg=name)
    for end in ("attn_qkv.weight", "attn_gate.weight", "ssm_beta.weight", "ssm_out.weight"):
        assert any(n.endswith(end) for n in quantized), end
    if kind == "moe":
        assert any(n.endswith("ffn_gate_exps.weight") for n in quantized)
    # transformers on the checkpoint's weights rounded as the summary says each was stored (Q8_0 blocks and F16
    # rounding are per row of whole blocks, so Hugging Face order gives the values the reordered file holds)
    rounded = copy.deepcopy(model)
    params = dict(rounded.named_parameters())
    with torch.no_grad():
        for t in summary["tensors"]:
            p = params[_fused_expert(t["hf_name"])]
            if t["type"] == "Q8_0":
                x = p.float().numpy()
                p.copy_(torch.from_numpy(gguf.quants.dequantize(gguf.quants.quantize(x, Q8_0), Q8_0).reshape(x.shape)))
            elif t["type"] == "F16":
                p.copy_(p.half().float())
    want = checks.meaningful_logits(rounded, ids)
    np.testing.assert_allclose(Model.load(path).forward(ids), want, atol=checks.ATOL, rtol=0)


def _hub_form(tensors):
    """The experts fused as transformers holds them (gate_up_proj [experts, 2 * moe_intermediate, hidden], down_proj
    [experts, hidden, moe_intermediate]) and a multi-token-prediction tensor beside the text model's."""
    layers = sorted({n.split(".")[2] for n in tensors if ".mlp.experts." in n}, key=int)
    for layer in layers:
        stem = f"model.layers.{layer}.mlp.experts."
        experts = len({n for n in tensors if n.startswith(stem) and n.endswith("down_proj.weight")})
        pop = [[tensors.pop(f"{stem}{e}.{p}_proj.weight") for e in range(experts)] for p in ("gate", "up", "down")]
        tensors[stem + "gate_up_proj"] = np.stack([np.concatenate([g, u]) for g, u in zip(pop[0], pop[1])])
        tensors[stem + "down_proj"] = np.stack(pop[2])
    tensors["mtp.fc.weight"] = np.ones((8, 8), np.float32)


def test_fused_experts_and_mtp_tensors(case, tmp_path):
    """A checkpoint holding the fused experts (MoE) and mtp.* tensors: the same file (the fused stacks split into
    ffn_gate_exps / ffn_up_exps, the prediction tensors left out)."""
    kind, hf, ref_path, _, _, _ = case
    hub = edits.copy_with(hf, str(tmp_path / "hub"), tensors_edit=_hub_form)
    got, want = _tensors(_quantize(hub, str(tmp_path / "hub.gguf"), "F32")), _tensors(ref_path)
    assert sorted(got) == sorted(want)
    for name, w in want.items():
        np.testing.assert_allclose(got[name].data.ravel(), w.data.ravel(), rtol=1e-6, atol=0, err_msg=name)


def test_head_counts_the_tensors_contradict_are_named(case, tmp_path):
    """linear_num_value_heads 4 where the tensors hold 6: refused, naming the first tensor the tiling misses."""
    kind, hf, _, _, _, _ = case
    bad = edits.copy_with(hf, str(tmp_path / "bad"), config_edit=lambda c: c.update(linear_num_value_heads=4))
    out = str(tmp_path / "x.gguf")
    r = subprocess.run([CLI, "quantize", "-m", bad, "-o", out, "--type", "Q8_0"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "tensor 'model.layers." in r.stderr and "value heads" in r.stderr, r.stderr
    assert not os.path.exists(out)


def _wrapper_config(cfg):
    """The multimodal wrapper's config.json: the text model's settings under text_config, a vision_config beside."""
    text = dict(cfg)
    text.pop("architectures", None)
    moe = "num_experts" in text
    cfg.clear()
    cfg.update(architectures=["Qwen3_5MoeForConditionalGeneration" if moe else "Qwen3_5ForConditionalGeneration"],
               model_type="qwen3_5_moe" if moe else "qwen3_5", text_config=text,
               vision_config={"depth": 1, "hidden_size": 8, "num_heads": 2, "out_hidden_size": text["hidden_size"]},
               tie_word_embeddings=text.get("tie_word_embeddings", False))


def _wrapper_tensors(tensors):
    """transformers' wrapper layout: model.language_model.* (lm_head.* as it is) and a vision tower beside."""
    for name in [n for n in tensors if n.startswith("model.")]:
        tensors["model.language_model." + name[len("model."):]] = tensors.pop(name)
    tensors["model.visual.patch_embed.proj.weight"] = np.ones((8, 3, 2, 2, 2), np.float32)
    tensors["model.visual.blocks.0.attn.qkv.weight"] = np.ones((24, 8), np.float32)


def test_conditional_generation_wrapper_writes_the_text_models_file(case, tmp_path):
    """Qwen3_5(Moe)ForConditionalGeneration: hyper-parameters from text_config, model.language_model.* as model.*,
    the vision tower left out: the same tensors (names, types, bytes) and <arch>.* metadata as the text class's."""
    kind, hf, _, _, _, _ = case
    wrapped = edits.copy_with(hf, str(tmp_path / "wrapped"), config_edit=_wrapper_config,
                              tensors_edit=_wrapper_tensors)
    out = str(tmp_path / "wrapped.gguf")
    r = subprocess.run([CLI, "quantize", "-m", wrapped, "-o", out, "--type", "F32"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert "2 tensors outside the language model left out" in r.stdout, r.stdout
    text = _quantize(hf, str(tmp_path / "text.gguf"), "F32")
    got, want = _tensors(out), _tensors(text)
    assert sorted(got) == sorted(want) and not any("visual" in n or n.startswith("v.") for n in got)
    for name, w in want.items():
        g = got[name]
        assert g.tensor_type == w.tensor_type and g.shape.tolist() == w.shape.tolist(), name
        assert np.asarray(g.data).tobytes() == np.asarray(w.data).tobytes(), name
    arch = qwen35._arch(kind)
    assert _fields(out, arch + ".") == _fields(text, arch + ".")
    assert _fields(out, "general.architecture") == _fields(text, "general.architecture")


def test_wrapper_without_text_config_is_named(case, tmp_path):
    kind, hf, _, _, _, _ = case
    arch = "Qwen3_5MoeForConditionalGeneration" if kind == "moe" else "Qwen3_5ForConditionalGeneration"
    bad = edits.copy_with(hf, str(tmp_path / "bad"), config_edit=lambda c: c.update(architectures=[arch]),
                          tensors_edit=_wrapper_tensors)
    out = str(tmp_path / "x.gguf")
    r = subprocess.run([CLI, "quantize", "-m", bad, "-o", out, "--type", "F32"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode != 0 and arch + " needs a text_config" in r.stderr, r.stderr
    assert not os.path.exists(out)


def test_llama_quantize_q4_k_m_file_loads(case, tmp_path):
    """llama-quantize's own Q4_K_M of the converter's file: attn_qkv raised (an attn_v) above attn_gate, and the
    MoE's ffn_gate_inp_shexp written 1-D (ggml drops trailing 1s); it loads and its logits stay near the f32
    model's (test_quantize_mixtures.py's bound for the Qwen3-Next hybrid)."""
    import glob
    cache = os.environ.get("ATTNZOO_LLAMA_CACHE", os.path.expanduser("~/.cache/attnzoo/llama.cpp"))
    tool = sorted(glob.glob(os.path.join(cache, "build-*", "bin", "llama-quantize")))
    if not tool:
        pytest.skip(f"llama-quantize not built under {cache}/build-*/bin (scripts/build_llama_bench.sh builds it)")
    kind, _, ref_path, ids, want, _ = case
    out = str(tmp_path / "q4_k_m.gguf")
    r = subprocess.run([tool[-1], ref_path, out, "Q4_K_M", "2"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    got = _tensors(out)
    assert any(t.tensor_type != got[n.replace("attn_qkv", "attn_gate")].tensor_type
               for n, t in got.items() if n.endswith("attn_qkv.weight"))
    if kind == "moe":
        shexp = [t for n, t in got.items() if n.endswith("ffn_gate_inp_shexp.weight")]
        assert shexp and all(len(t.shape) == 1 for t in shexp)
    err = np.sqrt(np.mean((Model.load(out).forward(ids) - want) ** 2)) / want.std()
    assert err < 1.0, err  # measured 0.45 (dense), 0.34 (moe)
