"""scripts/make_bench_gguf.py (the quantized rows of the README's bench model table): a tiny Qwen3 written in
each format reads back with the gguf package in that format, and attnzoo runs it like the transformers model it
came from (bf16: the weights rounded to bf16; quantized: within their rounding of the bf16 logits); the IQ4
quantizer it carries (gguf-py has none) decodes near its input."""
import importlib.util
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
gguf = pytest.importorskip("gguf")

from attnzoo.model import Model  # noqa: E402

_SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "make_bench_gguf.py")
_spec = importlib.util.spec_from_file_location("make_bench_gguf", _SCRIPT)
make_bench_gguf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_bench_gguf)

IDS = np.arange(3, 30, dtype=np.int32)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bench_gguf")
    out = {}
    for t in make_bench_gguf.TYPES:
        path = str(d / f"qwen3-{t}.gguf")
        out[t] = (path, make_bench_gguf.write(path, t, seed=1, tiny=True))
    return out


@pytest.mark.parametrize("ftype", make_bench_gguf.TYPES)
def test_every_matrix_in_the_format(files, ftype):
    reader = gguf.GGUFReader(files[ftype][0])
    want = {"q4_0": "Q4_0", "q4_k": "Q4_K", "q5_k": "Q5_K", "q6_k": "Q6_K", "q8_0": "Q8_0", "iq4_nl": "IQ4_NL",
            "iq4_xs": "IQ4_XS", "bf16": "BF16"}[ftype]
    kinds = {t.name: t.tensor_type.name for t in reader.tensors}
    assert kinds["token_embd.weight"] == want
    assert all(v == want for k, v in kinds.items() if not k.endswith("norm.weight")), kinds
    assert all(v == "F32" for k, v in kinds.items() if k.endswith("norm.weight"))


def test_the_tokenizer_has_the_merges_llama_cpp_requires(files):
    """llama.cpp refuses a gpt2 tokenizer without tokenizer.ggml.merges (`bench model --llama-bench`)."""
    reader = gguf.GGUFReader(files["q4_0"][0])
    assert str(bytes(reader.fields["tokenizer.ggml.model"].parts[-1]), "utf-8") == "gpt2"
    merges = reader.fields.get("tokenizer.ggml.merges")
    assert merges is not None and len(merges.data) >= 1


def test_bf16_file_runs_like_transformers(files):
    path, model = files["bf16"]
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).float())
        want = model(torch.from_numpy(IDS.astype(np.int64))[None]).logits[0].numpy()
    got = np.asarray(Model.load(path, dtype="float32").forward(IDS))  # f32 arithmetic, as the reference's
    assert np.abs(got - want).max() <= 2e-3 * np.abs(want).max()


@pytest.mark.parametrize("ftype,tol", [("q8_0", 0.05), ("q4_0", 0.5), ("iq4_nl", 0.5), ("iq4_xs", 0.5)])
def test_quantized_files_near_bf16(files, ftype, tol):
    ref = np.asarray(Model.load(files["bf16"][0]).forward(IDS))
    got = np.asarray(Model.load(files[ftype][0]).forward(IDS))
    assert np.linalg.norm(got - ref) <= tol * np.linalg.norm(ref)


@pytest.mark.parametrize("ftype", ["iq4_nl", "iq4_xs"])
def test_iq4_file_is_named_and_computed_on_as_blocks(files, ftype):
    """inspect and Model.formats name the i-quant, and the model computes on the blocks (8-bit activations in decode
    under the default "auto", as for the other block formats) rather than refusing or widening them."""
    m = Model.load(files[ftype][0])
    name = ftype.upper()
    assert m.formats["checkpoint"] == f"GGUF, mostly {name}"
    assert m.formats["weights_reason"].startswith("block-quantized") and m.formats["decode_activations"] == "int8"
    assert f"{name} x15" in m.inspect()["checkpoint_dtype"]  # 7 matrices in each of 2 layers and the embedding


@pytest.mark.parametrize("xs", [False, True], ids=["iq4_nl", "iq4_xs"])
def test_iq4_quantizer_round_trips(xs):
    """quantize_iq4's blocks decode (gguf-py) to within the grid's rounding of the values: each 32 scaled so that
    its largest magnitude lands on the grid's -127, every value within the widest rounding step (a value of the
    other sign at 127, whose nearest grid value is 113: 14 / 127 of the largest); IQ4_XS's 6-bit sub-block scale is
    off by up to half a step of d (1 / 64 of the 256 values' largest) on top. An all-zero block stays zero."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((6, 512)).astype(np.float32)
    x[0, :256] = 0
    q = gguf.GGMLQuantizationType.IQ4_XS if xs else gguf.GGMLQuantizationType.IQ4_NL
    blocks = make_bench_gguf.quantize_iq4(x, xs)
    assert blocks.shape == (6, 512 // 256 * 136 if xs else 512 // 32 * 18)
    y = gguf.quants.dequantize(blocks, q).reshape(x.shape)
    assert np.all(y[0, :256] == 0)
    err = np.abs(y - x).reshape(6, -1, 8, 32)
    amax = np.abs(x).reshape(6, -1, 8, 32).max(-1, keepdims=True)
    bound = amax * (14 / 127) * 1.002 + (amax.max(-2, keepdims=True) / 64 if xs else 0) + 1e-7
    assert np.all(err <= bound), float((err - bound).max())
    rms = np.sqrt(((y - x) ** 2).mean() / (x ** 2).mean())
    assert rms < 0.1, rms


@pytest.mark.parametrize("ftype", ["q4_k", "q5_k", "q6_k"])
def test_random_block_file_runs(files, ftype):
    got = np.asarray(Model.load(files[ftype][0]).forward(IDS))
    assert np.isfinite(got).all() and np.abs(got).max() > 0
