"""Block-scaled fp8 checkpoints (the DeepSeek-V3 / Qwen3-FP8 release form: quantization_config {quant_method fp8,
weight_block_size}, F8_E4M3 weights beside f32 weight_scale_inv per block) dequantized at load: a tiny random Qwen3
whose projections are quantized here the way DeepSeek's quantizer does it (per block, scale = amax / 448, the fp8
values x / scale, scale_inv = scale), against transformers running on the dequantized weights; the scales'
shape and presence checked by name; bf16 dequantization close."""
import json
import math
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import checkpoint_edits as edits  # noqa: E402
import model_checks as checks  # noqa: E402
from attnzoo.model import Model  # noqa: E402

VOCAB = 160
BLOCK = [32, 48]  # partial blocks on both axes: 64 / 96-wide matrices


def _quantize(w):
    """w [R, C] f32 -> (e4m3 values, scale_inv [ceil(R / br), ceil(C / bc)], the dequantized weight)."""
    (br, bc), (R, C) = BLOCK, w.shape
    scale = torch.empty(math.ceil(R / br), math.ceil(C / bc))
    q = torch.empty(R, C, dtype=torch.float8_e4m3fn)
    for i in range(scale.shape[0]):
        for j in range(scale.shape[1]):
            block = w[i * br:(i + 1) * br, j * bc:(j + 1) * bc]
            scale[i, j] = block.abs().max().clamp(min=1e-12) / 448.0
            q[i * br:(i + 1) * br, j * bc:(j + 1) * bc] = (block / scale[i, j]).to(torch.float8_e4m3fn)
    full = scale.repeat_interleave(br, 0)[:R].repeat_interleave(bc, 1)[:, :C]
    return q, scale, q.float() * full


def _write(directory, ref, tensors, dtype="float32", method="fp8"):
    from safetensors.torch import save_file
    os.makedirs(directory, exist_ok=True)
    cfg = ref.config.to_dict()
    cfg["dtype"] = cfg["torch_dtype"] = dtype
    cfg["architectures"] = [type(ref).__name__]
    cfg["quantization_config"] = dict(quant_method=method, fmt="e4m3", activation_scheme="dynamic",
                                      weight_block_size=BLOCK)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(cfg, f)
    save_file(tensors, os.path.join(directory, "model.safetensors"))
    return str(directory)


@pytest.fixture(scope="module")
def fp8(tmp_path_factory):
    config = transformers.Qwen3Config(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                      max_position_embeddings=256, rms_norm_eps=1e-6, initializer_range=0.1,
                                      tie_word_embeddings=False)
    ref = checks.random_model("fp8", config, checks.randomize_vectors(1.0), attn_implementation="eager").eval()
    tensors = {}
    with torch.no_grad():
        for name, p in ref.named_parameters():
            if ".layers." in name and name.endswith("_proj.weight"):
                q, scale, deq = _quantize(p.detach().float())
                p.copy_(deq)  # the reference runs on exactly what the checkpoint holds
                tensors[name], tensors[name + "_scale_inv"] = q, scale
            else:
                tensors[name] = p.detach().contiguous()
    directory = _write(tmp_path_factory.mktemp("fp8"), ref, tensors)
    ids = checks.prompt(VOCAB, 40)
    return ref, directory, tensors, ids, checks.meaningful_logits(ref, ids)


def test_logits_match_transformers_on_the_dequantized_weights(fp8):
    ref, directory, tensors, ids, want = fp8
    assert any(t.dtype == torch.float8_e4m3fn for t in tensors.values())
    m = Model.load(directory)
    checks.check_full_prompt(m, ids, want, VOCAB)
    checks.check_token_by_token_decode(m, ids, want, prefill=25, stop=40)
    # the scales are consumed, not counted as parameters
    assert m.inspect()["parameter_count"] == sum(p.numel() for p in ref.parameters())


def test_bf16_dequantization_stays_close(fp8, tmp_path):
    ref, directory, tensors, ids, want = fp8
    got = Model.load(_write(tmp_path / "bf16", ref, tensors, dtype="bfloat16")).forward(ids)
    rel = np.sqrt(((got - want) ** 2).sum() / (want ** 2).sum())
    assert 0 < rel <= 3e-2, rel


def test_bad_scales_are_named(fp8, tmp_path):
    ref, directory, tensors, ids, want = fp8
    name = "model.layers.1.mlp.down_proj.weight"
    wrong = dict(tensors)
    wrong[name + "_scale_inv"] = tensors[name + "_scale_inv"][:, :1].contiguous()
    edits.expect_load_error(_write(tmp_path / "shape", ref, wrong),
                            r"model\.layers\.1\.mlp\.down_proj\.weight_scale_inv.*expected float scales \[2, 2\] "
                            r"for the \[64, 96\] weight")
    missing = {k: v for k, v in tensors.items() if k != name + "_scale_inv"}
    edits.expect_load_error(_write(tmp_path / "missing", ref, missing), r"down_proj\.weight_scale_inv")
    edits.expect_load_error(_write(tmp_path / "method", ref, tensors, method="compressed-tensors"),
                            r"quantization_config\.quant_method': 'compressed-tensors'")


def test_quantize_reads_the_dequantized_weights(fp8, tmp_path):
    """`attnzoo quantize` of the fp8 checkpoint: an F32 GGUF with transformers' logits."""
    import attnzoo
    ref, directory, tensors, ids, want = fp8
    path = str(tmp_path / "q.gguf")
    attnzoo.quantize(directory, path, type="F32")
    checks.check_full_prompt(Model.load(path), ids, want, VOCAB)
