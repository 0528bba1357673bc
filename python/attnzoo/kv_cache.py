"""Writing new keys / values into paged KV caches (vLLM's reshape_and_cache with a slot_mapping)."""
from . import _core
from ._arrays import as_input, as_int_array, as_output


def write_kv_paged(k_new, v_new, slot_mapping, k_cache, v_cache, k_scale=None, v_scale=None, kv_cache_dtype="auto"):
    """Scatter new keys and values into paged caches, in place.

    k_new [T, Hkv, D], v_new [T, Hkv, Dv] (float32 / bfloat16 / float16); k_cache [num_blocks, block_size, Hkv,
    D], v_cache [num_blocks, block_size, Hkv, Dv] of one float dtype; slot_mapping int [T]: token t goes to
    slot slot_mapping[t] = block * block_size + offset, and a negative slot skips it (padding). Rows are
    converted to the cache's dtype (round to nearest even). Every slot is checked before anything is written.

    Quantized caches (kv_cache_dtype "int8": int8 caches; "fp8": uint8 caches holding float8 e4m3fn bytes, as
    vLLM stores them) quantize every (token, head) row with its own scale amax / 127 (int8, round half to even)
    or amax / 448 (e4m3, round to nearest even), written into k_scale / v_scale float32 [num_blocks,
    block_size, Hkv]: value = stored * scale.
    """
    _core.write_kv_paged(as_input(k_new, "k_new"), as_input(v_new, "v_new"),
                         as_int_array(slot_mapping, "slot_mapping", bits=64), as_output(k_cache, "k_cache"),
                         as_output(v_cache, "v_cache"), _optional_output(k_scale, "k_scale"),
                         _optional_output(v_scale, "v_scale"), kv_cache_dtype)


def _optional_output(a, name):
    return None if a is None else as_output(a, name)


def write_paged_rows(rows, slot_mapping, cache, k_scale=None, kv_cache_dtype="auto"):
    """write_kv_paged for one cache (MLA's latent): rows [T, ..., D] into cache [num_blocks, block_size, ..., D];
    a quantized cache takes its scales in k_scale [num_blocks, block_size, ...] (MLA's k_scale)."""
    _core.write_kv_paged(as_input(rows, "k_new"), None, as_int_array(slot_mapping, "slot_mapping", bits=64),
                         as_output(cache, "k_cache"), None, _optional_output(k_scale, "k_scale"), None, kv_cache_dtype)
