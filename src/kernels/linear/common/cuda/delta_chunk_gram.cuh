#pragma once
// KDA's decayed Gram matrices inside a chunk (the intra kernel's A, the output kernel's scores): with one log
// decay per key channel, M_ij = sum_c x_ic y_jc exp(G_ic - G_jc) cannot be a plain product scaled afterwards.
//   * Blocks left of the diagonal, by 16-row sub-chunks: with the reference R = G_{r0 - 1} (r0 the sub-chunk's
//     first row; G is non-increasing down the chunk), M_ij = (x_i exp(G_i - R)) . (y_j exp(R - G_j)) for j < r0,
//     one tensor-core product per block with both factors <= 1 (exp(G_i) exp(-G_j) would overflow: G reaches
//     -20 per token).
//   * Diagonal blocks: each element summed in f32 with exp(G_ic - G_jc) <= 1 (j <= i) taken per channel.
// Channels past K must hold zeros in x, y and G.
#include <cstdint>

#include "kernels/linear/common/cuda/delta_chunk_mma.cuh"

namespace attnzoo::cuda_delta_chunk {

// Calls put(i, j, M_ij) for every element of the lower 16 x 16 blocks (diagonal blocks whole: put masks the
// upper half). x, y: [C x Kp] bf16 tiles with pitch ld; G: [C x Kp] f32; left: [16 x ld], right: [C x ld] bf16
// scratch tiles. Ends with a barrier: put's writes are visible, and the scratch tiles are free again.
template <int C, class Put>
__device__ __forceinline__ void channel_gram(const Bf16* x, const Bf16* y, int ld, const float* G, int Kp, int K,
                                             Bf16* left, Bf16* right, const Put& put) {
  const int tid = sm80::thread_index(), lane = tid % 32, warp = tid / 32;
  for (int e = tid; e < C * 16; e += kThreads) {
    const int i = e / 16, j = i / 16 * 16 + e % 16;
    float acc = 0.f;
    if (j <= i)
      for (int c = 0; c < K; ++c)
        acc = fmaf(__bfloat162float(x[i * ld + c]) * __bfloat162float(y[j * ld + c]), expf(G[i * Kp + c] - G[j * Kp + c]),
                   acc);
    put(i, j, acc);
  }
  for (int rb = 1; rb < C / 16; ++rb) {
    const int r0 = rb * 16;
    const float* R = G + (r0 - 1) * Kp;
    for (int e = tid; e < 16 * Kp; e += kThreads) {
      const int r = e / Kp, c = e % Kp, i = r0 + r;
      left[r * ld + c] = __float2bfloat16_rn(__bfloat162float(x[i * ld + c]) * expf(G[i * Kp + c] - R[c]));
    }
    for (int e = tid; e < r0 * Kp; e += kThreads) {
      const int j = e / Kp, c = e % Kp;
      right[j * ld + c] = __float2bfloat16_rn(__bfloat162float(y[j * ld + c]) * expf(R[c] - G[j * Kp + c]));
    }
    sm80::sync_threads();
    for (int cb = warp; cb < rb; cb += kWarps) {
      float acc[2][4];
      gram_block(acc, left, 0, right, cb * 16, ld, Kp, lane);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) put(r0 + acc_row(lane, e), cb * 16 + acc_col(lane, nt, e), acc[nt][e]);
    }
    sm80::sync_threads();
  }
  if (C == 16) sm80::sync_threads();
}

}  // namespace attnzoo::cuda_delta_chunk
