#pragma once
// Kernel 3 of the chunked gated linear recurrence (gla_chunk_cuda.h): per (chunk, value head), with h the state
// before the chunk from the state pass,
//   o = exp(G) . (Q h) + P V,   P = tril(Q K^T . Gamma) (diagonal included),  Q = phi(q) scale,  K = phi(k)
// which is the delta rule's output kernel (delta_chunk_output.cuh) with V in place of v_new and the feature map
// applied as q and k are staged: exp(G_i) <= 1 scales the accumulator rows of Q h, Gamma_ij = exp(G_i - G_j) <= 1
// the f32 scores before they are rounded for the second product; GLA (G per key channel) takes P from
// channel_gram and stages Q . exp(G) as a second tile for Q h; with shared_keys Q K^T comes formed once per key
// head from the keys kernel (gla_chunk_keys.cuh), and so does phi(Q) scale in bf16. Mamba-2's SSD adds its D skip
// and z gate as o is stored.
#include "kernels/linear/common/cuda/delta_chunk_output.cuh"
#include "kernels/linear/common/cuda/gla_chunk_tiles.cuh"

namespace attnzoo::cuda_gla_chunk {

// Mamba-2's y = o + D x, then y *= silu(z), as each element is stored (x is the raw v: V holds dt' x).
struct SsdEpilogue {
  const Params& p;
  __device__ __forceinline__ float operator()(int64_t row, int hv, int col, float y) const {
    const SsdParams& s = p.ssd;
    const int64_t at = (row * p.HV + hv) * p.V + col;
    if (s.D)
      y += cuda_linear::load_elem(s.D, s.D_t, s.D_per_channel ? int64_t(hv) * p.V + col : hv) *
           cuda_linear::load_elem(p.v, p.v_t, at);
    if (s.z) {
      const float z = cuda_linear::load_elem(s.z, s.z_t, at);
      y *= z / (1.f + expf(-z));
    }
    return y;
  }
};

// V staged from the inputs (dt' v for the SSD, as the prep forms it), a warp per row: with shared_keys the prep
// keeps only the decayed values for the state pass, and reading v here costs no more than reading its bf16 copy.
struct InputValues {
  const Params& p;
  __device__ __forceinline__ void operator()(Bf16* dst, int ld, int64_t /*c_hv*/, int C, const ChunkDesc& ch,
                                             int hv) const {
    const int lane = sm80::thread_index() % 32, warp = sm80::thread_index() / 32;
    const int64_t first = (ch.row * p.HV + hv) * p.V, stride = int64_t(p.HV) * p.V;
    for (int i = warp; i < C; i += kWarps) {
      const bool in = i < ch.len;
      const float dt = in && p.ssd.dt ? ssd_step(p.ssd, (ch.row + i) * p.HV + hv, hv) : 1.f;
      for (int col = lane; col < p.Vp; col += 32)
        dst[i * ld + col] = __float2bfloat16_rn(
            in && col < p.V ? cuda_linear::load_elem(p.v, p.v_t, first + i * stride + col) * dt : 0.f);
    }
  }
};

template <int C, class Values>
__device__ __forceinline__ void gla_chunk_output(const Params& p, const Values& values, unsigned char* smem) {
  const float* scores = p.shared_keys ? p.scores : nullptr;
  const uint16_t* queries = p.shared_keys ? p.qb : nullptr;
  const FeatureMapFn phi{p.feature_map};
  if (p.ssd.dt)
    cuda_delta_chunk::chunk_output<C>(p, values, scores, queries, /*l2norm=*/false, phi, smem, SsdEpilogue{p});
  else
    cuda_delta_chunk::chunk_output<C>(p, values, scores, queries, /*l2norm=*/false, phi, smem);
}

template <int C>
__device__ __forceinline__ void gla_chunk_output(const Params& p, unsigned char* smem) {
  if (p.shared_keys)
    gla_chunk_output<C>(p, InputValues{p}, smem);
  else
    gla_chunk_output<C>(p, cuda_delta_chunk::ScratchValues{p.vb, p.Vp}, smem);
}

}  // namespace attnzoo::cuda_gla_chunk
