#pragma once
// Kernel 1 of the chunked RWKV-7 (rwkv7_chunk_cuda.h): per (chunk, head), everything that needs no state. Rows
// past the chunk's tokens are zero tokens (w = 0, everything else 0) that change nothing: G stays at G_last.
//   G_i = sum_{t <= i} w_t per channel, in token order (f32, as the CPU chunk adds them)
//   q e^{G_i}, k and b e^{G_last - G_j}, V, e^{G_last}          straight to the scratch the other passes read
//   [A_qk | A_qb], A_ak, A_ab                                   rwkv7_chunk_gram.cuh
//   T = (I - A_ab)^-1                                           forward substitution in f32 (unit_lower_inverse.cuh)
//   W = T (a e^{G_{i-1}}),  U = (T A_ak) V                      tensor cores (T A_ak in f32: two lower factors)
// so that the low-rank reads of the chunk are SA = W S0 + U (chunk.cc's WY-like form).
#include <cstdint>

#include "kernels/linear/common/cuda/delta_chunk_mma.cuh"
#include "kernels/linear/common/cuda/unit_lower_inverse.cuh"
#include "kernels/linear/rwkv7/cuda/rwkv7_chunk_gram.cuh"
#include "kernels/linear/rwkv7/cuda/rwkv7_chunk_launch.h"

