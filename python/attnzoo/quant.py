"""Block-quantized weights in llama.cpp's GGUF formats: dequantization and the quantized projection.

``qtype`` is a GGUF type id (an int, or a ``gguf.GGMLQuantizationType``); raw data is a uint8 array of blocks.
"""
import numpy as np

from . import _core


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
        n = data.size // info[2] * info[1]
    out = np.empty(int(n), dtype=np.float32)
    _core.dequantize(data, int(qtype), out, reference)
    return out


def matmul(x, w, qtype, n, k, path="auto"):
    """y [T, n] = x [T, k] @ w.T, w being n rows of raw blocks (exactly: ValueError naming `w` for more or fewer
    bytes). path: 'auto' (what a model runs), 'int8',
    'f32' or 'reference' (double accumulation)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    w = np.ascontiguousarray(w, dtype=np.uint8).reshape(-1)
    y = np.empty((x.shape[0], int(n)), dtype=np.float32)
    _core.quant_matmul(w, int(qtype), int(n), int(k), x, y, path)
    return y
