#pragma once
// Device side of the recurrences' work split (recurrent_split.h): which unit a thread works for, and its state
// column read before the first token and written after the last.
#include <cstdint>

#include "kernels/linear/common/cuda/recurrent_split.h"

namespace attnzoo::cuda_linear {

// What thread threadIdx.x works on. The CTA's `units` units take equal runs of its threads; units are numbered
// slices fastest, then heads, then sequences, CTA blockIdx.x holding units [blockIdx.x units, + units).
struct RecurrentCta {
  int unit;              // the thread's unit within the CTA
  int base;              // the unit's first thread in the CTA: its share of the per-thread staging starts there
  int tid;               // the thread within its unit
  bool live;             // the unit exists (the last CTA's tail may not)
  int64_t n;             // sequence
  int head;              // the state's head (the value head where they differ)
  int slice;             // which kCols columns
  int col;               // the thread's state column
  bool has_col;          // live and col < V
  int row0;              // the warp's first state row
  int64_t begin, length;  // the sequence's token rows (length 0 for a unit that is not live)
  int64_t steps;         // the longest length among the CTA's units: the token loop every thread runs

  // A padded batch row's unit (a negative state row): it keeps the CTA's barriers and touches nothing.
  __device__ __forceinline__ void idle() { live = has_col = false, length = 0; }
};

__device__ __forceinline__ int64_t sequence_length(int64_t n, int64_t T, const int64_t* seq_offsets) {
  return seq_offsets ? seq_offsets[n + 1] - seq_offsets[n] : T;
}

// `total` units of which each CTA holds `units`, warps of `rows` state rows. The CTA's units share its barriers, so
// all of its threads run `steps` tokens in lockstep (a decode step's units all have one; a packed prefill's short
// sequences idle).
__device__ __forceinline__ RecurrentCta recurrent_cta(int rows, int units, int64_t total, int slices, int heads,
                                                      int V, int64_t T, const int64_t* seq_offsets) {
  RecurrentCta c;
  const int unit_threads = int(blockDim.x) / units;
  c.unit = int(threadIdx.x) / unit_threads;
  c.base = c.unit * unit_threads;
  c.tid = int(threadIdx.x) - c.base;
  const int64_t first = int64_t(blockIdx.x) * units;
  int64_t u = first + c.unit;
  c.live = u < total;
  if (!c.live) u = first;  // a well-formed unit to name; nothing of it is touched
  c.slice = int(u % slices);
  u /= slices;
  c.head = int(u % heads);
  c.n = u / heads;
  c.col = c.slice * kCols + c.tid % 32;
  c.has_col = c.live && c.col < V;
  c.row0 = c.tid / 32 * rows;
  c.begin = c.n * T, c.length = T;
  if (seq_offsets) c.begin = seq_offsets[c.n], c.length = seq_offsets[c.n + 1] - c.begin;
  if (!c.live) c.length = 0;
  c.steps = c.length;
  // Every thread finds the same maximum, over at most kMaxUnits lengths.
  for (int i = 0; i < units && first + i < total; ++i) {
    const int64_t l = sequence_length((first + i) / (int64_t(slices) * heads), T, seq_offsets);
    if (l > c.steps) c.steps = l;
  }
  return c;
}

// s <- rows row0.. of the column at `state` (rows V apart, K of them), zeros where there is no state or column.
template <int kRows>
__device__ __forceinline__ void load_state_column(float (&s)[kRows], const float* state, int K, int V,
                                                  const RecurrentCta& c) {
  // The pointer moved to the slice's first row once and each row's offset tested against the rows left: testing
  // row0 + j < K made ptxas keep all the row indices live while the loads were in flight, which at 128 registers
  // spilled RWKV-7's 32-row kernel (12 / 20 bytes on sm_80 / sm_90a).
  const int rows = K - c.row0;
  if (state) state += int64_t(c.row0) * V;
#pragma unroll
  for (int j = 0; j < kRows; ++j) s[j] = state && c.has_col && j < rows ? state[int64_t(j) * V] : 0.f;
}

template <int kRows>
__device__ __forceinline__ void store_state_column(const float (&s)[kRows], float* state, int K, int V,
                                                   const RecurrentCta& c) {
  if (!state || !c.has_col) return;
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    const int r = c.row0 + j;
    if (r < K) state[int64_t(r) * V] = s[j];
  }
}

}  // namespace attnzoo::cuda_linear
