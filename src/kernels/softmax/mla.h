#pragma once
// Multi-head latent attention (DeepSeek-V2/V3), the public C++ entry points.
//
// Per token the layer keeps one latent row [c_kv (r) ; k_pe (dr)] shared by all heads: c_kv is the compressed
// key/value (after kv_a_layernorm), k_pe the RoPE'd key part. kv_b_proj's weight W [H * (dn + dv), r] holds, per
// head h, W_UK_h (dn rows) then W_UV_h (dv rows). Queries are [q_nope (dn) ; q_pe (dr)] per head.
//
//   naive     k_h = [W_UK_h c_kv ; k_pe],  v_h = W_UV_h c_kv,  o_h = softmax(scale * q_h . k_h) v_h
//   absorbed  q_lat_h = W_UK_h^T q_nope_h,  o_h = W_UV_h softmax(scale * (q_lat_h . c_kv + q_pe_h . k_pe)) c_kv
//
// Both are the same function; the naive form suits prefill (many queries: expanding K/V costs less than
// absorbing every query), the absorbed form suits decode (the cache stays r + dr wide and is read once for all
// heads, as multi-query attention with head dim r + dr and value dim r).
//
// On CUDA (every tensor on one GPU; cache_seqlens and block_table stay host memory) mla_decode runs plain decode:
// padded q [B, 1, H, dn + dr], a bf16 / f16 / f32 latent cache, contiguous or paged, r <= 512, dn <= 512,
// dr <= 128 (kernels/softmax/cuda/mla_decode_kernel.cuh: absorb, attention over the latent rows 16 heads per
// CTA with split contexts merged by log-sum-exp, on mma.sync tensor cores for bf16 / f16 caches
// (mla_decode_mma.cuh), up-projection; f32 accumulation). Everything else on a device
// is refused by name: Tq > 1, packed q (cu_seqlens), int8 / fp8 latent caches; mla_prefill and the references
// run on the CPU only.
#include <cstdint>
#include <limits>

#include "core/tensor.h"
#include "kernels/softmax/problem.h"

namespace attnzoo {

struct MlaWeights {
  TensorView w_kv_b;  // [num_heads * (qk_nope_head_dim + v_head_dim), kv_lora_rank], last dim contiguous
  int64_t num_heads = 0;
  int64_t qk_nope_head_dim = 0;  // dn >= 1
  int64_t qk_rope_head_dim = 0;  // dr >= 0
  int64_t v_head_dim = 0;        // dv >= 1
  int64_t kv_lora_rank = 0;      // r >= 1
};

struct MlaOptions {
  float scale = std::numeric_limits<float>::quiet_NaN();  // NaN: (dn + dr)^-0.5, as DeepSeek without YaRN mscale
  bool causal = true;  // queries are bottom-right aligned: the last Tq of Tk positions
};

// A latent cache: contiguous [B, S_max, r + dr] or paged [num_blocks, block_size, r + dr] with a block table
// (either may carry a head axis of 1: [num_blocks, block_size, 1, r + dr], the KV pool's layout).
struct LatentCacheView {
  TensorView latent;
  const int32_t* cache_seqlens = nullptr;  // [B] valid tokens of each sequence, including the new queries'
  const int32_t* block_table = nullptr;    // [B, max_blocks_per_seq] physical block ids; paged caches only
  int64_t max_blocks_per_seq = 0;
  // An int8 / float8_e4m3fn latent cache: one f32 scale per row, shaped like `latent` without its last dim
  // (kernels/softmax/kv_quant.h); the row's c_kv and k_pe share it.
  TensorView scale = {};
};

// Naive form. q [B, Tq, H, dn + dr], latent [B, Tk, r + dr] with Tq <= Tk, out [B, Tq, H, dv]. With varlen
// (cu_seqlens_q, optional cu_seqlens_k) the tensors are packed: q [total_q, H, dn + dr] (or [1, total_q, ...]),
// latent [total_k, r + dr], out [total_q, H, dv]. f32 / bf16 / f16 in any mix; f32 accumulation; output in
// out's dtype. Validates everything and names the argument (ArgumentError / DTypeError).
void mla_prefill(const TensorView& q, const TensorView& latent, const MlaWeights& weights, const TensorView& out,
                 const MlaOptions& opts, const VarlenInfo& varlen = {});

// Naive form against a latent cache that already holds the new tokens' rows (chunked / prefix-cached prefill
// on the KV pool; the rows are gathered through the block table, then expanded). q padded [B, Tq, H, dn + dr]
// or packed [total_q, H, dn + dr] with varlen.cu_seqlens_q (cu_seqlens_k must stay null); out likewise with
// dv; Tq_b <= cache_seqlens[b] <= capacity, queries bottom-right aligned.
void mla_prefill(const TensorView& q, const LatentCacheView& cache, const MlaWeights& weights,
                 const TensorView& out, const MlaOptions& opts, const VarlenInfo& varlen = {});

// Absorbed form against a latent cache that already holds the new tokens' rows. q [B, Tq, H, dn + dr] with
// Tq >= 1 (1 for plain decode, a few for speculative verification), out [B, Tq, H, dv];
// Tq <= cache_seqlens[b] <= cache capacity. Packed q (varlen.cu_seqlens_q) also works; then, as for
// Tq > 8, the absorbed attention runs on the tiled prefill kernel. On CUDA: plain decode only (see above).
void mla_decode(const TensorView& q, const LatentCacheView& cache, const MlaWeights& weights,
                const TensorView& out, const MlaOptions& opts, const VarlenInfo& varlen = {});

// The naive form written plainly with double accumulation (slow, for tests); same arguments as above.
void mla_prefill_reference(const TensorView& q, const TensorView& latent, const MlaWeights& weights,
                           const TensorView& out, const MlaOptions& opts, const VarlenInfo& varlen = {});
void mla_prefill_reference(const TensorView& q, const LatentCacheView& cache, const MlaWeights& weights,
                           const TensorView& out, const MlaOptions& opts, const VarlenInfo& varlen = {});
void mla_decode_reference(const TensorView& q, const LatentCacheView& cache, const MlaWeights& weights,
                          const TensorView& out, const MlaOptions& opts, const VarlenInfo& varlen = {});

// Bytes one token occupies in the latent cache (what MLA saves: r + dr values instead of H * (dn + dr + dv)),
// with its scale in a quantized cache.
inline int64_t mla_cache_bytes_per_token(const MlaWeights& w, DType cache_dtype) {
  return (w.kv_lora_rank + w.qk_rope_head_dim) * int64_t(dtype_size(cache_dtype)) +
         (is_quantized_kv(cache_dtype) ? int64_t(sizeof(float)) : 0);
}

}  // namespace attnzoo
