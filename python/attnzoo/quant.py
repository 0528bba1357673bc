"""Block-quantized weights in llama.cpp's GGUF formats: dequantization and the quantized projection (prepare()
the weights once, as a model does, then Weights.matmul per product).

``qtype`` is a GGUF type id (an int, or a ``gguf.GGMLQuantizationType``); raw data is a uint8 array of blocks.
"""
import numpy as np

from . import _core

# Byte offsets of the f16 scales in each GGUF block type's block: d (Q4_0, Q5_0, Q8_0), d and m (Q4_1, Q5_1), d
# and dmin (Q2_K after its codes, Q4_K, Q5_K), d after the codes and int8 scales (Q3_K, Q6_K); bf16 rows have none.
# Every other byte of a block is packed integers, where any bits are valid: random weights need only these finite.
F16_SCALE_OFFSETS = {"Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2), "Q8_0": (0,), "Q2_K": (80, 82),
                     "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,), "IQ4_NL": (0,), "IQ4_XS": (0,),
                     "BF16": ()}


def type_info(qtype):
    """(name, block elements, block bytes) of a GGUF type id, or None for a format attnzoo does not know."""
    return _core.quant_type_info(int(qtype))


def dequantize(data, qtype, n=None, reference=False):
    """float32 [n] from raw blocks (n: all elements the bytes hold by default; the bytes must be exactly those of
    n elements, ValueError naming `data` otherwise). `reference`: the plain scalar definition instead of the
    vectorised kernel (they agree bit for bit)."""
    data = np.ascontiguousarray(data, dtype=np.uint8).reshape(-1)
    info = type_info(qtype)
    if info is None:
        raise ValueError(f"qtype: unknown GGUF type id {int(qtype)}")
    if n is None:
        if 0 < data.size < info[2]:  # else n = 0, refused as a count instead of as too few bytes
            raise ValueError(f"data: {data.size} bytes are less than one {info[0]} block ({info[2]} bytes)")
        n = data.size // info[2] * info[1]
    out = np.empty(int(n), dtype=np.float32)
    _core.dequantize(data, int(qtype), out, reference)
    return out


