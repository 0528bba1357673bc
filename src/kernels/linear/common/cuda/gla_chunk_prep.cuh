#pragma once
// Kernel 1 of the chunked gated linear recurrence (gla_chunk_cuda.h): per (chunk, value head), what the
// sequential state pass would otherwise wait on. With G the cumulative log decay of the chunk (g plus g_gamma
// per head, or g per key channel; summed in f32 in token order, as the CPU kernels sum it):
//   G for the output kernel;   Kd = phi(K) exp(G_last - G) (bf16);   V (bf16);   exp(G_last) per state row
// (for Mamba-2's SSD the per-head G sums A dt' and V is dt' x, dt' formed here from dt: gla_chunk_launch.h)
// rows past the chunk's tokens zero, so they add exact zeros to the state. With shared_keys the keys kernel forms
// phi(K) once per key head and the decay goes onto the values instead: only each row's factor
// exp(G_last - G) (dt' exp(G_last - G) for the SSD) is written, and the state pass forms Vd = V . factor from v
// itself as it stages the chunk (Kd^T V = phi(K)^T Vd either way): a bf16 copy of the values written here and read
// back there would move twice the bytes of reading v once. The state pass has no exp on its sequential path.
#include <cstdint>

#include "kernels/linear/common/cuda/gla_chunk_tiles.cuh"

namespace attnzoo::cuda_gla_chunk {

// sG: [C] f32 (scalar), [C x Kp] (channel) or [2][C] (SSD: G, then the steps dt') shared scratch.
template <int C>
__device__ __forceinline__ void gla_chunk_prep(const Params& p, float* sG) {
  const bool channel = p.channel, decays = p.G != nullptr, ssd = p.ssd.dt != nullptr;
  float* sDt = sG + C;
  const int tid = sm80::thread_index();
  const int64_t c_hv = blockIdx.x;
  const int hv = int(c_hv % p.HV);
  const ChunkDesc ch = p.chunks[c_hv / p.HV];
  const int h = hv / p.group, len = ch.len;

  if (decays && channel) {
    for (int e = tid; e < C * p.Kp; e += kThreads) {
      const int i = e / p.Kp, c = e % p.Kp;
      sG[e] = i < len && c < p.K ? cuda_linear::load_elem(p.g, p.g_t, ((ch.row + i) * p.HV + hv) * p.K + c) : 0.f;
    }
  } else if (ssd && tid < C) {
    const float dt = tid < len ? ssd_step(p.ssd, (ch.row + tid) * p.HV + hv, hv) : 0.f;
    sDt[tid] = dt;
    sG[tid] = cuda_linear::load_elem(p.ssd.A, p.ssd.A_t, hv) * dt;
  } else if (decays && tid < C) {
    const int64_t at = (ch.row + tid) * p.HV + hv;
    sG[tid] = tid >= len ? 0.f : (p.g ? cuda_linear::load_elem(p.g, p.g_t, at) : 0.f) + (p.g_gamma ? p.g_gamma[hv] : 0.f);
  }
  sm80::sync_threads();
  if (decays && channel) {
    if (tid < p.Kp) {
      float G = 0.f;
      for (int i = 0; i < C; ++i) sG[i * p.Kp + tid] = G += sG[i * p.Kp + tid];
    }
  } else if (decays && tid == 0) {
    float G = 0.f;
    for (int i = 0; i < C; ++i) sG[i] = G += sG[i];
  }
  sm80::sync_threads();
  if (decays && channel) {
    for (int e = tid; e < len * p.K; e += kThreads) {
      const int i = e / p.K, c = e % p.K;
      p.G[((ch.row + i) * p.HV + hv) * p.K + c] = sG[i * p.Kp + c];
    }
  } else if (decays && tid < len) {
    p.G[(ch.row + tid) * p.HV + hv] = sG[tid];
  }

  float* decay = p.decay + c_hv * p.Kp;
  for (int c = tid; c < p.Kp; c += kThreads)
    decay[c] = !decays ? 1.f : expf(channel ? (c < p.K ? sG[(len - 1) * p.Kp + c] : 0.f) : sG[len - 1]);

  // Rows past len hold G_last (nothing added), so their factor would be 1; the zero keys keep them out.
  const FeatureMapFn phi{p.feature_map};
  Bf16* kd = reinterpret_cast<Bf16*>(p.kd) + c_hv * kd_elems(C, p.Kp);
  const int64_t k_first = (ch.row * p.H + h) * p.K, k_stride = int64_t(p.H) * p.K;
  for (int e = tid; e < (p.shared_keys ? 0 : C * p.Kp); e += kThreads) {
    const int i = e / p.Kp, c = e % p.Kp;
    float x = 0.f;
    if (i < len && c < p.K) {
      x = phi(cuda_linear::load_elem(p.k, p.k_t, k_first + i * k_stride + c));
      if (decays) x *= channel ? expf(sG[(len - 1) * p.Kp + c] - sG[i * p.Kp + c]) : expf(sG[len - 1] - sG[i]);
    }
    kd[e] = __float2bfloat16_rn(x);
  }
  // With shared_keys the state pass and the output kernel stage V from the inputs themselves
  // (gla_chunk_state.cuh, gla_chunk_output.cuh): only the rows' factors are kept.
  if (p.shared_keys) {
    float* vscale = p.vscale + c_hv * C;
    if (tid < C)
      vscale[tid] = tid >= len ? 0.f : (ssd ? sDt[tid] : 1.f) * (decays ? expf(sG[len - 1] - sG[tid]) : 1.f);
    return;
  }
  Bf16* vb = reinterpret_cast<Bf16*>(p.vb) + c_hv * v_elems(C, p.Vp);
  const int64_t v_first = (ch.row * p.HV + hv) * p.V, v_stride = int64_t(p.HV) * p.V;
  for (int e = tid; e < C * p.Vp; e += kThreads) {
    const int i = e / p.Vp, c = e % p.Vp;
    float x = 0.f;
    if (i < len && c < p.V) x = cuda_linear::load_elem(p.v, p.v_t, v_first + i * v_stride + c) * (ssd ? sDt[i] : 1.f);
    vb[e] = __float2bfloat16_rn(x);
  }
}

}  // namespace attnzoo::cuda_gla_chunk
