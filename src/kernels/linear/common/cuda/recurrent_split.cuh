#pragma once
// Device side of the recurrences' work split (recurrent_split.h): which slice a CTA owns, and its thread's state
// column read before the first token and written after the last.
#include <cstdint>

#include "kernels/linear/common/cuda/recurrent_split.h"

namespace attnzoo::cuda_linear {

// What CTA blockIdx.x's thread works on: slices vary fastest, then heads, then sequences.
struct RecurrentCta {
  int64_t n;             // sequence
  int head;              // the state's head (the value head where they differ)
  int slice;             // which kCols columns
  int col;               // the thread's state column
  bool has_col;          // col < V
  int row0;              // the warp's first state row
  int64_t begin, length;  // the sequence's token rows
};

__device__ __forceinline__ RecurrentCta recurrent_cta(int slices, int heads, int V, int64_t T,
                                                      const int64_t* seq_offsets) {
  RecurrentCta c;
  int64_t cta = blockIdx.x;
  c.slice = int(cta % slices);
  cta /= slices;
  c.head = int(cta % heads);
  c.n = cta / heads;
  c.col = c.slice * kCols + int(threadIdx.x) % 32;
  c.has_col = c.col < V;
  c.row0 = int(threadIdx.x) / 32 * kRowsPerThread;
  c.begin = c.n * T, c.length = T;
  if (seq_offsets) c.begin = seq_offsets[c.n], c.length = seq_offsets[c.n + 1] - c.begin;
  return c;
}

// s <- rows row0.. of the column at `state` (rows V apart, K of them), zeros where there is no state or column.
__device__ __forceinline__ void load_state_column(float (&s)[kRowsPerThread], const float* state, int K, int V,
                                                  const RecurrentCta& c) {
#pragma unroll
  for (int j = 0; j < kRowsPerThread; ++j) {
    const int r = c.row0 + j;
    s[j] = state && c.has_col && r < K ? state[int64_t(r) * V] : 0.f;
  }
}

__device__ __forceinline__ void store_state_column(const float (&s)[kRowsPerThread], float* state, int K, int V,
                                                   const RecurrentCta& c) {
  if (!state || !c.has_col) return;
#pragma unroll
  for (int j = 0; j < kRowsPerThread; ++j) {
    const int r = c.row0 + j;
    if (r < K) state[int64_t(r) * V] = s[j];
  }
}

}  // namespace attnzoo::cuda_linear
