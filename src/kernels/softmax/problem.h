#pragma once
// A validated prefill problem: every sequence's span in q/k/v/out plus the strides, so the reference and the
// fast kernel read memory the same way whether the batch is padded [B,T,H,D] or packed with cu_seqlens, and
// whether the keys sit contiguously or in a paged cache behind a block table.
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "kernels/softmax/kv_cache_view.h"
#include "kernels/softmax/kv_quant.h"
#include "kernels/softmax/options.h"

namespace attnzoo {

struct VarlenInfo {
  const int32_t* cu_seqlens_q = nullptr;  // [num_seqs + 1] token offsets into packed q/out
  const int32_t* cu_seqlens_k = nullptr;  // [num_seqs + 1] into packed k/v; nullptr: same as q
  int64_t num_seqs = 0;
};

struct SeqSpan {
  int64_t q_offset, k_offset, v_offset, o_offset;  // elements to the sequence's first token, head 0
  int64_t Tq, Tk;
  const int32_t* blocks = nullptr;  // paged K/V: the sequence's block-table row (k_offset / v_offset unused)
  int64_t cache_row = 0;            // a contiguous quantized cache: the sequence's batch row (its scales' dim 0)
};

struct TokenStrides {
  int64_t token, head;  // elements; the last (head_dim) stride is 1
};

struct AttentionProblem {
  Device device{};  // where q, k, v and out live (the caches of a cached problem: always the host, for now)
  int64_t Hq = 0, Hkv = 0, D = 0, Dv = 0;
  float scale = 1.f;
  AttentionOptions opts;
  std::vector<SeqSpan> seqs;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  DType q_dtype = DType::f32, kv_dtype = DType::f32, o_dtype = DType::f32;
  TokenStrides qs{}, ks{}, vs{}, os{};
  int64_t block_size = 0;            // paged K/V: rows per block
  int64_t k_block = 0, v_block = 0;  // paged K/V: element strides between physical blocks
  KvScaleView k_scale, v_scale;      // int8 / fp8 caches

  int64_t group() const { return Hq / Hkv; }
  // Element offsets of key / value row j (kv head 0) of a sequence, contiguous or through its block table.
  int64_t k_row(const SeqSpan& s, int64_t j) const {
    if (!s.blocks) return s.k_offset + j * ks.token;
    return int64_t(s.blocks[j / block_size]) * k_block + (j % block_size) * ks.token;
  }
  int64_t v_row(const SeqSpan& s, int64_t j) const {
    if (!s.blocks) return s.v_offset + j * vs.token;
    return int64_t(s.blocks[j / block_size]) * v_block + (j % block_size) * vs.token;
  }
  // Offset of row j's scale (kv head 0) in a scale tensor of the cache.
  int64_t scale_row(const KvScaleView& s, const SeqSpan& seq, int64_t j) const {
    if (!seq.blocks) return seq.cache_row * s.block + j * s.token;
    return int64_t(seq.blocks[j / block_size]) * s.block + (j % block_size) * s.token;
  }
  int64_t max_tq() const;
};

// Validates shapes, dtypes, strides, lengths and options; names the offending argument in ArgumentError /
// DTypeError. Accepts q [B,Tq,Hq,D]; with varlen, q [total,Hq,D] or [1,total,Hq,D].
AttentionProblem make_prefill_problem(const TensorView& q, const TensorView& k, const TensorView& v,
                                      const TensorView& out, const AttentionOptions& opts, const VarlenInfo& varlen);

// Queries against a KV cache (flash_attn_with_kvcache / flash_attn_varlen_func with block_table): q padded
// [B, Tq, Hq, D] or packed [total_q, Hq, D] with varlen.cu_seqlens_q (cu_seqlens_k must be null: the cache
// gives each sequence's keys); cache.cache_seqlens[b] (flash-attn's seqused_k) counts sequence b's keys
// including its queries' own, already written, so Tq_b <= cache_seqlens[b] and the queries are bottom-right
// aligned. Paged ([num_blocks, block_size, Hkv, D] + block_table) or contiguous ([B, S_max, Hkv, D]) caches.
AttentionProblem make_cached_prefill_problem(const TensorView& q, const KvCacheView& cache, const TensorView& out,
                                             const AttentionOptions& opts, const VarlenInfo& varlen);

// Shared checks, also used by decode and MLA entry points. check_float_tensor also requires host memory (the
// kernels that run on the CPU only); check_float_operand takes a tensor on any device.
void check_float_tensor(const TensorView& t, const char* name);
void check_float_operand(const TensorView& t, const char* name);
void check_head_options(const AttentionOptions& opts, int64_t Hq);
float resolve_scale(float scale, int64_t D);

}  // namespace attnzoo
