"""The softmax-attention family: prefill, decode (contiguous and paged caches), MLA, block-sparse masks, Reformer's
LSH attention."""
from . import _core
from ._arrays import (as_f32_vector, as_i32_vector, as_input, as_int, as_int_array, as_output, cuda_stream_of,
                      empty_like_input, optional_input, scan_left_to_core, shape_of)

BlockMask = _core.BlockMask


def block_mask(seq_len, *, block=64, local_blocks=1, global_tokens=0, stride=0, random_blocks=0, seed=0):
    """A reusable block-sparse pattern (Longformer / BigBird style) at `block`-token granularity.

    Query block b sees key block c when |b - c| < local_blocks (local band), when either block lies in the
    first ceil(global_tokens / block) blocks (global tokens), when c % stride == stride - 1 (strided summary
    blocks, stride > 0), or when c is one of `random_blocks` blocks drawn for b with `seed`. Causal and window
    masks still apply on top. Tiles outside the pattern are skipped by the kernels.
    """
    return _core.BlockMask(as_int(seq_len, "seq_len"), as_int(block, "block"), as_int(local_blocks, "local_blocks"),
                           as_int(global_tokens, "global_tokens"), as_int(stride, "stride"),
                           as_int(random_blocks, "random_blocks"), as_int(seed, "seed", 0, 2 ** 64 - 1))


def flash_attn_aliases(causal, scale, window, softmax_scale=None, window_size=None):
    """(scale, window) from flash-attn's spellings: softmax_scale = scale; window_size=(left, right) with -1 for
    unbounded, key j visible from query i iff i - left <= j <= i + right, i.e. window = left + 1. A right bound
    other than unbounded (or 0 under causal, which flash-attn implies) has no equivalent here."""
    if softmax_scale is not None:
        if scale is not None:
            raise ValueError("softmax_scale: give scale or softmax_scale (flash-attn's name), not both")
        scale = softmax_scale
    if window_size is not None:
        if window is not None:
            raise ValueError("window_size: give window=W or window_size=(W - 1, 0) (flash-attn's form), not both")
        try:
            left, right = (as_int(x, "window_size") for x in window_size)
        except (TypeError, ValueError):
            raise ValueError(f"window_size: expected (left, right) integers, got {window_size!r}") from None
        if right != -1 and not (causal and right == 0):
            raise ValueError(f"window_size: right={right} is not supported: keys after the query are either all "
                             "masked (causal=True, right 0 or -1) or all visible (causal=False, right -1)")
        if left < -1:
            raise ValueError(f"window_size: left must be >= -1 (-1: unbounded), got {left}")
        window = None if left == -1 else left + 1
    return scale, None if window is None else as_int(window, "window")


