#pragma once
// What the CUDA MLA decode's host planning and its kernels share: the CTA geometry, the work and merge records
// and the kernels' parameters. Plain C++ (no CUDA headers), so the planning (mla_decode_launch_plan.cc) builds in
// every configuration and the kernel emulator (testing/cuda_emulation) reads the same layout.
#include <cstdint>

#include "kernels/linear/common/cuda/float_elem.h"

namespace attnzoo::cuda_mla {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
// Heads one attention CTA serves: each latent tile it reads from memory is used by this many heads.
constexpr int kHeadsPerCta = 16;
// Latent rows per tile: 16 heads x 16 keys is two scores per thread.
constexpr int kTile = 16;
// The accumulator keeps kCols columns of the latent rank per thread for every head of the CTA: rank <= 128 * kCols.
constexpr int kMaxRank = 4 * kThreads;
// Sequences one absorb / up-projection CTA serves: each head's W_UK_h / W_UV_h is read once for this many.
constexpr int kBatchPerCta = 8;
constexpr float kLog2e = 1.4426950408889634f;

struct MlaWork {
  int32_t b;
  int32_t k_begin, k_end;  // this chunk's latent rows
  int32_t slot;            // -1: the sequence's only chunk, writes ctx; else its partial-result slot
};

struct MlaMerge {
  int32_t b, first_slot, num_slots;
};

struct MlaDecodeParams {
  const void* q;  // [B, 1, H, dn + dr]
  void* o;        // [B, 1, H, dv]
  const void* w;  // kv_b_proj [H * (dn + dv), r]
  const void* latent;
  cuda_linear::Elem q_type, o_type, w_type, latent_type;
  int64_t q_batch, q_head, o_batch, o_head, w_row;  // elements
  int64_t latent_block, latent_token;               // a contiguous cache: block = sequence
  int32_t B, H, dn, dr, dv, r;
  int32_t block_size;
  int64_t max_blocks_per_seq;
  const int32_t* block_table;  // device [B, max_blocks_per_seq]; null: contiguous
  const MlaWork* work;
  const MlaMerge* merges;
  float scale_log2;  // softmax scale * log2(e): the softmax runs in exp2
  float* q_lat;      // [B, H, r + dr]: W_UK_h^T q_nope_h, then q_pe_h
  float* ctx;        // [B, H, r]: the normalised attention over the latent rows
  float* part_o;     // [slot][H][r], unnormalised
  float* part_m;     // [slot][H], log2 units
  float* part_l;     // [slot][H]
};

// Shared memory of the attention CTA: the tile's row offsets, the heads' query rows and one latent tile in f32
// (a row pitch of L + 1 floats puts the rows a warp reads at one column on different banks), then the tile's
// scores and the heads' softmax state (max, sum, rescale factor).
constexpr int64_t mla_row_pitch(int64_t L) { return L + 1; }
constexpr int64_t mla_attend_smem_bytes(int64_t L) {
  return kTile * 8 + (kHeadsPerCta + kTile) * mla_row_pitch(L) * 4 + kHeadsPerCta * (kTile + 3) * 4;
}
// The tensor-core attention (mla_decode_mma.cuh): kMmaTile rows a tile, 16 per warp; rows of L + 8 elements (an
// odd number of 16-byte pieces when L is a multiple of 16, so ldmatrix's eight rows hit eight bank quads); the
// tile's row offsets, queries and rows in the cache's 16-bit type, then the weights, the scores and the state.
constexpr int kMmaTile = 16 * kWarps;
constexpr int64_t mla_mma_pitch(int64_t L) { return L + 8; }
constexpr int64_t mla_attend_mma_smem_bytes(int64_t L) {
  return kMmaTile * 8 + (kHeadsPerCta + kMmaTile) * mla_mma_pitch(L) * 2 + kHeadsPerCta * (kMmaTile + 8) * 2 +
         kHeadsPerCta * (kMmaTile + 4) * 4 + kHeadsPerCta * 3 * 4;
}
// 8-column value blocks each warp of the tensor-core attention accumulates (its template argument).
constexpr int mla_mma_blocks_per_warp(int64_t r) { return int(r / (8 * kWarps)); }

// The absorb and up-projection CTAs stage their sequences' rows (q_nope: dn, ctx: r) as f32.
constexpr int64_t mla_rows_smem_bytes(int64_t n) { return kBatchPerCta * n * 4; }

// Columns of the latent rank each thread accumulates (the attention kernel's template argument).
constexpr int mla_cols_per_thread(int64_t r) { return r <= kThreads ? 1 : r <= 2 * kThreads ? 2 : 4; }

}  // namespace attnzoo::cuda_mla
