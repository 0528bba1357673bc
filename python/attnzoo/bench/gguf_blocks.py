"""The GGUF block types the kernel bench builds random weights of, in one table: each type's id comes from the
engine's own format table (_core.quant_type_info), and beside it the byte offsets of the f16 scales in its block,
the one fact that table does not hold. Those scales must be finite; every other byte of a block is packed
integers, where any bits are valid."""
import functools

import numpy as np

from .. import _core

# Byte offsets of each block's f16 scales: d (Q4_0, Q8_0), d and m (Q4_1), d and dmin (Q4_K, Q5_K), d after the
# 6-bit codes and int8 scales (Q6_K); bf16 rows have none.
F16_SCALES = {"Q4_0": (0,), "Q4_1": (0, 2), "Q8_0": (0,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,), "BF16": ()}


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
