"""Decode attention against contiguous and paged KV caches."""
from . import _core
from ._arrays import (as_f32_vector, as_i32_vector, as_input, as_int, as_output, cuda_stream_of, empty_like_input,
                      optional_input, scan_left_to_core, shape_of)


def _add_token_axis(x):
    return x.unsqueeze(1) if hasattr(x, "unsqueeze") else x[:, None]


def attention_decode(q, k_cache, v_cache, cache_seqlens, *, block_table=None, scale=None, causal=True, window=None,
                     softcap=None, sinks=None, alibi_slopes=None, block_mask=None, out=None, check_inputs=True,
                     k_scale=None, v_scale=None, kv_cache_dtype="auto"):
    """Softmax attention of a few new tokens per sequence against a KV cache (decode / speculative verification).

    q: [B, Tq, Hq, D] with 1 <= Tq <= 8 (Tq > 1: verifying draft tokens), or [B, Hq, D] for one token (the
    result then has shape [B, Hq, Dv]).
    Contiguous cache (block_table=None): k_cache [B, S_max, Hkv, D], v_cache [B, S_max, Hkv, Dv].
    Paged cache: k_cache [num_blocks, block_size, Hkv, D], v_cache [num_blocks, block_size, Hkv, Dv] and
    block_table int32 [B, max_blocks_per_seq]: key j of sequence b lives in physical block
    block_table[b, j // block_size] at slot j % block_size (flash_attn_with_kvcache's layout; any block_size).
    Entries past a sequence's last used block are never read (padding such as -1 is fine).
    cache_seqlens: int [B], the number of valid keys of each sequence INCLUDING the Tq new tokens, whose keys
    and values the caller has already written into the cache. Query i of sequence b sits at position
    cache_seqlens[b] - Tq + i (bottom-right aligned), so with causal=True it sees keys 0 .. that position.

    Hq must be a multiple of Hkv (MHA / GQA / MQA). scale: default D**-0.5. window=W: key j visible from
    query position i iff i - W < j <= i. softcap=c: scores become c * tanh(s / c). sinks: [Hq] learned logits
    that join the softmax denominator. alibi_slopes: [Hq], scores -= slope * |i - j|. block_mask: an
    attnzoo.BlockMask covering max(cache_seqlens) positions. Order: scale, softcap, ALiBi, masks (as
    attnzoo.attention). Rows that see no key give zeros.
    dtypes: q float32 / bfloat16 / float16; caches float32 / bfloat16 / float16 (k and v alike); f32
    accumulation; the result has q's dtype, or `out`'s if given.
    Quantized caches (as attnzoo.kv_cache.write_kv_paged writes them): kv_cache_dtype="int8" with int8 caches,
    or "fp8" with uint8 caches of float8 e4m3fn bytes, and k_scale / v_scale float32 [num_blocks, block_size,
    Hkv] (contiguous: [B, S_max, Hkv]): key = stored * scale, dequantized in registers.
    check_inputs: refuse NaN / Inf in q. The caches are not scanned (that would read them twice): their
    contents are trusted, and a NaN or Inf there reaches exactly the outputs whose softmax includes its key (on
    the CPU; the CUDA kernel may also carry a value row's into rows of its key tile that do not see it).
    Long caches are split across threads (split-K) and merged exactly, so batch 1 uses every core.
    """
    return _decode(q, k_cache, v_cache, cache_seqlens, block_table, scale, causal, window, softcap, sinks,
                   alibi_slopes, block_mask, out, check_inputs, reference=False,
                   quant=(k_scale, v_scale, kv_cache_dtype))


def attention_decode_reference(q, k_cache, v_cache, cache_seqlens, *, block_table=None, scale=None, causal=True,
                               window=None, softcap=None, sinks=None, alibi_slopes=None, block_mask=None,
                               out=None):
    """The plain double-accumulation definition (slow); same arguments as attention_decode()."""
    return _decode(q, k_cache, v_cache, cache_seqlens, block_table, scale, causal, window, softcap, sinks,
                   alibi_slopes, block_mask, out, False, reference=True)


def _decode(q, k_cache, v_cache, cache_seqlens, block_table, scale, causal, window, softcap, sinks, alibi_slopes,
            block_mask, out, check_inputs, reference, quant=(None, None, "auto")):
    q = as_input(q, "q", cuda=True)
    k_cache, v_cache = as_input(k_cache, "k_cache", cuda=True), as_input(v_cache, "v_cache", cuda=True)
    single_token = len(shape_of(q)) == 3
    if single_token:
        q = _add_token_axis(q)
    if len(shape_of(v_cache)) != 4:
        raise ValueError(f"v_cache: must have 4 dimensions, got shape {list(shape_of(v_cache))}")
    given_out = out
    if out is None:
        out = empty_like_input(q, shape_of(q)[:-1] + (shape_of(v_cache)[-1],))
    else:
        out = as_output(out, "out", cuda=True)
        if single_token and len(shape_of(out)) == 3:
            out = _add_token_axis(out)
    seqlens = as_i32_vector(cache_seqlens, "cache_seqlens")
    table = as_i32_vector(block_table, "block_table")
    check_inputs = scan_left_to_core(check_inputs, [(q, "q")])
    window = None if window is None else as_int(window, "window")
    _core.attention_decode(q, k_cache, v_cache, seqlens, table, out, bool(causal), scale, window, softcap,
                           as_f32_vector(sinks, "sinks"), as_f32_vector(alibi_slopes, "alibi_slopes"), block_mask,
                           reference=reference, check_inputs=bool(check_inputs),
                           k_scale=optional_input(quant[0], "k_scale", cuda=True),
                           v_scale=optional_input(quant[1], "v_scale", cuda=True), kv_cache_dtype=quant[2],
                           stream=cuda_stream_of(q))
    if given_out is not None:
        return given_out
    return out[:, 0] if single_token else out
