#pragma once
// The decayed Gram matrices of chunked RWKV-7 (rwkv7_chunk_intra.cuh): the queries q and the low-rank reads a
// against the keys k and b, each pair of tokens with the per-channel decay between them,
//   A_qk[i][j] = sum_c q_ic k_jc e^{G_ic - G_jc} (j <= i)     A_ak[i][j] = sum_c a_ic k_jc e^{G_(i-1)c - G_jc} (j < i)
//   A_qb[i][j] = sum_c q_ic b_jc e^{G_ic - G_jc} (j <= i)     A_ab[i][j] = sum_c a_ic b_jc e^{G_(i-1)c - G_jc} (j < i)
// (a reads the state before its own token: G_{i-1}). The decay cannot be applied after the product, and e^{G_i}
// e^{-G_j} taken apart would overflow (w = -8 over 64 tokens is e^{-512}), so, as the KDA Gram
// (common/cuda/delta_chunk_gram.cuh):
//   * every block by 16-row sub-chunks with the reference R = G_{r0 - 1} (r0 the sub-chunk's first row, G_{-1} = 0):
//     M_ij = (x_i e^{Gx_i - R}) . (y_j e^{R - G_j}), one tensor-core product per block; the right factors of k and
//     b serve q and a alike. Left of the diagonal (j < r0) both factors are <= 1 (G is non-increasing, so G_i and
//     G_{i-1} are <= G_{r0 - 1} for i >= r0, and G_{r0 - 1} <= G_j for j < r0).
//   * the diagonal block also goes to the tensor cores when its decay span (the largest G_{r0 - 1} - G_{r0 + 15}
//     over the channels) is at most kTensorCoreSpan: its right factors then stay below e^60 and its left ones
//     above e^-60, well inside bf16's and f32's range (e^+-88), and the products are the entries themselves
//     (those right of the diagonal, masked by put, at most e^60 too). RWKV-7's models decay at most 0.61 per
//     token (a span under 10), so they always take this path;
//   * a diagonal block with a larger span is summed per element in f32 with e^{Gx_ic - G_jc} <= 1 per channel,
//     each exponential shared by the k and b sums.
// Channels past K must hold zeros in every tile and in G.
#include <cstdint>

#include "kernels/linear/common/cuda/delta_chunk_mma.cuh"
#include "kernels/linear/rwkv7/cuda/rwkv7_chunk_launch.h"

namespace attnzoo::cuda_rwkv7_chunk {

using cuda_delta_chunk::acc_col;
using cuda_delta_chunk::acc_row;
using cuda_delta_chunk::Bf16;
using cuda_delta_chunk::gram_block;

constexpr float kTensorCoreSpan = 60.f;

// The four matrices, numbered m = 0 A_qk, 1 A_qb, 2 A_ak, 3 A_ab: calls put(m, i, j, value) for every element of
// their lower 16 x 16 blocks; diagonal blocks come whole and put masks what lies right of the diagonal (and on it
// for A_ak and A_ab, whose diagonal entries the per-element path leaves 0). q, a, k, b: [C x Kp] bf16 tiles with
// pitch ld; G0: [C + 1, Kp] f32, row i holding G_{i-1} (row 0 zeros); left [32 x ld], right [C x ld] bf16 scratch
// (q's and a's rows of one sub-chunk; k's, then b's decayed rows up to it: one at a time, so that RWKV-7's blocks
// stay within 99 KB of shared memory); on_cores [C / 16] shared ints. Ends with a barrier: put's writes are
// visible, the scratch free again.
template <int C, class Put>
__device__ __forceinline__ void decayed_grams(const Bf16* q, const Bf16* a, const Bf16* k, const Bf16* b, int ld,
                                              const float* G0, int Kp, int K, Bf16* left, Bf16* right,
                                              int* on_cores, const Put& put) {
  const int tid = sm80::thread_index(), lane = tid % 32, warp = tid / 32;
  const float* G = G0 + Kp;  // row i: G_i
  if (tid < C / 16) {
    const int r0 = tid * 16;
    float span = 0.f;
    for (int c = 0; c < Kp; ++c) span = fmaxf(span, G0[r0 * Kp + c] - G[(r0 + 15) * Kp + c]);
    on_cores[tid] = span <= kTensorCoreSpan;
  }
  sm80::sync_threads();
  for (int e = tid; e < C * 16; e += kThreads) {
    const int i = e / 16, j = i / 16 * 16 + e % 16;
    if (on_cores[i / 16]) continue;
    float qk = 0.f, qb = 0.f, ak = 0.f, ab = 0.f;
    if (j <= i)
      for (int c = 0; c < K; ++c) {
        const float kj = __bfloat162float(k[j * ld + c]), bj = __bfloat162float(b[j * ld + c]);
        const float qd = __bfloat162float(q[i * ld + c]) * expf(G[i * Kp + c] - G[j * Kp + c]);
        qk = fmaf(qd, kj, qk);
        qb = fmaf(qd, bj, qb);
        if (j < i) {
          const float ad = __bfloat162float(a[i * ld + c]) * expf(G0[i * Kp + c] - G[j * Kp + c]);
          ak = fmaf(ad, kj, ak);
          ab = fmaf(ad, bj, ab);
        }
      }
    put(0, i, j, qk);
    put(1, i, j, qb);
    put(2, i, j, ak);
    put(3, i, j, ab);
  }
  for (int rb = 0; rb < C / 16; ++rb) {
    const int r0 = rb * 16, cols = r0 + (on_cores[rb] ? 16 : 0);  // the same for every thread
    if (cols == 0) continue;
    const float* R = G0 + r0 * Kp;  // G_{r0 - 1}
    for (int e = tid; e < 32 * Kp; e += kThreads) {
      const int r = e / Kp, c = e % Kp, i = r0 + r % 16;
      const bool is_q = r < 16;
      const float x = __bfloat162float((is_q ? q : a)[i * ld + c]);
      left[r * ld + c] = __float2bfloat16_rn(x * expf((is_q ? G : G0)[i * Kp + c] - R[c]));
    }
    for (int y = 0; y < 2; ++y) {
      const Bf16* yt = y == 0 ? k : b;
      for (int e = tid; e < cols * Kp; e += kThreads) {
        const int j = e / Kp, c = e % Kp;
        right[j * ld + c] = __float2bfloat16_rn(__bfloat162float(yt[j * ld + c]) * expf(R[c] - G[j * Kp + c]));
      }
      sm80::sync_threads();
      // Tasks: (left half x: q or a) x (column block).
      for (int task = warp; task < 2 * (cols / 16); task += kWarps) {
        const int x = task % 2, cb = task / 2;
        float acc[2][4];
        gram_block(acc, left, x * 16, right, cb * 16, ld, Kp, lane);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            put(2 * x + y, r0 + acc_row(lane, e), cb * 16 + acc_col(lane, nt, e), acc[nt][e]);
      }
      sm80::sync_threads();
    }
  }
  sm80::sync_threads();  // the per-element puts, where no sub-chunk above ended with a barrier
}

}  // namespace attnzoo::cuda_rwkv7_chunk
