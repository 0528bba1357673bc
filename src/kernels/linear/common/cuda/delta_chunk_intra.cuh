#pragma once
// Kernel 1 of the chunked delta rule (delta_chunk_cuda.h): per (chunk, value head), everything that needs no
// state. With G the cumulative log decay of the chunk (0 without a gate) and rows past the chunk's tokens zero
// (beta = 0, G = G_last: they change nothing):
//   A = strict_tril(diag(beta) K K^T . Gamma)        K K^T on tensor cores, Gamma_ij = exp(G_i - G_j) <= 1
//   T = (I + A)^-1                                   forward substitution in f32 (unit_lower_inverse.cuh)
//   W = (T diag(beta exp(G))) K,  U = (T diag(beta)) V   tensor cores, the diagonal folded into T's columns
//   Kd = K exp(G_last - G)                           the keys decayed to the chunk's end, for the state pass
// Gamma is exp of a difference, never exp(G_i) exp(-G_j): G reaches -20 per token, and exp(-G_j) would
// overflow within a few tokens. KDA (one decay per key channel, G [C x Kp]) takes A from channel_gram and
// W = (T diag(beta)) (K . exp(G)) with the decay on the keys, where it cannot fold into T's columns.
#include <cstdint>

#include "kernels/linear/common/cuda/delta_chunk_gram.cuh"
#include "kernels/linear/common/cuda/delta_chunk_mma.cuh"
#include "kernels/linear/common/cuda/unit_lower_inverse.cuh"

