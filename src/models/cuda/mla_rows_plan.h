#pragma once
// The host half of MLA on the GPU runner (device_mla.h), plain C++ that builds and is tested on every machine.
// The CUDA MLA kernel (kernels/softmax/cuda/mla_decode_cuda.h) is the absorbed decode: one query per sequence
// over a paged latent cache. Every batch the scheduler makes becomes one such call by giving each new token its
// own "sequence": token i of a sequence with `context` cached tokens reads the sequence's block-table row with
// cache_seqlens cut at context + i + 1, so it sees exactly the keys up to itself (causal by construction). Fresh
// prefills, decode steps and chunks after a cached prefix are all the same plan.
//
// That is the path for decode rows. Prefill rows (sequences bringing more than kMaxDecodeQueries new tokens) take
// the path vLLM and FlashInfer use instead, planned by plan_mla_step: the sequence's whole context of latent rows
// (cached ones and its new ones) gathered from the pool, expanded through kv_b_proj into per-head K [keys, H,
// dn + dr] (k_pe broadcast to every head) and V [keys, H, dv] by one GEMM, then the CUDA softmax prefill (varlen,
// bottom-right causal) over q = [q_nope | q_pe]. That prefill takes head dims 64 / 128 / 256 with Dq == Dv, so
// Q, K and V are zero-padded to the next of them (192 / 128 -> 256 for DeepSeek-V3; zeros add nothing to q.k or
// to the output's first dv columns) and the output is sliced back. A Dq != Dv prefill kernel would save the
// padding (a third of K's bytes and half of V's at DeepSeek-V3's shapes), but its tiles and shared-memory plan
// are the kernel's, four instantiations more; the padding rides on copies the expansion makes anyway (K's
// assembly, the queries' gather), plus V's and the output's, all beside a GEMM and an attention.
//
// What it costs per layer, counted in row-key pairs P (a fresh prompt of n tokens: P ~ n^2 / 2; n new after c
// cached: P ~ n * (c + n / 2)) and keys N = c + n; DeepSeek-V3 (H = 128, r = 512, dn / dr / dv = 128 / 64 / 128,
// padded D = 256, bf16):
//   absorbed rows: every pair reads its latent row once per 16 heads, 8 x 1152 B = ~9.2 KB, and costs
//                  H * 2 * (r + dr + r) = ~278 kflop;
//   expanded:      the GEMM's N * H * (dn + dv) * r * 2 flops (~33.6 Mflop per key), H * 4 * D = ~131 kflop per
//                  pair in the attention, and ~198 KB of scratch per key (mla_expand_sizes: latent row,
//                  expansion, padded K and V) written and read back about once, beside the attention's own K / V
//                  re-reads (once per 128-query tile).
// A fresh 4096-token prompt (P ~ 8.4M): ~77 GB of latent reads and ~2.3 Pflop absorbed; ~0.8 GB of scratch,
// ~8.6 GB of tile re-reads and ~1.2 Tflop expanded. The expansion's scratch is bounded (kMlaExpandBytes per
// call): past ~5,400 keys over all 128 heads at DeepSeek-V3's shapes, a sequence runs in slices of heads (16 heads:
// ~41k keys; one head: ~400k), each slice its own GEMM rows and prefill call over one gather of the latent rows.
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "kernels/softmax/decode.h"

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

// The expanded prefill's shapes: the head dim the CUDA softmax prefill runs at (the smallest of 64, 128, 256
// holding both qk_head_dim and v_head_dim; 0 when none does and every row stays absorbed), and the scratch bytes of
// `elem_bytes` elements a call over `heads` heads takes (bytes()): per key its gathered latent row, per key and head
// its expansion and padded K and V, per query and head its padded q and output.
struct MlaExpandSizes {
  int64_t num_heads = 0, head_dim = 0;
  int64_t latent_bytes = 0, head_key_bytes = 0, head_query_bytes = 0;
  int64_t bytes(int64_t keys, int64_t queries, int64_t heads) const {
    return keys * latent_bytes + heads * (keys * head_key_bytes + queries * head_query_bytes);
  }
};
MlaExpandSizes mla_expand_sizes(int64_t num_heads, int64_t kv_lora_rank, int64_t qk_nope_head_dim,
                                int64_t qk_rope_head_dim, int64_t v_head_dim, int64_t elem_bytes);

// Sequences with fewer new tokens stay on the absorbed rows: decode steps, speculative verification included (up
// to kMaxDecodeQueries queries per sequence, what the softmax layers' paged decode takes, as vLLM's MLA backends
// keep such rows on the decode path). Their expansion would cost a GEMM over the whole context for a few rows
// (~33.6 Mflop per key at DeepSeek-V3's shapes: ~1.1 Tflop per layer for a 32k context) where the absorbed rows
// read each latent once per row and head group.
inline constexpr int64_t kMlaExpandMinRows = kMaxDecodeQueries + 1;
// The expanded prefill's scratch per call (a group of sequences, or a slice of heads of one long sequence); beside a
// pool sized to the free memory.
inline constexpr int64_t kMlaExpandBytes = int64_t(1) << 30;

// One expanded prefill call over consecutive-or-not prefill sequences of the step, `heads` heads at a time: the
// heads are independent (each its own rows of kv_b_proj, K, V and softmax), so a context whose expansion over all
// of them would not fit the scratch runs in slices of heads over one gather of its latent rows.
struct MlaExpandGroup {
  int64_t heads = 0;                  // heads per call: all of them unless one long sequence's keys need slices
  std::vector<int32_t> q_rows;        // [n]: the step rows of its queries, sequence after sequence
  std::vector<int32_t> key_slots;     // [keys]: pool slots (block * block_size + offset) of each sequence's keys
  std::vector<int32_t> cu_seqlens_q;  // [S' + 1] into q_rows
  std::vector<int32_t> cu_seqlens_k;  // [S' + 1] into key_slots
};

// A step's MLA rows split between the two paths.
struct MlaStepPlan {
  MlaRowsPlan rows;  // plan_mla_rows over every row; the absorbed runs read their rows' part
  std::vector<std::pair<int64_t, int64_t>> absorbed_runs;  // (first row, rows): consecutive rows left absorbed
  std::vector<MlaExpandGroup> groups;
};

// Arrays as plan_mla_rows takes them, block_size the pool's. A sequence of at least `min_rows` new tokens is
// expanded: over all heads when sizes.bytes of its keys and queries fit `budget` (joining the previous group while
// the group fits), else alone in the widest slice of heads that fits, else (not even one head fits) absorbed;
// sizes.head_dim 0 expands nothing. ArgumentError naming the argument.
MlaStepPlan plan_mla_step(std::span<const int32_t> cu_seqlens, std::span<const int32_t> cache_seqlens,
                          std::span<const int32_t> block_tables, int64_t max_blocks, int64_t block_size,
                          const MlaExpandSizes& sizes, int64_t min_rows = kMlaExpandMinRows,
                          int64_t budget = kMlaExpandBytes);

}  // namespace attnzoo
