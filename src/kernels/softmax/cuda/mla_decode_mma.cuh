#pragma once
// The MLA decode's attention on mma.sync tensor cores, for bf16 / f16 latent caches whose rows are 16-byte
// aligned (mla_decode_kernel.cuh's scalar mla_attend takes every other cache). Same grid, work items and
// outputs. The 16 heads of a CTA are one m16 row block: per tile of kMmaTile latent rows, each warp scores the
// 16 heads against its own 16 rows over the whole r + dr (S = Q K^T), the scores meet in shared memory for one
// online-softmax step per head (eight threads each), and each warp then adds P V for its quarter of the r value
// columns (V is the first r columns of the same rows), so a warp's accumulator is 16 x r / 4 rather than 16 x r.
// The queries enter the tensor cores in the cache's type: q_lat is rounded once to bf16 / f16 (as the cache
// itself is), the weights P likewise; accumulation stays f32.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/softmax/cuda/mla_decode_params.h"
#include "kernels/softmax/cuda/mla_latent_row.cuh"
#include "kernels/softmax/cuda/sm80.cuh"

namespace attnzoo::cuda_mla {

// Shared-memory operands in the tensor cores' type (sm80::store1 is for global memory: the emulator checks it there).
template <class Elem>
__device__ __forceinline__ Elem to_elem(float x) {
  if constexpr (std::is_same_v<Elem, __nv_bfloat16>) return __float2bfloat16_rn(x);
  else return __float2half_rn(x);
}
template <class Elem>
__device__ __forceinline__ float from_elem(Elem x) {
  if constexpr (std::is_same_v<Elem, __nv_bfloat16>) return __bfloat162float(x);
  else return __half2float(x);
}

// kNB: 8-column blocks of the value dims each warp accumulates, r / (8 * kWarps).
template <class Elem, int kNB>
__device__ __forceinline__ void mla_attend_mma(const MlaDecodeParams& p, unsigned char* smem) {
  static_assert(kNB % 2 == 0, "value columns go in pairs of 8-column blocks (one ldmatrix x4)");
  constexpr int T = kMmaTile, SP = kMmaTile + 4, PP = kMmaTile + 8;
  const int tid = int(threadIdx.x), lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
  const MlaWork w = p.work[blockIdx.x];
  const int h0 = int(blockIdx.y) * kHeadsPerCta, nh = min(kHeadsPerCta, p.H - h0);
  const int L = p.r + p.dr, P = int(mla_mma_pitch(L));
  int64_t* sRow = reinterpret_cast<int64_t*>(smem);               // [T] element offset of each row; -1 past
  Elem* sQ = reinterpret_cast<Elem*>(smem + T * 8);                // [16][P]
  Elem* sK = sQ + kHeadsPerCta * P;                                 // [T][P]
  Elem* sP = sK + T * P;                                            // [16][PP] softmax weights
  float* sS = reinterpret_cast<float*>(sP + kHeadsPerCta * PP);     // [16][SP] scores (log2 units)
  float* sM = sS + kHeadsPerCta * SP;
  float* sL = sM + kHeadsPerCta;
  float* sA = sL + kHeadsPerCta;

  for (int idx = tid; idx < kHeadsPerCta * L; idx += kThreads) {
    const int hh = idx / L, c = idx % L;
    const float x = hh < nh ? p.q_lat[(int64_t(w.b) * p.H + h0 + hh) * L + c] : 0.f;
    sQ[hh * P + c] = to_elem<Elem>(x);
  }
  if (tid < kHeadsPerCta) sM[tid] = -INFINITY, sL[tid] = 0.f;

  // ldmatrix addresses per lane, as in decode_kernel.cuh: A (Q, P) in a0..a3 order; K for S = Q K^T; V for
  // O += P V (transposed load).
  const int a_row = (lane % 8) + ((lane / 8) % 2) * 8, a_col = (lane / 16) * 8;
  const int k_row = (lane % 8) + (lane / 16) * 8, k_col = ((lane / 8) % 2) * 8;
  const int v_row = (lane % 8) + ((lane / 8) % 2) * 8, v_col = (lane / 16) * 8;
  const int key0 = warp * 16, col0 = warp * kNB * 8;

  float acc[kNB][4];
#pragma unroll
  for (int nb = 0; nb < kNB; ++nb) acc[nb][0] = acc[nb][1] = acc[nb][2] = acc[nb][3] = 0.f;

  const Elem* latent = static_cast<const Elem*>(p.latent);
  const int chunks = L / 8;  // 16-byte pieces of a row
  const int n_tiles = (w.k_end - w.k_begin + T - 1) / T;
  // Thread tid < T's row of the coming tile, looked up (through the block table) one tile ahead: the lookup's
  // latency then hides behind a tile of work instead of standing between each tile and its copies.
  int64_t next_row = tid < T ? latent_row(p, w, w.k_begin + tid) : -1;
  for (int i = 0; i < n_tiles; ++i) {
    const int k0 = w.k_begin + i * T;
    if (tid < T) sRow[tid] = next_row;
    __syncthreads();  // sRow is written; every warp is done with the previous tile's sK and sP
    // Rows past the chunk arrive as zeros (never read from memory): their weights are zero, 0 * garbage is not.
    for (int idx = tid; idx < T * chunks; idx += kThreads) {
      const int j = idx / chunks, c = idx % chunks;
      const int64_t at = sRow[j];
      sm80::cp_async_16(sm80::smem_u32(sK + j * P + c * 8), at >= 0 ? latent + at + c * 8 : latent, at >= 0);
    }
    sm80::cp_async_commit();
    if (tid < T) next_row = latent_row(p, w, k0 + T + tid);  // -1 past the chunk: the table is not read there
    sm80::cp_async_wait<0>();
    __syncthreads();

    {  // S = Q K^T for this warp's 16 rows of the tile
      float sc[2][4] = {};
      for (int kk = 0; kk < L / 16; ++kk) {
        uint32_t a[4], b[4];
        sm80::ldmatrix_x4(a, sm80::smem_u32(sQ + a_row * P + kk * 16 + a_col));
        sm80::ldmatrix_x4(b, sm80::smem_u32(sK + (key0 + k_row) * P + kk * 16 + k_col));
        sm80::mma_16816<Elem>(sc[0], a, b[0], b[1]);
        sm80::mma_16816<Elem>(sc[1], a, b[2], b[3]);
      }
#pragma unroll
      for (int nb = 0; nb < 2; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = g + 8 * (e / 2), key = key0 + nb * 8 + 2 * t + (e & 1);
          sS[row * SP + key] = k0 + key < w.k_end ? sc[nb][e] * p.scale_log2 : -INFINITY;
        }
    }
    __syncthreads();

    // Eight threads per head (lanes 8k..8k+7 of a warp), eight of the tile's rows each: the new max, the weights
    // (in the cache's type, for the tensor cores), the sum of the rounded weights (so that the normalisation
    // matches what P V adds up). Every tile holds at least one row of the chunk, so the new max is finite.
    {
      static_assert(kHeadsPerCta * 8 == kThreads && T == 8 * 8);
      const int hh = tid / 8, part = tid % 8;
      const float* s = sS + hh * SP + part * 8;
      const float m_old = sM[hh];
      float m = m_old;
#pragma unroll
      for (int j = 0; j < 8; ++j) m = fmaxf(m, s[j]);
#pragma unroll
      for (int mask = 1; mask < 8; mask *= 2) m = fmaxf(m, sm80::shfl_xor(m, mask));
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const Elem pj = to_elem<Elem>(exp2f(s[j] - m));
        sP[hh * PP + part * 8 + j] = pj;
        sum += from_elem(pj);
      }
#pragma unroll
      for (int mask = 1; mask < 8; mask *= 2) sum += sm80::shfl_xor(sum, mask);
      if (part == 0) {  // every lane of the group read sM before the shuffles above
        const float alpha = exp2f(m_old - m);  // 0 on the first tile (-inf - m)
        sL[hh] = sL[hh] * alpha + sum;
        sM[hh] = m;
        sA[hh] = alpha;
      }
    }
    __syncthreads();

    const float alpha0 = sA[g], alpha1 = sA[g + 8];
#pragma unroll
    for (int nb = 0; nb < kNB; ++nb) {
      acc[nb][0] *= alpha0, acc[nb][1] *= alpha0;
      acc[nb][2] *= alpha1, acc[nb][3] *= alpha1;
    }
#pragma unroll
    for (int kk = 0; kk < T / 16; ++kk) {
      uint32_t a[4];
      sm80::ldmatrix_x4(a, sm80::smem_u32(sP + a_row * PP + kk * 16 + a_col));
#pragma unroll
      for (int pair = 0; pair < kNB / 2; ++pair) {
        uint32_t b[4];
        sm80::ldmatrix_x4_trans(b, sm80::smem_u32(sK + (kk * 16 + v_row) * P + col0 + pair * 16 + v_col));
        sm80::mma_16816<Elem>(acc[2 * pair], a, b[0], b[1]);
        sm80::mma_16816<Elem>(acc[2 * pair + 1], a, b[2], b[3]);
      }
    }
  }
  __syncthreads();  // the softmax state is final (and written, even with no tile)

#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int hh = g + 8 * half;
    if (hh >= nh) continue;
    const int64_t row = int64_t(w.slot < 0 ? w.b : w.slot) * p.H + h0 + hh;
    const float l = sL[hh], scale = w.slot < 0 ? (l > 0.f ? 1.f / l : 0.f) : 1.f;
    float* dst = (w.slot < 0 ? p.ctx : p.part_o) + row * p.r + col0;
    // A thread's two columns are adjacent: one 8-byte store (rows of r floats, r a multiple of 64, at 256-byte
    // aligned buffers).
#pragma unroll
    for (int nb = 0; nb < kNB; ++nb)
      *reinterpret_cast<float2*>(dst + nb * 8 + 2 * t) =
          make_float2(acc[nb][2 * half] * scale, acc[nb][2 * half + 1] * scale);
  }
  if (w.slot >= 0 && tid < nh) {
    p.part_m[int64_t(w.slot) * p.H + h0 + tid] = sM[tid];
    p.part_l[int64_t(w.slot) * p.H + h0 + tid] = sL[tid];
  }
}

}  // namespace attnzoo::cuda_mla