namespace attnzoo::cuda_delta_chunk {

template <int C>
__device__ __forceinline__ void delta_chunk_intra(const Params& p, unsigned char* smem) {
  const bool channel = p.channel;
  const IntraSmem L(C, p.Kp, p.Vp, channel);
  Bf16* sK = reinterpret_cast<Bf16*>(smem + L.k);
  Bf16* sV = reinterpret_cast<Bf16*>(smem + L.v);
  float* sA = reinterpret_cast<float*>(smem + L.a);
  float* sT = reinterpret_cast<float*>(smem + L.t);
  float* sX = reinterpret_cast<float*>(smem + L.x);
  Bf16* sTb = reinterpret_cast<Bf16*>(smem + L.tb);
  Bf16* sTbg = reinterpret_cast<Bf16*>(smem + L.tbg);
  float* sG = reinterpret_cast<float*>(smem + L.G);
  float* sBeta = reinterpret_cast<float*>(smem + L.beta);
  Bf16* sLeft = reinterpret_cast<Bf16*>(smem + L.left);
  Bf16* sRight = reinterpret_cast<Bf16*>(smem + L.right);
  const int ldk = pitch(p.Kp), ldv = pitch(p.Vp), ldc = pitch(C);
  const int tid = sm80::thread_index(), lane = tid % 32, warp = tid / 32;
  const int64_t c_hv = blockIdx.x;  // chunk * HV + value head
  const int hv = int(c_hv % p.HV);
  const ChunkDesc ch = p.chunks[c_hv / p.HV];
  const int h = hv / p.group, len = ch.len;

  if (tid < C) {
    const int64_t at = (ch.row + tid) * p.HV + hv;
    sBeta[tid] = tid >= len ? 0.f : p.beta ? cuda_linear::load_elem(p.beta, p.beta_t, at) : 1.f;
    if (!channel) sG[tid] = p.g && tid < len ? cuda_linear::load_elem(p.g, p.g_t, at) : 0.f;
  }
  if (channel)
    for (int e = tid; e < C * p.Kp; e += kThreads) {
      const int i = e / p.Kp, c = e % p.Kp;
      sG[e] = i < len && c < p.K ? cuda_linear::load_elem(p.g, p.g_t, ((ch.row + i) * p.HV + hv) * p.K + c) : 0.f;
    }
  sm80::sync_threads();
  // Adds in f32 in token order, as the CPU kernel sums them (per channel for KDA).
  if (channel) {
    if (tid < p.Kp) {
      float G = 0.f;
      for (int i = 0; i < C; ++i) sG[i * p.Kp + tid] = G += sG[i * p.Kp + tid];
    }
  } else if (tid == 0) {
    float G = 0.f;
    for (int i = 0; i < C; ++i) sG[i] = G += sG[i];
  }
  stage_rows(sK, ldk, p.k, p.k_t, (ch.row * p.H + h) * p.K, int64_t(p.H) * p.K, len, C, p.K, p.Kp, p.l2norm, 1.f,
             One{});
  stage_rows(sV, ldv, p.v, p.v_t, (ch.row * p.HV + hv) * p.V, int64_t(p.HV) * p.V, len, C, p.V, p.Vp, false, 1.f,
             One{});
  sm80::sync_threads();
  if (channel) {
    for (int e = tid; e < len * p.K; e += kThreads) {
      const int i = e / p.K, c = e % p.K;
      p.G[((ch.row + i) * p.HV + hv) * p.K + c] = sG[i * p.Kp + c];
    }
    channel_gram<C>(sK, sK, ldk, sG, p.Kp, p.K, sLeft, sRight,
                    [&](int i, int j, float x) { sA[i * C + j] = j < i ? sBeta[i] * x : 0.f; });
  } else if (p.G && tid < len) {
    p.G[(ch.row + tid) * p.HV + hv] = sG[tid];
  }
  // Kd here, where K and G are staged anyway, keeps the sequential state pass free of element loads and exps.
  Bf16* kd = reinterpret_cast<Bf16*>(p.kd) + c_hv * w_elems(C, p.Kp);
  for (int e = tid; e < C * p.Kp / 2; e += kThreads) {
    const int i = e / (p.Kp / 2), c = e % (p.Kp / 2) * 2;
    float f[2];
    for (int x = 0; x < 2; ++x)
      f[x] = channel ? expf(sG[(C - 1) * p.Kp + c + x] - sG[i * p.Kp + c + x]) : expf(sG[C - 1] - sG[i]);
    sm80::store2(kd + i * p.Kp + c, __bfloat162float(sK[i * ldk + c]) * f[0],
                 __bfloat162float(sK[i * ldk + c + 1]) * f[1]);
  }

  // A, lower blocks only: the substitution below never reads right of the diagonal.
  if (!channel)
    lower_gram_blocks<C>(sK, sK, ldk, p.Kp, warp, lane, [&](int i, int j, float a0, float a1) {
      sA[i * C + j] = j < i ? sBeta[i] * a0 * expf(sG[i] - sG[j]) : 0.f;
      sA[i * C + j + 1] = j + 1 < i ? sBeta[i] * a1 * expf(sG[i] - sG[j + 1]) : 0.f;
    });
  sm80::sync_threads();

  // T = (I + A)^-1 in f32, by 16 x 16 blocks.
  unit_lower_inverse<C>(sA, sT, sX);
  // The left factors of W and U: T with its columns scaled (T diag(...)), zero above the diagonal as the MMAs
  // need.
  for (int x = tid; x < C * C; x += kThreads) {
    const int i = x / C, j = x % C;
    const float t = j <= i ? sT[i * C + j] : 0.f, bj = sBeta[j];
    sTb[i * ldc + j] = __float2bfloat16_rn(t * bj);
    if (!channel) sTbg[i * ldc + j] = __float2bfloat16_rn(t * bj * expf(sG[j]));
  }
  // KDA's right factor of W: the keys decayed from the chunk start, per channel (the gram's scratch is free).
  if (channel)
    for (int e = tid; e < C * p.Kp; e += kThreads) {
      const int i = e / p.Kp, c = e % p.Kp;
      sRight[i * ldk + c] = __float2bfloat16_rn(__bfloat162float(sK[i * ldk + c]) * expf(sG[e]));
    }
  sm80::sync_threads();
  const Bf16* w_left = channel ? sTb : sTbg;
  const Bf16* w_right = channel ? sRight : sK;

  // W and U on tensor cores.
  lower_products<C>(w_left, w_right, ldk, sTb, sV, ldv, ldc, p.Kp, p.Vp,
                    reinterpret_cast<Bf16*>(p.w) + c_hv * w_elems(C, p.Kp), p.u + c_hv * u_elems(C, p.Vp), warp,
                    lane);
}

}  // namespace attnzoo::cuda_delta_chunk
