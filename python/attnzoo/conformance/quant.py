"""Quantized weight formats against the gguf package (llama.cpp's gguf-py): dequantization bit for bit, the
quantized projection against float64 products of gguf-py's dequantized weights, and quantization: the same bytes
as gguf.quants.quantize where it rounds to nearest, K-quants and IQ4 decoded by gguf-py within a bound."""
import numpy as np

from . import check, compare, require, row

AREA = "quantized formats"
FORMATS = ("F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
           "MXFP4", "IQ4_NL", "IQ4_XS")
ROUND_TO_NEAREST = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1")
# K-quants and IQ4: worst element error relative to the largest |x| after llama.cpp's scale search (a few steps of
# each format's grid; measured Q2_K 0.32, Q3_K 0.13, then 0.055 / 0.027 / 0.015 and IQ4_NL 0.060, IQ4_XS 0.067 on
# Gaussian rows). Q2_K / Q3_K's bytes are llama-quantize's (python/tests/test_quantize_q2_q3_k.py).
K_QUANT_BOUND = {"Q2_K": 0.45, "Q3_K": 0.2, "Q4_K": 0.12, "Q5_K": 0.06, "Q6_K": 0.03, "IQ4_NL": 0.12,
                 "IQ4_XS": 0.12}


def _blocks(gguf, name, rows, cols, rng):
    """Valid raw blocks of a format: gguf-py's quantizer where it has one, random bytes with small f16 scales
    otherwise."""
    qtype = gguf.GGMLQuantizationType[name]
    if name in ROUND_TO_NEAREST or name == "MXFP4":
        data = rng.standard_normal((rows, cols)).astype(np.float32)
        return np.ascontiguousarray(gguf.quants.quantize(data, qtype)).view(np.uint8).reshape(-1)
    from attnzoo.quant import F16_SCALE_OFFSETS
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(rows * cols // block, size), dtype=np.uint8)
    for off in F16_SCALE_OFFSETS[name]:
        raw[:, off:off + 2] = (rng.standard_normal(len(raw)) * 0.05).astype(np.float16).view(np.uint8).reshape(-1, 2)
    return raw.reshape(-1)


@check(AREA, [f"{f} weights" for f in FORMATS])
def formats(ctx):
    gguf = require("gguf", "gguf (llama.cpp's gguf-py)")
    require("gguf.quants", "gguf.quants")
    from attnzoo import quant
    rng = np.random.default_rng(0)
    rows, n, k = [], 16, 256
    x = rng.standard_normal((3, k)).astype(np.float32)
    for name in FORMATS:
        qtype = gguf.GGMLQuantizationType[name]
        raw = _blocks(gguf, name, n, k, rng)
        want = gguf.quants.dequantize(raw.reshape(n, -1), qtype).astype(np.float32).reshape(-1)
        got = quant.dequantize(raw, int(qtype))
        differing = float(np.mean(got.view(np.uint32) != want.view(np.uint32))) if got.shape == want.shape else 1.0
        rows.append(row(AREA, f"{name} weights", f"dequantize {name}: {n}x{k} weights", "gguf.quants.dequantize",
                        differing, 0.0, "fraction of differing bit patterns"))
        w = want.astype(np.float64).reshape(n, k)
        rows.append(compare(AREA, f"{name} weights", f"matmul {name} (f32 activations), 3 tokens",
                            "float64 x @ W.T on gguf-py's dequantized W",
                            quant.matmul(x, raw, int(qtype), n, k, path="f32"), x.astype(np.float64) @ w.T, 1e-5))
    return rows


@check(AREA, ["quantization"])
def quantization(ctx):
    gguf = require("gguf", "gguf (llama.cpp's gguf-py)")
    from attnzoo import quant
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 512)).astype(np.float32)
    rows = []
    for name in ROUND_TO_NEAREST:
        qtype = gguf.GGMLQuantizationType[name]
        got = quant.quantize(x, int(qtype))
        want = np.ascontiguousarray(gguf.quants.quantize(x, qtype)).view(np.uint8).reshape(got.shape)
        rows.append(row(AREA, "quantization", f"quantize {name}: 8x512 Gaussian rows", "gguf.quants.quantize",
                        float(np.mean(got != want)), 0.0, "fraction of differing bytes"))
    for name, bound in K_QUANT_BOUND.items():
        qtype = gguf.GGMLQuantizationType[name]
        decoded = gguf.quants.dequantize(quant.quantize(x, int(qtype)), qtype).reshape(x.shape)
        rows.append(compare(AREA, "quantization", f"quantize {name} (llama.cpp's scale search), decoded",
                            "the input, decoded by gguf.quants.dequantize", decoded, x, bound))
    return rows
