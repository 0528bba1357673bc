#pragma once
// The chunked gated linear recurrence's keys kernel (gla_chunk_cuda.h), run only with Params::shared_keys: per
// (chunk, key head), what every value head of the key head's group would otherwise form again (Mamba-2's 80 heads
// over one group of B / C):
//   kd = phi(K) (bf16, undecayed: the prep puts each value head's decay on its values instead)
//   qb = phi(Q) scale (bf16), which the output kernel's Q h takes as it is
//   scores = phi(Q) scale phi(K)^T (f32), the 16 x 16 blocks on and below the diagonal
// The output kernel applies each value head's Gamma_ij = exp(G_i - G_j) and the causal mask to the f32 scores, as
// it would to its own, before rounding them for P V. Rows past the chunk's tokens are zero in both.
#include <cstdint>

#include "kernels/linear/common/cuda/gla_chunk_tiles.cuh"

namespace attnzoo::cuda_gla_chunk {

using cuda_delta_chunk::lower_gram_blocks;
using cuda_delta_chunk::One;
using cuda_delta_chunk::stage_rows;

template <int C>
__device__ __forceinline__ void gla_chunk_keys(const Params& p, unsigned char* smem) {
  const int ldk = pitch(p.Kp);
  Bf16* sQ = reinterpret_cast<Bf16*>(smem);
  Bf16* sK = sQ + C * ldk;
  const int tid = sm80::thread_index(), lane = tid % 32, warp = tid / 32;
  const int64_t c_h = blockIdx.x;
  const int h = int(c_h % p.H);
  const ChunkDesc ch = p.chunks[c_h / p.H];
  const int len = ch.len;

  const FeatureMapFn phi{p.feature_map};
  const int64_t qk_first = (ch.row * p.H + h) * p.K, qk_stride = int64_t(p.H) * p.K;
  stage_rows(sQ, ldk, p.q, p.q_t, qk_first, qk_stride, len, C, p.K, p.Kp, /*l2norm=*/false, p.scale, One{}, phi);
  stage_rows(sK, ldk, p.k, p.k_t, qk_first, qk_stride, len, C, p.K, p.Kp, /*l2norm=*/false, 1.f, One{}, phi);
  sm80::sync_threads();

  // The state pass reads kd and the output kernel qb with cp.async, 16 bytes at a time: rows of Kp (a multiple
  // of 16) bf16 elements.
  uint16_t* kd = p.kd + c_h * kd_elems(C, p.Kp);
  uint16_t* qb = p.qb + c_h * kd_elems(C, p.Kp);
  const int pieces = p.Kp / 8;
  for (int x = tid; x < C * pieces; x += kThreads) {
    const int r = x / pieces, c = x % pieces * 8;
    *reinterpret_cast<uint4*>(kd + r * p.Kp + c) = *reinterpret_cast<const uint4*>(sK + r * ldk + c);
    *reinterpret_cast<uint4*>(qb + r * p.Kp + c) = *reinterpret_cast<const uint4*>(sQ + r * ldk + c);
  }

  float* scores = p.scores + c_h * int64_t(C) * C;
  lower_gram_blocks<C>(sQ, sK, ldk, p.Kp, warp, lane, [&](int i, int j, float x0, float x1) {
    *reinterpret_cast<float2*>(scores + i * C + j) = make_float2(x0, x1);
  });
}

}  // namespace attnzoo::cuda_gla_chunk
