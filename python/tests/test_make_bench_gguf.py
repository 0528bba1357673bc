"""scripts/make_bench_gguf.py (the quantized rows of the README's bench model table): a tiny Qwen3 written in
each format reads back with the gguf package in that format, and attnzoo runs it like the transformers model it
came from (bf16: the weights rounded to bf16; quantized: within their rounding of the bf16 logits)."""
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
    want = {"q4_0": "Q4_0", "q4_k": "Q4_K", "q5_k": "Q5_K", "q6_k": "Q6_K", "q8_0": "Q8_0", "bf16": "BF16"}[ftype]
    kinds = {t.name: t.tensor_type.name for t in reader.tensors}
    assert kinds["token_embd.weight"] == want
    assert all(v == want for k, v in kinds.items() if not k.endswith("norm.weight")), kinds
    assert all(v == "F32" for k, v in kinds.items() if k.endswith("norm.weight"))


def test_bf16_file_runs_like_transformers(files):
    path, model = files["bf16"]
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).float())
        want = model(torch.from_numpy(IDS.astype(np.int64))[None]).logits[0].numpy()
    got = np.asarray(Model.load(path, dtype="float32").forward(IDS))  # f32 arithmetic, as the reference's
    assert np.abs(got - want).max() <= 2e-3 * np.abs(want).max()


@pytest.mark.parametrize("ftype,tol", [("q8_0", 0.05), ("q4_0", 0.5)])
def test_quantized_files_near_bf16(files, ftype, tol):
    ref = np.asarray(Model.load(files["bf16"][0]).forward(IDS))
    got = np.asarray(Model.load(files[ftype][0]).forward(IDS))
    assert np.linalg.norm(got - ref) <= tol * np.linalg.norm(ref)


@pytest.mark.parametrize("ftype", ["q4_k", "q5_k", "q6_k"])
def test_random_block_file_runs(files, ftype):
    got = np.asarray(Model.load(files[ftype][0]).forward(IDS))
    assert np.isfinite(got).all() and np.abs(got).max() > 0
