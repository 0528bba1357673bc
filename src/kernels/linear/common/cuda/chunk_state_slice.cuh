#pragma once
// The steps the chunked state passes share (delta_chunk_state.cuh, gla_chunk_state.cuh, rwkv7_chunk_state.cuh): a
// CTA owns one (sequence, value head, slice of kStateCols = 32 state columns) and holds its slice of the f32 state
// h [Kp x 32] in MMA accumulator registers, warp w holding row blocks w and w + 4. What differs between the passes
// is only what a chunk adds to h (Kd^T V for GLA, Kd^T v_new for the delta rule), where the decays come from, and
// whether the chunk reads h first (W h: the delta rule's and RWKV-7's low-rank reads).
#include <cstdint>

#include "kernels/linear/common/cuda/delta_chunk_mma.cuh"

namespace attnzoo::cuda_delta_chunk {

constexpr int kStateBlocks = kMaxDim / 16 / kWarps;  // row blocks of h per warp
constexpr int kStateTiles = kStateCols / 8;          // n-tiles of 8 columns in a slice

// s[i][nt][e]: row (warp + 4 i) 16 + acc_row(e), column col0 + acc_col(nt, e).
using StateRegs = float[kStateBlocks][kStateTiles][4];

// Which slice CTA blockIdx.x owns: slices vary fastest, then value heads, then sequences.
struct StateSlice {
  int64_t n;
  int hv;
  int col0;
};
__device__ __forceinline__ StateSlice state_slice(int Vp, int HV) {
  const int slices = Vp / kStateCols;
  int64_t cta = blockIdx.x;
  const int col0 = int(cta % slices) * kStateCols;
  cta /= slices;
  return {cta / HV, int(cta % HV), col0};
}

// Where sequence n's state starts in a chunked pass's states: row n of the dense [N, ...] block, or with pool
// states (ssm_state_indices) its slot; -1 for a pad, whose passes return at once (they touch neither the pool nor
// the outputs).
__device__ __forceinline__ int64_t sequence_state_at(const int32_t* state_indices, int64_t n, int64_t state_stride) {
  if (!state_indices) return n * state_stride;
  const int32_t slot = state_indices[n];
  return slot < 0 ? -1 : int64_t(slot) * state_stride;
}

// s <- the slice of the state at `state` (element (r, c) at r * row + c * col; rows < K, columns < V), or zeros
// where there is none.
__device__ __forceinline__ void load_state(StateRegs& s, const float* state, int64_t row, int64_t col, int K, int V,
                                           int col0, int warp, int lane) {
#pragma unroll
  for (int i = 0; i < kStateBlocks; ++i)
#pragma unroll
    for (int nt = 0; nt < kStateTiles; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = (warp + kWarps * i) * 16 + acc_row(lane, e), c = col0 + acc_col(lane, nt, e);
        s[i][nt][e] = state && r < K && c < V ? state[r * row + c * col] : 0.f;
      }
}

__device__ __forceinline__ void store_state(const StateRegs& s, float* state, int64_t row, int64_t col, int K, int V,
                                            int col0, int warp, int lane) {
#pragma unroll
  for (int i = 0; i < kStateBlocks; ++i)
#pragma unroll
    for (int nt = 0; nt < kStateTiles; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = (warp + kWarps * i) * 16 + acc_row(lane, e), c = col0 + acc_col(lane, nt, e);
        if (r < K && c < V) state[r * row + c * col] = s[i][nt][e];
      }
}

// The chunk's h (bf16) for the output kernel: rows [0, Kp) of h_out [Kp][Vp] at columns col0..; also into the
// shared tile sh [Kp][lds] when the pass reads h back (the delta rule's W h).
__device__ __forceinline__ void store_h(const StateRegs& s, Bf16* h_out, int Vp, int col0, int Kp, Bf16* sh, int lds,
                                        int warp, int lane) {
#pragma unroll
  for (int i = 0; i < kStateBlocks; ++i) {
    const int rb = warp + kWarps * i;
    if (rb * 16 >= Kp) continue;
#pragma unroll
    for (int nt = 0; nt < kStateTiles; ++nt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = rb * 16 + acc_row(lane, 2 * half), col = acc_col(lane, nt, 0);
        const float x0 = s[i][nt][2 * half], x1 = s[i][nt][2 * half + 1];
        if (sh) put2(sh + r * lds + col, x0, x1);
        sm80::store2(h_out + int64_t(r) * Vp + col0 + col, x0, x1);
      }
  }
}

// W h over the slice, for the passes whose chunk reads the state before updating it: warp w < C / 16 computes the
// token rows [16 w, 16 w + 16) from W [C][ldk] and the chunk's bf16 h [Kp][lds] (store_h's shared tile), and hands
// each lane's pairs to row_pair(i, col, x0, x1): row i, slice columns col and col + 1. Warps past C / 16 idle.
template <int C, class RowPair>
__device__ __forceinline__ void w_times_h(const Bf16* w, int ldk, const Bf16* sh, int lds, int Kp, int warp, int lane,
                                          RowPair row_pair) {
  if (warp >= C / 16) return;
  float acc[kStateTiles / 2][2][4];
#pragma unroll
  for (int q = 0; q < kStateTiles / 2; ++q) zero(acc[q]);
  for (int k0 = 0; k0 < Kp; k0 += 16) {
    uint32_t a[4];
    load_a(a, w, ldk, warp * 16, k0, lane);
#pragma unroll
    for (int q = 0; q < kStateTiles / 2; ++q) {
      uint32_t bb[4];
      load_b_kn(bb, sh, lds, k0, q * 16, lane);
      mma_16x16(acc[q], a, bb);
    }
  }
#pragma unroll
  for (int q = 0; q < kStateTiles / 2; ++q)
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int half = 0; half < 2; ++half)
        row_pair(warp * 16 + acc_row(lane, 2 * half), q * 16 + acc_col(lane, nt, 0), acc[q][nt][2 * half],
                 acc[q][nt][2 * half + 1]);
}

// h <- diag(row_decay) h + Kd^T X over a chunk of C tokens: Kd [C][ldk] and X [C][lds] (the slice's columns) in
// shared memory, row_decay(r) the decay of state row r. The decay multiplies the accumulators before the MMAs
// add to them, so h is read once.
template <int C, class RowDecay>
__device__ __forceinline__ void decay_and_add(StateRegs& s, const Bf16* kd, int ldk, const Bf16* x, int lds, int Kp,
                                              RowDecay row_decay, int warp, int lane) {
#pragma unroll
  for (int i = 0; i < kStateBlocks; ++i) {
    const int rb = warp + kWarps * i;
    if (rb * 16 >= Kp) continue;
    const float decay[2] = {row_decay(rb * 16 + acc_row(lane, 0)), row_decay(rb * 16 + acc_row(lane, 2))};
    float acc[kStateTiles / 2][2][4];
#pragma unroll
    for (int nt = 0; nt < kStateTiles; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[nt / 2][nt % 2][e] = s[i][nt][e] * decay[e / 2];
    for (int kk = 0; kk < C / 16; ++kk) {
      uint32_t a[4];
      load_a_trans(a, kd, ldk, rb * 16, kk * 16, lane);
#pragma unroll
      for (int q = 0; q < kStateTiles / 2; ++q) {
        uint32_t bb[4];
        load_b_kn(bb, x, lds, kk * 16, q * 16, lane);
        mma_16x16(acc[q], a, bb);
      }
    }
#pragma unroll
    for (int nt = 0; nt < kStateTiles; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[i][nt][e] = acc[nt / 2][nt % 2][e];
  }
}

}  // namespace attnzoo::cuda_delta_chunk