def attention(q, k, v, *, causal=True, scale=None, window=None, softcap=None, sinks=None, alibi_slopes=None,
              cu_seqlens=None, cu_seqlens_k=None, block_mask=None, block_table=None, seqused_k=None,
              cache_seqlens=None, out=None, check_inputs=True, softmax_scale=None, window_size=None, k_scale=None,
              v_scale=None, kv_cache_dtype="auto"):
    """Softmax attention for prefill (FlashAttention-2 style tiles, online softmax, f32 accumulation).

    q: [B, Tq, Hq, D]; k, v: [B, Tk, Hkv, D] with Hq a multiple of Hkv (MHA / GQA / MQA). With `cu_seqlens`
    (int32 [N+1] offsets) the tensors are packed: [total, H, D] or [1, total, H, D]; `cu_seqlens_k` gives
    separate key offsets (defaults to `cu_seqlens`). When Tq < Tk the queries are the last Tq positions
    (bottom-right aligned causal mask, as flash-attn >= 2.1).

    causal: mask keys after the query. scale: default D**-0.5. window=W: key j visible from query i iff
    j > i - W (and j <= i when causal: the transformers / Mistral sliding window); flash-attn's
    window_size=(W - 1, 0) and softmax_scale are accepted as aliases. softcap=c: scores become c * tanh(s / c) (Gemma 2). sinks: [Hq] learned logits that join
    the softmax denominator and are dropped (gpt-oss). alibi_slopes: [Hq], scores -= slope * |i - j|.
    block_mask: an attnzoo.BlockMask. Order: scale, softcap, ALiBi, masks. Rows that see no key give zeros.
    dtypes: float32, bfloat16, float16 (q and k/v may differ); output has q's dtype, or `out`'s if given.
    check_inputs: refuse NaN / Inf in q, k, v (one pass, after shapes and strides have been validated; only q
    when k, v are a cache). A NaN / Inf left in k or v reaches exactly the outputs whose softmax includes its key
    (on the CPU; the CUDA kernels may also carry a value row's into rows of its key tile that do not see it).

    KV cache (chunked or prefix-cached prefill; flash_attn_varlen_func with block_table / flash_attn_with_kvcache):
    with `seqused_k` (int [B], alias `cache_seqlens`) k and v are a cache that already holds every sequence's
    keys INCLUDING its new queries' own: paged k [num_blocks, block_size, Hkv, D], v [num_blocks, block_size,
    Hkv, Dv] with `block_table` (int32 [B, max_blocks_per_seq]; key j of sequence b lives in block
    block_table[b, j // block_size], row j % block_size; any block size, blocks in any order, unused entries
    may be -1), or contiguous [B, S_max, Hkv, D] without it. q is padded [B, Tq, Hq, D] or packed with
    `cu_seqlens` (`cu_seqlens_k` is not used then); sequence b's queries are its last Tq_b of seqused_k[b]
    positions. Every mask option above applies. Caches may be float32 / bfloat16 / float16, or quantized as
    attnzoo.kv_cache.write_kv_paged writes them (the same arguments as attnzoo.attention_decode): kv_cache_dtype=
    "int8" with int8 caches, or "fp8" with uint8 caches of float8 e4m3fn bytes, and k_scale / v_scale float32
    [num_blocks, block_size, Hkv] (contiguous: [B, S_max, Hkv]); rows are dequantized as tiles are packed.
    k_scale, v_scale and kv_cache_dtype are refused without seqused_k.
    """
    q = as_input(q, "q", cuda=True)
    scale, window = flash_attn_aliases(causal, scale, window, softmax_scale, window_size)
    if seqused_k is not None and cache_seqlens is not None:
        raise ValueError("cache_seqlens: give seqused_k or cache_seqlens, not both (they are the same)")
    seqused_k = seqused_k if seqused_k is not None else cache_seqlens
    cached = seqused_k is not None
    k, v = as_input(k, "k_cache" if cached else "k", cuda=True), as_input(v, "v_cache" if cached else "v", cuda=True)
    if out is None:
        out = empty_like_input(q, shape_of(q)[:-1] + (shape_of(v)[-1],))
    check_inputs = scan_left_to_core(check_inputs, [(q, "q")] + ([] if cached else [(k, "k"), (v, "v")]))
    _core.attention(q, k, v, as_output(out, "out", cuda=True), bool(causal), scale, window, softcap,
                    as_f32_vector(sinks, "sinks"), as_f32_vector(alibi_slopes, "alibi_slopes"),
                    as_i32_vector(cu_seqlens, "cu_seqlens"), as_i32_vector(cu_seqlens_k, "cu_seqlens_k"), block_mask,
                    as_i32_vector(block_table, "block_table"), as_i32_vector(seqused_k, "seqused_k"),
                    check_inputs=bool(check_inputs), k_scale=optional_input(k_scale, "k_scale", cuda=True),
                    v_scale=optional_input(v_scale, "v_scale", cuda=True), kv_cache_dtype=kv_cache_dtype,
                    stream=cuda_stream_of(q))
    return out