class Weights:
    """A projection's weights prepared once, as a model's loader prepares them: n rows of raw GGUF blocks (exactly
    n x k values' bytes: ValueError naming `w` otherwise), regrouped or aligned into a copy of their own where this
    CPU's kernels read one (AVX-512 VNNI and AVX2 rows for Q4_0 / Q4_1 / Q8_0 / Q4_K / Q5_K / Q6_K, bf16 rows off a
    cache line where AMX runs), else read where they lie (the array is then kept alive). `w` itself is never changed or
    paged out. Build it once and call matmul per token: preparing is a load-time cost (the copy).

    path: 'auto' (a model's Linear under the current matmul precision) or 'int8' (the integer rows alone, 8-bit
    activations whatever the token count: matmul(path='int8')'s kernel; block formats only, ValueError naming
    `path` for others)."""

    def __init__(self, w, qtype, n, k, path="auto"):
        w = np.ascontiguousarray(w, dtype=np.uint8).reshape(-1)
        self._weights = _core.QuantWeights(w, int(qtype), int(n), int(k), str(path))

    n = property(lambda self: self._weights.n)
    k = property(lambda self: self._weights.k)
    qtype = property(lambda self: self._weights.qtype)
    path = property(lambda self: self._weights.path)
    # The bytes one product reads; the bytes of the copy held (0 when w is read where it lies); the bytes of w that
    # copy stands in for.
    weight_bytes = property(lambda self: self._weights.weight_bytes)
    owned_bytes = property(lambda self: self._weights.owned_bytes)
    replaced_source_bytes = property(lambda self: self._weights.replaced_source_bytes)

    def matmul(self, x, out=None):
        """y [T, n] = x [T, k] @ w.T on the prepared path: 'auto', a model's Linear under the current matmul
        precision (by default 8-bit activations for T <= 8 and, on AVX-512-BF16, bf16 panels beyond); 'int8',
        8-bit activations for every T. `out`: a float32 [T, n] array to write."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        if x.ndim == 1:
            x = x.reshape(1, -1)
        if out is None:
            out = np.empty((x.shape[0], self.n), dtype=np.float32)
        self._weights.matmul(x, out)
        return out

    def __repr__(self):
        name = type_info(self.qtype)[0]
        return (f"Weights({name} [{self.n}, {self.k}], path {self.path}, {self.weight_bytes} bytes, "
                f"owned {self.owned_bytes})")


def prepare(w, qtype, n, k, path="auto"):
    """Weights(w, qtype, n, k, path): the projection prepared once for many products, on path 'auto' (a model's
    Linear) or 'int8' (the integer rows)."""
    return Weights(w, qtype, n, k, path)


def matmul(x, w, qtype, n, k, path="auto"):
    """y [T, n] = x [T, k] @ w.T, w being n rows of raw blocks (exactly: ValueError naming `w` for more or fewer
    bytes). path: 'auto' (a model's Linear under the current matmul precision, Weights.matmul: by default 8-bit
    activations for T <= 8 and, on AVX-512-BF16, bf16 panels beyond), 'int8' (8-bit activations, integer dots, for
    every T), 'f32' or 'reference' (double accumulation). Each call prepares w again ('auto', 'int8': the regrouped
    copy): for many products over the same weights, prepare() them once."""
    if path not in ("auto", "int8", "f32", "reference"):
        raise ValueError(f"path: expected 'auto', 'int8', 'f32' or 'reference', got {path!r}")
    if path in ("auto", "int8"):
        return prepare(w, qtype, n, k, path).matmul(x)
    x = np.ascontiguousarray(x, dtype=np.float32)
    w = np.ascontiguousarray(w, dtype=np.uint8).reshape(-1)
    y = np.empty((x.shape[0], int(n)), dtype=np.float32)
    _core.quant_matmul(w, int(qtype), int(n), int(k), x, y, path)
    return y


def quantize(x, qtype, importance=None):
    """uint8 [rows, row bytes]: x [rows, cols] (float32) as GGUF blocks of `qtype` (F32, F16, BF16, Q8_0, Q4_0,
    Q4_1, Q5_0, Q5_1: gguf.quants.quantize's bytes; Q2_K, Q3_K: llama-quantize's bytes; Q4_K, Q5_K, Q6_K, IQ4_NL,
    IQ4_XS: llama.cpp's scale search).
    `importance`: one weight per column (an imatrix: mean squared activation per input channel) for the weighted
    search."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.ndim == 1:
        x = x.reshape(1, -1)
    info = type_info(qtype)
    if info is None:
        raise ValueError(f"qtype: unknown GGUF type id {int(qtype)}")
    if x.ndim != 2 or x.shape[1] % info[1] or x.shape[1] == 0:
        raise ValueError(f"x: expected [rows, cols] with cols a positive multiple of {info[1]}, got {x.shape}")
    out = np.empty((x.shape[0], x.shape[1] // info[1] * info[2]), dtype=np.uint8)
    imp = None if importance is None else np.ascontiguousarray(importance, dtype=np.float32)
    _core.quantize(x, int(qtype), imp, out)
    return out


def quantize_checkpoint(src_dir, out_path, type="Q8_0", output_tensor_type=None, token_embedding_type=None,
                        tensor_types=None, keep=None, calibration=None, calibration_chunk=512, calibration_tokens=0,
                        allow_requantize=False, pure=False):
    """`attnzoo quantize` from Python: the Hugging Face checkpoint in `src_dir` (every family the README's quantization row
    names: Llama-style dense and MoE models, Gemma, Phi-3, GLM, DeepSeek, gpt-oss, the Qwen3 and state-space hybrids,
    ...; a class it cannot write is refused with the list) written to `out_path` as GGUF v3, `type` named as
    llama-quantize names it: one type (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q6_K) under llama-quantize's
    precision policy, or one of llama-quantize's mixtures, tensor for tensor as it writes them (Q2_K (also Q2_K_M),
    Q2_K_S (needs `calibration`, as llama-quantize needs an imatrix), Q3_K_S, Q3_K_M (= Q3_K), Q3_K_L, Q4_K_M (= Q4_K),
    Q4_K_S, Q5_K_M (= Q5_K), Q5_K_S, IQ4_NL, IQ4_XS: src/convert/ftype_mixture.h); `pure`: every matrix in the main
    type, the head and embedding too (llama-quantize's --pure; type="Q4_K", pure=True puts every matrix in Q4_K).
    `tensor_types`: {regex on the GGUF name: type} (first match wins); `keep`: regexes of tensors that keep the
    checkpoint's float type; `calibration`: a text file the model runs on first, its per-channel mean squared Linear
    inputs weighting the scale search (llama.cpp's imatrix).
    Returns {"architecture", "tensors": [{"name", "hf_name", "shape", "type", "source_type", "bytes"}], "tokenizer",
    "bytes_in", "bytes_out", "set_aside" (a multimodal wrapper's tensors outside its language model, not written),
    "calibrated", "requantized"}.
    `src_dir` may also be a GGUF file (llama-quantize's use): its metadata and tensor layout kept, each F32 / F16 /
    BF16 tensor in the type the same policy gives its GGUF name ("hf_name" is "" then); block-quantized tensors are
    refused by name unless their type stays or `allow_requantize` (dequantized, then quantized again; "requantized"
    counts them)."""
    pairs = list((tensor_types or {}).items())
    return _core.quantize_checkpoint(str(src_dir), str(out_path), str(type), output_tensor_type, token_embedding_type,
                                     pairs, list(keep or []), None if calibration is None else str(calibration),
                                     int(calibration_chunk), int(calibration_tokens), bool(allow_requantize),
                                     bool(pure))
