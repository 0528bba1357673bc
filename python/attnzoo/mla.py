"""Multi-head latent attention (DeepSeek-V2/V3): the naive form for prefill, the absorbed form for decode.

Per token the layer caches one latent row ``[c_kv (kv_lora_rank) ; k_pe (qk_rope_head_dim)]`` shared by all
heads (c_kv after ``kv_a_layernorm``, k_pe after RoPE). ``w_kv_b`` is ``kv_b_proj.weight``,
``[H * (qk_nope_head_dim + v_head_dim), kv_lora_rank]``: per head, the rows of W_UK then those of W_UV.
Queries are the already projected (and RoPE'd) ``[q_nope ; q_pe]`` per head.

naive:    k_h = [W_UK_h c_kv ; k_pe], v_h = W_UV_h c_kv, o_h = softmax(scale * q_h . k_h) v_h
absorbed: q_lat_h = W_UK_h^T q_nope_h, o_h = W_UV_h softmax(scale * (q_lat_h . c_kv + q_pe_h . k_pe)) c_kv
"""
from . import _core
from ._arrays import (as_i32_vector, as_int, as_input, as_output, cuda_stream_of, empty_like_input, optional_input,
                      scan_left_to_core, shape_of)


def _dims(kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim):
    out = []
    for value, name, lowest in ((kv_lora_rank, "kv_lora_rank", 1), (qk_nope_head_dim, "qk_nope_head_dim", 1),
                                (qk_rope_head_dim, "qk_rope_head_dim", 0), (v_head_dim, "v_head_dim", 1)):
        value = as_int(value, name)
        if value < lowest:
            raise ValueError(f"{name}: must be >= {lowest}, got {value}")
        out.append(value)
    return out


def mla_prefill(q, kv_latent, w_kv_b, *, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim,
                scale=None, causal=True, cu_seqlens=None, cu_seqlens_k=None, cache_seqlens=None, block_table=None,
                out=None, check_inputs=True, k_scale=None, kv_cache_dtype="auto"):
    """MLA over a prompt (naive form: K/V expanded per head through w_kv_b, then tiled softmax attention).

    q: [B, Tq, H, qk_nope_head_dim + qk_rope_head_dim]; kv_latent: [B, Tk, kv_lora_rank + qk_rope_head_dim]
    with Tq <= Tk (queries are the last Tq positions, so Tq < Tk is chunked prefill after a cached prefix);
    w_kv_b: [H * (qk_nope_head_dim + v_head_dim), kv_lora_rank]. Returns o: [B, Tq, H, v_head_dim].
    With `cu_seqlens` (int32 [N+1] token offsets) the batch is packed: q [total, H, D], kv_latent
    [total_k, kv_lora_rank + qk_rope_head_dim]; `cu_seqlens_k` gives separate latent offsets (default: the same).

    scale: default (qk_nope_head_dim + qk_rope_head_dim) ** -0.5 (pass DeepSeek's YaRN-adjusted one explicitly).
    causal: mask later keys. dtypes: float32 / bfloat16 / float16 in any mix, f32 accumulation; the output has
    q's dtype, or `out`'s if given. check_inputs: refuse NaN / Inf in q and kv_latent (one cheap pass; only q
    when kv_latent is a cache).
    Latent cache (chunked / prefix-cached prefill on a KV pool): with `cache_seqlens` (int [B]) kv_latent is a
    cache that already holds every sequence's rows including its new queries' own: paged [num_blocks,
    block_size, (1,) kv_lora_rank + qk_rope_head_dim] with `block_table` (int32 [B, max_blocks_per_seq]), or
    contiguous [B, S_max, ...] without it; q padded [B, Tq, H, D] or packed with `cu_seqlens`.
    Quantized latent cache (as attnzoo.write_paged_rows writes it): kv_cache_dtype="int8" with an int8 cache, or
    "fp8" with a uint8 cache of float8 e4m3fn bytes, and k_scale float32 shaped like the cache without its last
    dim (one scale per row, vLLM's k_scale of the MLA cache); refused without cache_seqlens.
    Errors: ValueError naming the argument, TypeError for unsupported dtypes.
    """
    return _prefill(q, kv_latent, w_kv_b, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, scale,
                    causal, cu_seqlens, cu_seqlens_k, cache_seqlens, block_table, out, check_inputs, reference=False,
                    quant=(k_scale, kv_cache_dtype))


