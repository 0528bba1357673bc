#include "models/cuda/mla_rows_plan.h"

#include <algorithm>

#include "core/error.h"

namespace attnzoo {

MlaRowsPlan plan_mla_rows(std::span<const int32_t> cu_seqlens, std::span<const int32_t> cache_seqlens,
                          std::span<const int32_t> block_tables, int64_t max_blocks) {
  const int64_t S = int64_t(cache_seqlens.size());
  require(int64_t(cu_seqlens.size()) == S + 1 && cu_seqlens[0] == 0, "cu_seqlens",
          "needs one entry per sequence and one more, from 0");
  require(max_blocks >= 0 && int64_t(block_tables.size()) == S * max_blocks, "block_tables",
          "must be [num_sequences, max_blocks]");
  MlaRowsPlan plan;
  plan.max_blocks = max_blocks;
  const int64_t T = cu_seqlens[size_t(S)];
  plan.cache_seqlens.reserve(size_t(T));
  plan.block_table.reserve(size_t(T * max_blocks));
  for (int64_t s = 0; s < S; ++s) {
    const int64_t n = int64_t(cu_seqlens[size_t(s) + 1]) - cu_seqlens[size_t(s)], keys = cache_seqlens[size_t(s)];
    require(n >= 0, "cu_seqlens", "must not decrease");
    require(keys >= n, "cache_seqlens", "must count each sequence's new tokens");
    const auto row = block_tables.subspan(size_t(s * max_blocks), size_t(max_blocks));
    for (int64_t i = 0; i < n; ++i) {
      plan.cache_seqlens.push_back(int32_t(keys - n + i + 1));
      plan.block_table.insert(plan.block_table.end(), row.begin(), row.end());
    }
  }
  return plan;
}

int64_t mla_rows_per_call(int64_t num_heads, int64_t kv_lora_rank, int64_t qk_rope_head_dim) {
  const int64_t row_bytes = num_heads * (2 * kv_lora_rank + qk_rope_head_dim) * int64_t(sizeof(float));
  return std::max<int64_t>(1, kMlaScratchBytes / std::max<int64_t>(row_bytes, 1));
}

}  // namespace attnzoo