def attention_reference(q, k, v, **kw):
    """The plain double-accumulation definition (slow); same arguments as attention()."""
    q, k, v = as_input(q, "q"), as_input(k, "k"), as_input(v, "v")
    kw["scale"], kw["window"] = flash_attn_aliases(kw.get("causal", True), kw.get("scale"), kw.get("window"),
                                                   kw.pop("softmax_scale", None), kw.pop("window_size", None))
    out = kw.pop("out", None)
    if out is None:
        out = empty_like_input(q, shape_of(q)[:-1] + (shape_of(v)[-1],))
    _core.attention(q, k, v, as_output(out, "out"), bool(kw.get("causal", True)), kw.get("scale"), kw.get("window"),
                    kw.get("softcap"), as_f32_vector(kw.get("sinks"), "sinks"),
                    as_f32_vector(kw.get("alibi_slopes"), "alibi_slopes"),
                    as_i32_vector(kw.get("cu_seqlens"), "cu_seqlens"),
                    as_i32_vector(kw.get("cu_seqlens_k"), "cu_seqlens_k"), kw.get("block_mask"),
                    as_i32_vector(kw.get("block_table"), "block_table"),
                    as_i32_vector(kw.get("seqused_k", kw.get("cache_seqlens")), "seqused_k"), reference=True,
                    k_scale=optional_input(kw.get("k_scale"), "k_scale"),
                    v_scale=optional_input(kw.get("v_scale"), "v_scale"),
                    kv_cache_dtype=kw.get("kv_cache_dtype", "auto"))
    return out


def lsh_hash(qk, rotations, *, check_inputs=True):
    """Reformer's angular LSH buckets: int32 [B, H, num_hashes, T], in [0, num_buckets).

    qk: [B, T, H, D] (the shared query / key projection); rotations: float32 [H, D, num_hashes, num_buckets / 2],
    random rotations drawn by the caller (transformers' LSHSelfAttention draws torch.randn of that shape, after
    torch.manual_seed(hash_seed) when one is set). Token t's bucket in round r is the argmax of
    [x R, -x R] with x = qk[b, t, h], R = rotations[h, :, r, :] (first index on ties); transformers' buckets add
    r * num_buckets to tell the rounds apart, these do not.
    """
    qk = as_input(qk, "qk")
    rot = as_input(rotations, "rotations")
    B, T, H = (shape_of(qk) + (0, 0, 0))[:3]
    R = (shape_of(rot) + (0, 0, 0))[2]
    buckets = empty_like_input(qk, (B, H, R, T), dtype=_int32_of(qk))
    _core.lsh_hash(qk, rot, as_output(buckets, "buckets"), check_inputs=bool(check_inputs))
    return buckets


def _int32_of(x):
    import numpy as np
    if type(x).__module__.startswith("torch"):
        import torch
        return torch.int32
    return np.int32


def lsh_attention(qk, v, rotations=None, *, buckets=None, chunk_length=64, causal=False, out=None,
                  check_inputs=True, reference=False):
    """Reformer's LSH self-attention (transformers' LSHSelfAttention after its projections), [B, T, H, D] layout.

    qk: [B, T, H, D], the shared query / key vectors (keys are the queries length-normalised: qk / |qk|, scores
    unscaled); v: [B, T, H, Dv]. Give either `rotations` (float32 [H, D, num_hashes, num_buckets / 2], hashed
    with lsh_hash) or `buckets` (integer [B, H, num_hashes, T], e.g. lsh_hash's, or transformers' returned buckets
    minus their per-round offsets). Each round sorts the tokens by (bucket, position); the rounds' orders, end to
    end, are cut into chunks of `chunk_length` (the last one may be shorter); a query attends to its chunk and the
    one before it (cyclically: round r's first chunk looks back into round r - 1). `causal` (transformers'
    is_decoder) hides later positions; a token's own position scores -1e5, so it attends to itself only when
    nothing else is visible. Rounds combine by their log-sum-exp. When T <= chunk_length there is no hashing:
    every token sees every (causally visible) one, as in transformers. reference=True runs the plain double-
    precision definition (slow). Returns `out` [B, T, H, Dv], qk's dtype unless `out` is given.
    """
    qk, v = as_input(qk, "qk"), as_input(v, "v")
    if (rotations is None) == (buckets is None):
        raise ValueError("rotations: give rotations (to hash qk) or buckets (already hashed), exactly one")
    if buckets is None:
        buckets = lsh_hash(qk, rotations, check_inputs=check_inputs)
    else:
        buckets = as_int_array(buckets, "buckets")  # any integer dtype (transformers' are int64), as int32
    if out is None:
        out = empty_like_input(qk, shape_of(qk)[:-1] + (shape_of(v)[-1],))
    _core.lsh_attention(qk, v, buckets, as_output(out, "out"), as_int(chunk_length, "chunk_length"), bool(causal),
                        reference=bool(reference), check_inputs=bool(check_inputs))
    return out
