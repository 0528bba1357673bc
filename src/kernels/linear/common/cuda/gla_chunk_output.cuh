#pragma once
// Kernel 3 of the chunked gated linear recurrence (gla_chunk_cuda.h): per (chunk, value head), with h the state
// before the chunk from the state pass,
//   o = exp(G) . (Q h) + P V,   P = tril(Q K^T . Gamma) (diagonal included),  Q = phi(q) scale,  K = phi(k)
// which is the delta rule's output kernel (delta_chunk_output.cuh) with V in place of v_new and the feature map
// applied as q and k are staged: exp(G_i) <= 1 scales the accumulator rows of Q h, Gamma_ij = exp(G_i - G_j) <= 1
// the f32 scores before they are rounded for the second product; GLA (G per key channel) takes P from
// channel_gram and stages Q . exp(G) as a second tile for Q h.
#include "kernels/linear/common/cuda/delta_chunk_output.cuh"
#include "kernels/linear/common/cuda/gla_chunk_tiles.cuh"

namespace attnzoo::cuda_gla_chunk {

template <int C>
__device__ __forceinline__ void gla_chunk_output(const Params& p, unsigned char* smem) {
  cuda_delta_chunk::chunk_output<C>(p, p.vb, /*l2norm=*/false, FeatureMapFn{p.feature_map}, smem);
}

}  // namespace attnzoo::cuda_gla_chunk
