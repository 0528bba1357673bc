"""The GGUF block types the kernel bench builds random weights of, in one table: each type's id comes from the
engine's own format table (_core.quant_type_info), and beside it the byte offsets of the f16 scales in its block,
the one fact that table does not hold (attnzoo.quant.F16_SCALE_OFFSETS, which the conformance checks read too)."""
import functools

import numpy as np

from .. import _core
from ..quant import F16_SCALE_OFFSETS as F16_SCALES


@functools.cache
def _ids_by_name():
    return {info[0]: i for i in range(256) if (info := _core.quant_type_info(i)) is not None}


def type_id(name):
    """The GGUF type id of a type named as the engine names it ("Q4_K"); ValueError naming `name` for one the
    engine does not know."""
    ids = _ids_by_name()
    if name not in ids:
        raise ValueError(f"name: unknown GGUF block type {name!r}")
    return ids[name]


def weight_bytes(name, N, K):
    """The bytes of an N x K matrix of the type's blocks."""
    _, block, size = _core.quant_type_info(type_id(name))
    return N * K // block * size


def random_weights(name, N, K, seed):
    """Random valid raw blocks of an N x K matrix of the type named (a key of F16_SCALES): packed integers take any
    bits, the f16 scales small finite values; bf16 weights as raw bytes."""
    rng = np.random.default_rng(seed)
    if name == "BF16":
        w = rng.standard_normal((N, K), dtype=np.float32)
        return (w.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8).reshape(-1)
    _, block, size = _core.quant_type_info(type_id(name))
    raw = rng.integers(0, 256, size=(N * K // block, size), dtype=np.uint8)
    for off in F16_SCALES[name]:
        raw[:, off:off + 2] = (rng.standard_normal(len(raw)) * 0.02).astype(np.float16).view(np.uint8).reshape(-1, 2)
    return raw.reshape(-1)
