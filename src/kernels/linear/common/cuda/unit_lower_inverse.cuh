#pragma once
// T = (I + A)^-1 for a strictly lower A of C x C (C a multiple of 16), in f32 shared memory: the inverse that the
// delta rule's and RWKV-7's chunked intra passes both build their W and U from (A = diag(beta) K K^T . Gamma
// there, -A_ab here). By 16 x 16 blocks: the diagonal blocks first (column j of a block solves its unit lower
// system alone, one thread per column), then block rows in order, T_IJ = -T_II sum_{J <= M < I} A_IM T_MJ, every
// element of a block row in parallel. The serial path is ~6 C instead of C^2 / 2 for one thread per column of the
// whole T. Reads only A's lower blocks; writes T's lower blocks (right of the diagonal blocks stays as it was).
#include "kernels/linear/common/cuda/delta_chunk_launch.h"
#include "kernels/softmax/cuda/sm80.cuh"

namespace attnzoo::cuda_delta_chunk {

// A, T: [C x C], row pitch C; X: [16 x C] scratch. Every thread of the CTA calls it; T is complete on return.
template <int C>
__device__ __forceinline__ void unit_lower_inverse(const float* A, float* T, float* X) {
  constexpr int kBlocks = C / 16;
  const int tid = sm80::thread_index();
  if (tid < C) {
    const int j = tid, i0 = j / 16 * 16;
    for (int i = i0; i < i0 + 16; ++i) {
      float x = i == j ? 1.f : 0.f;
      for (int m = j; m < i; ++m) x = fmaf(-A[i * C + m], T[m * C + j], x);
      T[i * C + j] = x;
    }
  }
  sm80::sync_threads();
  for (int I = 1; I < kBlocks; ++I) {
    const int width = I * 16;  // the block row's columns left of its diagonal block
    for (int x = tid; x < 16 * width; x += kThreads) {
      const int r = x / width, c = x % width, i = I * 16 + r;
      float acc = 0.f;
      for (int m = c / 16 * 16; m < I * 16; ++m) acc = fmaf(A[i * C + m], T[m * C + c], acc);
      X[r * C + c] = acc;
    }
    sm80::sync_threads();
    for (int x = tid; x < 16 * width; x += kThreads) {
      const int r = x / width, c = x % width, i = I * 16 + r;
      float acc = 0.f;
      for (int q = 0; q <= r; ++q) acc = fmaf(T[i * C + I * 16 + q], X[q * C + c], acc);
      T[i * C + c] = -acc;
    }
    sm80::sync_threads();
  }
}

}  // namespace attnzoo::cuda_delta_chunk
