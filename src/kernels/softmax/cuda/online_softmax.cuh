#pragma once
// FlashAttention's online-softmax step over one key tile held in mma.m16n8k16 C fragments, shared by the prefill
// tile and the decode chunk. Each thread holds two query rows (g and g+8): their scores sc[nb][e] for key
// n-block nb (elements 2r, 2r+1 belong to row r) and their output accumulators acc[nd][e] the same way; the four
// threads of a row (lanes 4g .. 4g+3) agree on its new running max by two shuffles.
#include "kernels/softmax/cuda/sm80.cuh"

namespace attnzoo::sm80 {

// Raises row_max to this tile's, rescales what row_sum kept, and turns the scores (already in log2 units) into
// their exp2 weights, added to row_sum. alpha is what the output accumulators must be scaled by: the Hopper
// kernel applies it later, once the previous tile's P V (still in flight now) has landed.
template <int KeyBlocks>
__device__ __forceinline__ void online_softmax_weights(float (&sc)[KeyBlocks][4], float (&row_max)[2],
                                                       float (&row_sum)[2], float (&alpha)[2]) {
  float m_use[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float m = row_max[r];
#pragma unroll
    for (int nb = 0; nb < KeyBlocks; ++nb) m = fmaxf(m, fmaxf(sc[nb][2 * r], sc[nb][2 * r + 1]));
    m = fmaxf(m, shfl_xor(m, 1));
    m = fmaxf(m, shfl_xor(m, 2));
    // A row that has seen nothing yet keeps max -inf; subtracting 0 instead keeps exp2 at 0 rather than NaN.
    m_use[r] = m == -INFINITY ? 0.f : m;
    alpha[r] = exp2_approx(row_max[r] - m_use[r]);
    row_max[r] = m;
    row_sum[r] *= alpha[r];
  }
#pragma unroll
  for (int nb = 0; nb < KeyBlocks; ++nb) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      sc[nb][e] = exp2_approx(sc[nb][e] - m_use[e / 2]);
      row_sum[e / 2] += sc[nb][e];
    }
  }
}

template <int DimBlocks>
__device__ __forceinline__ void rescale_rows(float (&acc)[DimBlocks][4], const float (&alpha)[2]) {
#pragma unroll
  for (int nd = 0; nd < DimBlocks; ++nd) {
    acc[nd][0] *= alpha[0];
    acc[nd][1] *= alpha[0];
    acc[nd][2] *= alpha[1];
    acc[nd][3] *= alpha[1];
  }
}

// Both at once, for kernels whose accumulators are in their registers already.
template <int KeyBlocks, int DimBlocks>
__device__ __forceinline__ void online_softmax_step(float (&sc)[KeyBlocks][4], float (&acc)[DimBlocks][4],
                                                    float (&row_max)[2], float (&row_sum)[2]) {
  float alpha[2];
  online_softmax_weights(sc, row_max, row_sum, alpha);
  rescale_rows(acc, alpha);
}

}  // namespace attnzoo::sm80
