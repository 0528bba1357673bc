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

MlaExpandSizes mla_expand_sizes(int64_t num_heads, int64_t kv_lora_rank, int64_t qk_nope_head_dim,
                                int64_t qk_rope_head_dim, int64_t v_head_dim, int64_t elem_bytes) {
  MlaExpandSizes s;
  s.num_heads = num_heads;
  const int64_t widest = std::max(qk_nope_head_dim + qk_rope_head_dim, v_head_dim);
  for (int64_t d : {64, 128, 256})
    if (widest <= d) {
      s.head_dim = d;
      break;
    }
  s.latent_bytes = elem_bytes * (kv_lora_rank + qk_rope_head_dim);
  s.head_key_bytes = elem_bytes * (qk_nope_head_dim + v_head_dim + 2 * s.head_dim);
  s.head_query_bytes = elem_bytes * 2 * s.head_dim;
  return s;
}

MlaStepPlan plan_mla_step(std::span<const int32_t> cu_seqlens, std::span<const int32_t> cache_seqlens,
                          std::span<const int32_t> block_tables, int64_t max_blocks, int64_t block_size,
                          const MlaExpandSizes& sizes, int64_t min_rows, int64_t budget) {
  MlaStepPlan plan;
  plan.rows = plan_mla_rows(cu_seqlens, cache_seqlens, block_tables, max_blocks);  // every array checked there
  require(block_size > 0, "block_size", "must be positive");
  const int64_t S = int64_t(cache_seqlens.size());
  const int64_t H = sizes.num_heads;
  int64_t group_bytes = budget;  // the last group's: a later sequence joins it while it fits (q_rows is an index,
                                 // so absorbed sequences between them do not matter); a sliced group takes none
  for (int64_t s = 0; s < S; ++s) {
    const int64_t first = cu_seqlens[size_t(s)], n = int64_t(cu_seqlens[size_t(s) + 1]) - first;
    const int64_t keys = cache_seqlens[size_t(s)], bytes = sizes.bytes(keys, n, H);
    if (n == 0) continue;
    // Heads per call: all, or the widest slice whose scratch fits (0: not even one head's).
    const int64_t per_head = keys * sizes.head_key_bytes + n * sizes.head_query_bytes;
    const int64_t heads = bytes <= budget ? H
                          : budget < keys * sizes.latent_bytes || per_head == 0
                              ? 0
                              : std::min(H, (budget - keys * sizes.latent_bytes) / per_head);
    if (sizes.head_dim == 0 || n < min_rows || heads == 0) {
      auto& runs = plan.absorbed_runs;
      if (!runs.empty() && runs.back().first + runs.back().second == first)
        runs.back().second += n;
      else
        runs.emplace_back(first, n);
      continue;
    }
    require(keys <= max_blocks * block_size, "block_tables", "holds fewer blocks than a sequence's keys need");
    if (plan.groups.empty() || heads < H || group_bytes + bytes > budget) {
      plan.groups.emplace_back();
      plan.groups.back().heads = heads;
      plan.groups.back().cu_seqlens_q.push_back(0);
      plan.groups.back().cu_seqlens_k.push_back(0);
      group_bytes = heads < H ? budget : 0;
    }
    if (heads == H) group_bytes += bytes;
    MlaExpandGroup& g = plan.groups.back();
    for (int64_t i = 0; i < n; ++i) g.q_rows.push_back(int32_t(first + i));
    const auto row = block_tables.subspan(size_t(s * max_blocks), size_t(max_blocks));
    for (int64_t k = 0; k < keys; ++k) {
      const int32_t block = row[size_t(k / block_size)];
      require(block >= 0, "block_tables", "has no block where a sequence's keys are");
      g.key_slots.push_back(int32_t(int64_t(block) * block_size + k % block_size));
    }
    g.cu_seqlens_q.push_back(int32_t(g.q_rows.size()));
    g.cu_seqlens_k.push_back(int32_t(g.key_slots.size()));
  }
  return plan;
}

}  // namespace attnzoo
