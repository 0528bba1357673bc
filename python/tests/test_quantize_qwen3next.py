"""attnzoo quantize on Qwen3-Next (qwen3next GGUF) against test_gguf_hybrids' re-implementation of llama.cpp's
converter (convert_hf_to_gguf.py's Qwen3NextModel: norms as 1 + w, A = -exp(A_log), squeezed conv kernel,
in_proj_qkvz split into attn_qkv / attn_gate, experts stacked, routers and kernels in F32), written with the gguf
package from the same tiny transformers model: the same tensors (names, shapes, values), the same qwen3next.*
metadata; and attnzoo's Model on our file computing what it computes on the safetensors checkpoint. Bad input
(no experts, an irregular layer pattern, unnormalized top-k weights: nothing a qwen3next GGUF can hold) is refused
by key."""
import os
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")

import model_checks as checks  # noqa: E402
import test_gguf_hybrids as hybrids  # noqa: E402
from attnzoo.model import Model  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.environ.get("ATTNZOO_CLI", os.path.join(ROOT, "build", "attnzoo"))
# The converter's always-F32 tensors (besides norms and vectors), by name ending.
F32_TENSORS = ("ssm_conv1d.weight", "ssm_a", "ffn_gate_inp.weight", "ffn_gate_inp_shexp.weight")


def _quantize(directory, out, qtype):
    r = subprocess.run([CLI, "quantize", "-m", directory, "-o", out, "--type", qtype], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="module")
def moe(tmp_path_factory):
    """The reference file (f32) and the checkpoint it was written from."""
    directory = str(tmp_path_factory.mktemp("qwen3next"))
    model, ref_path = hybrids._build("qwen3next", "f32", directory)
    return directory, model, ref_path


def _tensors(path):
    return {t.name: t for t in gguf.GGUFReader(path).tensors}


def _fields(path, prefix):
    out = {}
    for name, f in gguf.GGUFReader(path).fields.items():
        if name.startswith(prefix):
            out[name] = [f.parts[i].tolist() for i in f.data]
    return out


def test_f32_file_is_the_converters(moe, tmp_path):
    directory, _, ref_path = moe
    ours = _quantize(os.path.join(directory, "hf"), str(tmp_path / "ours.gguf"), "F32")
    got, want = _tensors(ours), _tensors(ref_path)
    assert sorted(got) == sorted(want)
    for name, w in want.items():
        g = got[name]
        assert g.tensor_type == gguf.GGMLQuantizationType.F32, name
        # the reference keeps A as [heads, 1] (Mamba-2's layout); llama.cpp's qwen3next reads [heads]
        assert [d for d in g.shape.tolist() if d != 1] == [d for d in w.shape.tolist() if d != 1], name
        if name.endswith("ssm_a"):  # -exp in f64 (the reference) or f32 (ours)
            np.testing.assert_allclose(g.data.ravel(), w.data.ravel(), rtol=1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(g.data.ravel(), w.data.ravel(), err_msg=name)
    got_meta, want_meta = _fields(ours, "qwen3next."), _fields(ref_path, "qwen3next.")
    for key, value in want_meta.items():
        assert got_meta.get(key) == value, key


def test_bf16_types_and_logits(moe, tmp_path):
    """BF16: the matrices rounded to bf16, the rest F32; attnzoo computes on it what it computes on a checkpoint
    holding the same roundings (torch's bf16 rounding, the reference)."""
    directory, model, _ = moe
    path = _quantize(os.path.join(directory, "hf"), str(tmp_path / "bf16.gguf"), "BF16")
    for name, t in _tensors(path).items():
        plain = len(t.shape) == 1 or name.endswith("norm.weight") or name.endswith(F32_TENSORS)
        want = gguf.GGMLQuantizationType.F32 if plain else gguf.GGMLQuantizationType.BF16
        assert t.tensor_type == want, name
    rounded = checks.random_model("qwen3next", hybrids._config("qwen3next"), lambda m: None)
    rounded.load_state_dict(model.state_dict())
    with torch.no_grad():
        for name, p in rounded.named_parameters():
            if p.ndim >= 2 and not name.endswith(("conv1d.weight", "mlp.gate.weight", "shared_expert_gate.weight")):
                p.copy_(p.to(torch.bfloat16).float())
    rounded.save_pretrained(str(tmp_path / "rounded"), safe_serialization=True)
    ids = checks.prompt(hybrids.VOCAB, 24)
    # dtype float32: the same f32 arithmetic on both (the default "auto" gives a BF16 file bf16 products and cache)
    np.testing.assert_allclose(Model.load(path, dtype="float32").forward(ids),
                               Model.load(str(tmp_path / "rounded")).forward(ids), atol=checks.ATOL, rtol=0)


def test_same_model_as_the_safetensors_checkpoint(moe, tmp_path):
    directory, _, _ = moe
    hf = os.path.join(directory, "hf")
    path = _quantize(hf, str(tmp_path / "f32.gguf"), "F32")
    ids = checks.prompt(hybrids.VOCAB, 40)
    np.testing.assert_allclose(Model.load(path).forward(ids), Model.load(hf).forward(ids), atol=checks.ATOL, rtol=0)


def _dense(cfg):
    cfg.num_experts, cfg.mlp_only_layers = 0, list(range(cfg.num_hidden_layers))


def _irregular(cfg):
    cfg.layer_types = ["linear_attention", "full_attention", "full_attention", "linear_attention"]


def _unnormalized(cfg):
    cfg.norm_topk_prob = False


@pytest.mark.parametrize("edit,key", [(_dense, "num_experts"), (_irregular, "layer_types"),
                                      (_unnormalized, "norm_topk_prob")], ids=["dense", "irregular", "topk"])
def test_what_gguf_cannot_hold_is_refused_by_key(edit, key, tmp_path):
    cfg = hybrids._config("qwen3next")
    edit(cfg)
    model = checks.random_model("qwen3next-" + key, cfg, hybrids._randomize)
    hf = str(tmp_path / "hf")
    model.save_pretrained(hf, safe_serialization=True)
    out = str(tmp_path / "x.gguf")
    r = subprocess.run([CLI, "quantize", "-m", hf, "-o", out, "--type", "F32"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode != 0 and key in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not os.path.exists(out)
