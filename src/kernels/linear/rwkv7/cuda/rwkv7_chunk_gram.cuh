#pragma once
// The decayed Gram matrices of chunked RWKV-7 (rwkv7_chunk_intra.cuh): one row tile x against two column tiles
// y1, y2 (q against k and b, a against k and b), each pair of tokens with the per-channel decay between them,
//   M_ij = sum_c x_ic y_jc e^{Gx_ic - Gy_jc}
// where Gy is the cumulative log decay G_j and Gx is G_i (for q) or G_{i-1} (for a, which reads the state before
// its own token). The decay cannot be applied after the product, and e^{Gx_i} e^{-Gy_j} taken apart would
// overflow (w = -8 over 64 tokens is e^{-512}), so, as the KDA Gram (common/cuda/delta_chunk_gram.cuh):
//   * every block by 16-row sub-chunks with the reference R = G_{r0 - 1} (r0 the sub-chunk's first row, G_{-1} = 0):
//     M_ij = (x_i e^{Gx_i - R}) . (y_j e^{R - Gy_j}), one tensor-core product per block. Left of the diagonal
//     (j < r0) both factors are <= 1 (G is non-increasing, and Gx_i <= G_{r0 - 1} for i >= r0 in both cases).
//   * the diagonal block also goes to the tensor cores when its decay span (the largest G_{r0 - 1} - G_{r0 + 15}
//     over the channels) is at most kTensorCoreSpan: its right factors e^{R - Gy_j} stay below e^60 and its left
//     ones above e^-60, well inside bf16's and f32's range (e^+-88), and the products are the entries themselves
//     (those right of the diagonal, masked by put, at most e^60 too). RWKV-7's models decay at most 0.61 per token
//     (a span under 10), so they always take this path;
//   * a diagonal block with a larger span is summed per element in f32 with e^{Gx_ic - Gy_jc} <= 1 (j <= i, j < i
//     for a) per channel, the exponential shared by the two column tiles.
// Channels past K must hold zeros in x, y1, y2 and both decays.
#include <cstdint>

#include "kernels/linear/common/cuda/delta_chunk_mma.cuh"
#include "kernels/linear/rwkv7/cuda/rwkv7_chunk_launch.h"

namespace attnzoo::cuda_rwkv7_chunk {

using cuda_delta_chunk::acc_col;
using cuda_delta_chunk::acc_row;
using cuda_delta_chunk::Bf16;
using cuda_delta_chunk::load_a;
using cuda_delta_chunk::load_b_nk;
using cuda_delta_chunk::mma_16x16;
using cuda_delta_chunk::zero;

constexpr float kTensorCoreSpan = 60.f;

// Calls put(m, i, j, M_ij) for both matrices (m = 0 for y1, 1 for y2) and every element of the lower 16 x 16
// blocks; diagonal blocks come whole, and put masks what lies right of the diagonal (and on it for a strict
// matrix, whose diagonal entries the per-element path leaves 0). x, y1, y2: [C x Kp] bf16 tiles with pitch ld;
// Gx, Gy: [C x Kp] f32, with Gy's row -1 readable and zero (G_{-1}); left [16 x ld], right [C x ld] bf16 scratch
// (y1's, then y2's decayed rows of one sub-chunk: one at a time, so that RWKV-7's blocks stay within 99 KB of
// shared memory); on_cores [C / 16] shared ints. Ends with a barrier: put's writes are visible, the scratch free
// again.
template <int C, class Put>
__device__ __forceinline__ void decayed_gram(const Bf16* x, const Bf16* y1, const Bf16* y2, int ld, const float* Gx,
                                             const float* Gy, int Kp, int K, bool strict, Bf16* left, Bf16* right,
                                             int* on_cores, const Put& put) {
  const int tid = sm80::thread_index(), lane = tid % 32, warp = tid / 32;
  if (tid < C / 16) {
    const int r0 = tid * 16;
    float span = 0.f;
    for (int c = 0; c < Kp; ++c) span = fmaxf(span, Gy[(r0 - 1) * Kp + c] - Gy[(r0 + 15) * Kp + c]);
    on_cores[tid] = span <= kTensorCoreSpan;
  }
  sm80::sync_threads();
  for (int e = tid; e < C * 16; e += kThreads) {
    const int i = e / 16, j = i / 16 * 16 + e % 16;
    if (on_cores[i / 16]) continue;
    float m1 = 0.f, m2 = 0.f;
    if (strict ? j < i : j <= i)
      for (int c = 0; c < K; ++c) {
        const float xd = __bfloat162float(x[i * ld + c]) * expf(Gx[i * Kp + c] - Gy[j * Kp + c]);
        m1 = fmaf(xd, __bfloat162float(y1[j * ld + c]), m1);
        m2 = fmaf(xd, __bfloat162float(y2[j * ld + c]), m2);
      }
    put(0, i, j, m1);
    put(1, i, j, m2);
  }
  for (int rb = 0; rb < C / 16; ++rb) {
    const int r0 = rb * 16, cols = r0 + (on_cores[rb] ? 16 : 0);  // the same for every thread
    if (cols == 0) continue;
    const float* R = Gy + (r0 - 1) * Kp;
    for (int e = tid; e < 16 * Kp; e += kThreads) {
      const int r = e / Kp, c = e % Kp, i = r0 + r;
      left[r * ld + c] = __float2bfloat16_rn(__bfloat162float(x[i * ld + c]) * expf(Gx[i * Kp + c] - R[c]));
    }
    for (int m = 0; m < 2; ++m) {
      const Bf16* y = m == 0 ? y1 : y2;
      for (int e = tid; e < cols * Kp; e += kThreads) {
        const int j = e / Kp, c = e % Kp;
        right[j * ld + c] = __float2bfloat16_rn(__bfloat162float(y[j * ld + c]) * expf(R[c] - Gy[j * Kp + c]));
      }
      sm80::sync_threads();
      for (int cb = warp; cb < cols / 16; cb += kWarps) {
        float acc[2][4];
        zero(acc);
        for (int k0 = 0; k0 < Kp; k0 += 16) {
          uint32_t a[4], b[4];
          load_a(a, left, ld, 0, k0, lane);
          load_b_nk(b, right, ld, k0, cb * 16, lane);
          mma_16x16(acc, a, b);
        }
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) put(m, r0 + acc_row(lane, e), cb * 16 + acc_col(lane, nt, e), acc[nt][e]);
      }
      sm80::sync_threads();
    }
  }
  sm80::sync_threads();  // the per-element puts, where no sub-chunk above ended with a barrier
}

}  // namespace attnzoo::cuda_rwkv7_chunk