namespace attnzoo::cuda_rwkv7_chunk {

using cuda_delta_chunk::lower_products;
using cuda_delta_chunk::One;
using cuda_delta_chunk::stage_rows;
using cuda_delta_chunk::unit_lower_inverse;

template <int C>
__device__ __forceinline__ void rwkv7_chunk_intra(const Params& p, unsigned char* smem) {
  const int Kp = p.Kp, K = p.K;
  const IntraSmem L(C, Kp, p.Vp);
  float* sG0 = reinterpret_cast<float*>(smem + L.G);  // row i: G_{i-1}
  float* sG = sG0 + Kp;                                // row i: G_i
  float* sAk = reinterpret_cast<float*>(smem + L.ak);
  float* sAb = reinterpret_cast<float*>(smem + L.ab);
  float* sT = reinterpret_cast<float*>(smem + L.t);
  float* sX = reinterpret_cast<float*>(smem + L.x);
  Bf16* sQ = reinterpret_cast<Bf16*>(smem + L.q);
  Bf16* sK = reinterpret_cast<Bf16*>(smem + L.k);
  Bf16* sA = reinterpret_cast<Bf16*>(smem + L.a);
  Bf16* sB = reinterpret_cast<Bf16*>(smem + L.b);
  Bf16* sLeft = reinterpret_cast<Bf16*>(smem + L.left);
  Bf16* sRight = reinterpret_cast<Bf16*>(smem + L.right);
  Bf16* sAe = reinterpret_cast<Bf16*>(smem + L.ae);
  Bf16* sV = reinterpret_cast<Bf16*>(smem + L.v);
  Bf16* sTb = reinterpret_cast<Bf16*>(smem + L.tb);
  Bf16* sTa = reinterpret_cast<Bf16*>(smem + L.ta);
  int* sOnCores = reinterpret_cast<int*>(smem + L.on_cores);
  const int ldk = pitch(Kp), ldv = pitch(p.Vp), ldc = pitch(C);
  const int tid = sm80::thread_index(), lane = tid % 32, warp = tid / 32;
  const int64_t c_h = blockIdx.x;  // chunk * H + head
  const int h = int(c_h % p.H);
  const ChunkDesc ch = p.chunks[c_h / p.H];
  if (p.state_indices && p.state_indices[ch.seq] < 0) return;  // a pad's chunk: nothing reads its factors
  const int len = ch.len;
  const int64_t k_first = (ch.row * p.H + h) * p.K, k_stride = int64_t(p.H) * p.K;
  const int64_t v_first = (ch.row * p.H + h) * p.V, v_stride = int64_t(p.H) * p.V;

  for (int e = tid; e < (C + 1) * Kp; e += kThreads) {
    const int i = e / Kp - 1, c = e % Kp;
    sG0[e] = i >= 0 && i < len && c < K ? cuda_linear::load_elem(p.w, p.w_t, k_first + i * k_stride + c) : 0.f;
  }
  stage_rows(sQ, ldk, p.r, p.r_t, k_first, k_stride, len, C, K, Kp, false, p.scale, One{});
  stage_rows(sK, ldk, p.k, p.k_t, k_first, k_stride, len, C, K, Kp, false, 1.f, One{});
  stage_rows(sA, ldk, p.a, p.a_t, k_first, k_stride, len, C, K, Kp, false, 1.f, One{});
  stage_rows(sB, ldk, p.b, p.b_t, k_first, k_stride, len, C, K, Kp, false, 1.f, One{});
  sm80::sync_threads();
  if (tid < Kp) {
    float G = 0.f;
    for (int i = 1; i <= C; ++i) sG0[i * Kp + tid] = G += sG0[i * Kp + tid];
  }
  sm80::sync_threads();

  // What the state and output passes read, staged from the inputs in f32 with their decays (one bf16 rounding).
  const float* G_last = sG + (C - 1) * Kp;
  stage_rows(reinterpret_cast<Bf16*>(p.qg) + c_h * rows_elems(C, Kp), Kp, p.r, p.r_t, k_first, k_stride, len, C, K,
             Kp, false, p.scale, [&](int i, int c) { return expf(sG[i * Kp + c]); });
  Bf16* kb = reinterpret_cast<Bf16*>(p.kb) + c_h * rows_elems(2 * C, Kp);
  const auto to_end = [&](int j, int c) { return expf(G_last[c] - sG[j * Kp + c]); };
  stage_rows(kb, Kp, p.k, p.k_t, k_first, k_stride, len, C, K, Kp, false, 1.f, to_end);
  stage_rows(kb + C * Kp, Kp, p.b, p.b_t, k_first, k_stride, len, C, K, Kp, false, 1.f, to_end);
  stage_rows(reinterpret_cast<Bf16*>(p.vsa) + c_h * rows_elems(2 * C, p.Vp), p.Vp, p.v, p.v_t, v_first, v_stride,
             len, C, p.V, p.Vp, false, 1.f, One{});
  if (tid < Kp) p.decay[c_h * Kp + tid] = expf(G_last[tid]);

  // The Gram matrices: [A_qk | A_qb] (diagonal included) to the scratch, A_ak and -A_ab (strictly lower) here. The
  // blocks right of the diagonal are never multiplied, but the output pass copies them: zeros, not stale bytes.
  Bf16* pm = reinterpret_cast<Bf16*>(p.pm) + c_h * rows_elems(C, 2 * C);
  for (int e = tid; e < C * 2 * C; e += kThreads) {
    const int i = e / (2 * C), j = e % C;
    if (j / 16 > i / 16) pm[e] = __float2bfloat16_rn(0.f);
  }
  decayed_grams<C>(sQ, sA, sK, sB, ldk, sG0, Kp, K, sLeft, sRight, sOnCores, [&](int m, int i, int j, float x) {
    if (m < 2)
      pm[i * 2 * C + m * C + j] = __float2bfloat16_rn(j <= i ? x : 0.f);
    else
      (m == 2 ? sAk : sAb)[i * C + j] = j < i ? (m == 2 ? x : -x) : 0.f;
  });
  // The staged tiles are free: the right factors of W and U take their place.
  stage_rows(sAe, ldk, p.a, p.a_t, k_first, k_stride, len, C, K, Kp, false, 1.f,
             [&](int i, int c) { return expf(sG0[i * Kp + c]); });
  stage_rows(sV, ldv, p.v, p.v_t, v_first, v_stride, len, C, p.V, p.Vp, false, 1.f, One{});
  sm80::sync_threads();  // G's bytes become T's

  // T = (I + sAb)^-1, the delta rule's inverse (sAb holds -A_ab).
  unit_lower_inverse<C>(sAb, sT, sX);
  // The left factors of W and U in bf16: T (lower, unit diagonal) and T A_ak (strictly lower).
  for (int x = tid; x < C * C; x += kThreads) {
    const int i = x / C, j = x % C;
    float ta = 0.f;
    for (int m = j + 1; m <= i; ++m) ta = fmaf(sT[i * C + m], sAk[m * C + j], ta);
    sTb[i * ldc + j] = __float2bfloat16_rn(j <= i ? sT[i * C + j] : 0.f);
    sTa[i * ldc + j] = __float2bfloat16_rn(ta);
  }
  sm80::sync_threads();

  // W and U on tensor cores.
  lower_products<C>(sTb, sAe, ldk, sTa, sV, ldv, ldc, Kp, p.Vp,
                    reinterpret_cast<Bf16*>(p.wm) + c_h * rows_elems(C, Kp), p.u + c_h * rows_elems(C, p.Vp), warp,
                    lane);
}

}  // namespace attnzoo::cuda_rwkv7_chunk
