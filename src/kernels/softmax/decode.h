#pragma once
// Decode attention: 1..8 new query tokens per sequence against a KV cache that already holds their keys.
// The cache is contiguous [B, S_max, Hkv, D] or paged [num_blocks, block_size, Hkv, D] with a block table
// (flash-attn's flash_attn_with_kvcache layout). cache_seqlens[b] counts sequence b's valid keys including the
// new tokens'; the Tq queries are the last Tq positions (bottom-right aligned). Long caches are split across
// threads (split-K) and merged with their log-sum-exp, so batch-1 decode uses every core.
#include <cstdint>

#include "core/tensor.h"
#include "kernels/softmax/kv_cache_view.h"
#include "kernels/softmax/options.h"

namespace attnzoo {

constexpr int64_t kMaxDecodeQueries = 8;

// q [B, Tq, Hq, D] with 1 <= Tq <= 8; out [B, Tq, Hq, Dv]. Validates everything and names the argument.
void attention_decode(const TensorView& q, const KvCacheView& cache, const TensorView& out,
                      const AttentionOptions& opts);
// Plain double-accumulation definition, for tests.
void attention_decode_reference(const TensorView& q, const KvCacheView& cache, const TensorView& out,
                                const AttentionOptions& opts);

}  // namespace attnzoo
