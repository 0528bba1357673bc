#pragma once
// The host half of MLA on the GPU runner (device_mla.h), plain C++ that builds and is tested on every machine.
// The CUDA MLA kernel (kernels/softmax/cuda/mla_decode_cuda.h) is the absorbed decode: one query per sequence
// over a paged latent cache. Every batch the scheduler makes becomes one such call by giving each new token its
// own "sequence": token i of a sequence with `context` cached tokens reads the sequence's block-table row with
// cache_seqlens cut at context + i + 1, so it sees exactly the keys up to itself (causal by construction). Fresh
// prefills, decode steps and chunks after a cached prefix are all the same plan.
//
// What this costs: a prefill row reads its whole prefix of latents, so a prompt of n tokens reads ~n^2 / 2 latent
// rows per layer (the CPU's naive-form prefill expands K / V once instead). The faster path, expanded K / V through
// kv_b_proj into the softmax prefill, needs Dq == Dv and head dims 64 / 128 / 256 there; DeepSeek's 192 / 128 do
// not fit it yet.
#include <cstdint>
#include <span>
#include <vector>

namespace attnzoo {

struct MlaRowsPlan {
  std::vector<int32_t> cache_seqlens;  // [T] keys row t sees
  std::vector<int32_t> block_table;    // [T, max_blocks]: row t holds its sequence's block-table row
  int64_t max_blocks = 0;
};

// cu_seqlens [S + 1] and cache_seqlens [S] as the Batch holds them (cache_seqlens counts the new tokens);
// block_tables [S, max_blocks]. ArgumentError naming the argument when they disagree.
MlaRowsPlan plan_mla_rows(std::span<const int32_t> cu_seqlens, std::span<const int32_t> cache_seqlens,
                          std::span<const int32_t> block_tables, int64_t max_blocks);

// Rows one MLA decode call takes: the kernel's stream-ordered scratch holds q_lat and ctx, f32 [rows, H, 2r + dr],
// which for a long prefill at DeepSeek-V3's 128 heads and rank 512 would be gigabytes beside a pool sized to the
// free memory; calls of at most kMlaScratchBytes of it (at least one row) keep it bounded.
inline constexpr int64_t kMlaScratchBytes = int64_t(128) << 20;
int64_t mla_rows_per_call(int64_t num_heads, int64_t kv_lora_rank, int64_t qk_rope_head_dim);

}  // namespace attnzoo