def _prefill(q, kv_latent, w_kv_b, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, scale, causal,
             cu_seqlens, cu_seqlens_k, cache_seqlens, block_table, out, check_inputs, reference,
             quant=(None, "auto")):
    r, dn, dr, dv = _dims(kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim)
    cached = cache_seqlens is not None
    q, w_kv_b = as_input(q, "q"), as_input(w_kv_b, "w_kv_b")
    kv_latent = as_input(kv_latent, "latent_cache" if cached else "kv_latent")
    if out is None:
        out = empty_like_input(q, shape_of(q)[:-1] + (dv,))
    _core.mla_prefill(q, kv_latent, w_kv_b, as_output(out, "out"), r, dn, dr, dv, scale, bool(causal),
                      as_i32_vector(cu_seqlens, "cu_seqlens"), as_i32_vector(cu_seqlens_k, "cu_seqlens_k"),
                      as_i32_vector(cache_seqlens, "cache_seqlens"), as_i32_vector(block_table, "block_table"),
                      reference=reference, check_inputs=bool(check_inputs),
                      k_scale=optional_input(quant[0], "k_scale"), kv_cache_dtype=quant[1])
    return out


def mla_decode(q, latent_cache, cache_seqlens, w_kv_b, *, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim,
               v_head_dim, block_table=None, scale=None, causal=True, out=None, k_scale=None, kv_cache_dtype="auto",
               check_inputs=True):
    """MLA for new tokens against a latent cache (absorbed form: the cache is read as-is, once for all heads).

    q: [B, Tq, H, qk_nope_head_dim + qk_rope_head_dim], Tq >= 1 new tokens per sequence (1 for decode, a few
    for speculative verification); latent_cache: contiguous [B, S_max, kv_lora_rank + qk_rope_head_dim] or,
    with `block_table` (int32 [B, max_blocks_per_seq]), paged [num_blocks, block_size, (1,) kv_lora_rank +
    qk_rope_head_dim]; cache_seqlens: int [B], each sequence's valid rows including the new tokens' (already
    written), so Tq <= cache_seqlens[b] <= capacity. w_kv_b: [H * (qk_nope_head_dim + v_head_dim),
    kv_lora_rank]. Returns o: [B, Tq, H, v_head_dim]; the new tokens are the last Tq positions (causal).

    scale: default (qk_nope_head_dim + qk_rope_head_dim) ** -0.5. Same dtypes and errors as mla_prefill.
    Equals mla_prefill on the same tokens up to f32 rounding (the absorption reorders the sums).
    k_scale / kv_cache_dtype: a quantized latent cache, as in mla_prefill.
    check_inputs: refuse NaN / Inf in q (the cache is not scanned: its unused rows may hold anything).
    CUDA torch tensors (all on one GPU) run there without a copy, on the caller's current stream, for one new
    token per sequence over a bf16 / f16 / f32 latent cache; cache_seqlens and block_table are read on the host.
    """
    r, dn, dr, dv = _dims(kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim)
    q = as_input(q, "q", cuda=True)
    latent_cache, w_kv_b = as_input(latent_cache, "latent_cache", cuda=True), as_input(w_kv_b, "w_kv_b", cuda=True)
    if cache_seqlens is None:
        raise ValueError("cache_seqlens: is required")
    if out is None:
        out = empty_like_input(q, shape_of(q)[:-1] + (dv,))
    check_inputs = scan_left_to_core(check_inputs, [(q, "q")])
    _core.mla_decode(q, latent_cache, as_i32_vector(cache_seqlens, "cache_seqlens"), w_kv_b,
                     as_output(out, "out", cuda=True), r, dn, dr, dv, as_i32_vector(block_table, "block_table"), scale,
                     bool(causal), check_inputs=bool(check_inputs), k_scale=optional_input(k_scale, "k_scale", cuda=True),
                     kv_cache_dtype=kv_cache_dtype, stream=cuda_stream_of(q))
    return out


def mla_prefill_reference(q, kv_latent, w_kv_b, *, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim,
                          scale=None, causal=True, cu_seqlens=None, cu_seqlens_k=None, cache_seqlens=None,
                          block_table=None, out=None):
    """The naive form written plainly with double accumulation (slow); same arguments as mla_prefill."""
    return _prefill(q, kv_latent, w_kv_b, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, scale,
                    causal, cu_seqlens, cu_seqlens_k, cache_seqlens, block_table, out, False, reference=True)
