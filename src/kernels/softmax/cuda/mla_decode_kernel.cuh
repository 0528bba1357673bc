#pragma once
// The device side of the CUDA MLA decode (absorbed form, one new token per sequence), four kernels in stream
// order:
//   absorb     q_lat[b, h] = [W_UK_h^T q_nope_h ; q_pe_h], one CTA per (head, kBatchPerCta sequences) so each
//              W_UK_h is read once for those sequences;
//   attend     multi-query attention with head dim r + dr over the latent rows: one CTA per (chunk of one
//              sequence's rows, kHeadsPerCta heads) reads each latent tile from memory once for all of its heads;
//              online softmax in exp2, f32 throughout. A sequence's only chunk writes ctx normalised; chunks of a
//              split sequence leave (max, sum, unnormalised ctx) for
//   merge      the log-sum-exp combination of a split sequence's chunks, one CTA per (sequence, head);
//   expand     out[b, h] = W_UV_h ctx[b, h] in out's dtype, one CTA per (head, kBatchPerCta sequences), a warp
//              per kExpandRows rows of W_UV_h read along r.
// All four in scalar f32 FMA. A bf16 / f16 cache of 16-byte aligned rows with r a multiple of 64 and dr of 16
// (DeepSeek's) takes mla_decode_mma.cuh's tensor-core attention instead; this mla_attend is for the rest
// (f32 caches, odd ranks, unaligned rows).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/linear/common/cuda/float_elem.cuh"
#include "kernels/softmax/cuda/mla_decode_params.h"
#include "kernels/softmax/cuda/mla_latent_row.cuh"
#include "kernels/softmax/cuda/sm80.cuh"

namespace attnzoo::cuda_mla {

using cuda_linear::bits_to_float;
using cuda_linear::Elem;
using cuda_linear::load_bits;
using cuda_linear::load_elem;

// The absorb's weights: each thread loads a batch of bits before converting any (float_elem.cuh's load_bits), so
// kWeightBatch loads of its walk are in flight together.
constexpr int kWeightBatch = 4;

// Through sm80::store1, whose emulated twin bounds-checks each store (float_elem.cuh's store_elem does not).
__device__ __forceinline__ void store_elt(void* base, Elem t, int64_t i, float x) {
  switch (t) {
    case Elem::bf16: sm80::store1(static_cast<__nv_bfloat16*>(base) + i, x); break;
    case Elem::f16: sm80::store1(static_cast<__half*>(base) + i, x); break;
    default: sm80::store1(static_cast<float*>(base) + i, x); break;
  }
}

// Grid (H, ceil(B / kBatchPerCta)); shared memory mla_rows_smem_bytes(dn).
__device__ __forceinline__ void mla_absorb(const MlaDecodeParams& p, unsigned char* smem) {
  const int tid = int(threadIdx.x), h = int(blockIdx.x), b0 = int(blockIdx.y) * kBatchPerCta;
  const int nb = min(kBatchPerCta, p.B - b0), L = p.r + p.dr;
  float* sq = reinterpret_cast<float*>(smem);  // [kBatchPerCta][dn]
  for (int idx = tid; idx < kBatchPerCta * p.dn; idx += kThreads) {
    const int bb = idx / p.dn, i = idx % p.dn;
    sq[idx] = bb < nb ? load_elem(p.q, p.q_type, int64_t(b0 + bb) * p.q_batch + int64_t(h) * p.q_head + i) : 0.f;
  }
  __syncthreads();
  const int64_t w_uk = int64_t(h) * (p.dn + p.dv) * p.w_row;
  for (int c = tid; c < p.r; c += kThreads) {
    float acc[kBatchPerCta] = {};
    for (int i0 = 0; i0 < p.dn; i0 += kWeightBatch) {
      uint32_t bits[kWeightBatch];
#pragma unroll
      for (int k = 0; k < kWeightBatch; ++k)
        bits[k] = i0 + k < p.dn ? load_bits(p.w, p.w_type, w_uk + int64_t(i0 + k) * p.w_row + c) : 0u;
#pragma unroll
      for (int k = 0; k < kWeightBatch; ++k) {
        if (i0 + k >= p.dn) break;
        const float wv = bits_to_float(bits[k], p.w_type);
#pragma unroll
        for (int bb = 0; bb < kBatchPerCta; ++bb) acc[bb] += sq[bb * p.dn + i0 + k] * wv;
      }
    }
    for (int bb = 0; bb < nb; ++bb) p.q_lat[(int64_t(b0 + bb) * p.H + h) * L + c] = acc[bb];
  }
  for (int idx = tid; idx < nb * p.dr; idx += kThreads) {
    const int bb = idx / p.dr, c = idx % p.dr;
    p.q_lat[(int64_t(b0 + bb) * p.H + h) * L + p.r + c] =
        load_elem(p.q, p.q_type, int64_t(b0 + bb) * p.q_batch + int64_t(h) * p.q_head + p.dn + c);
  }
}

// Grid (work items, ceil(H / kHeadsPerCta)); shared memory mla_attend_smem_bytes(r + dr). Thread tid
// accumulates latent columns tid + k * kThreads (k < kCols) of every head of the CTA.
template <int kCols>
__device__ __forceinline__ void mla_attend(const MlaDecodeParams& p, unsigned char* smem) {
  const int tid = int(threadIdx.x);
  const MlaWork w = p.work[blockIdx.x];
  const int h0 = int(blockIdx.y) * kHeadsPerCta, nh = min(kHeadsPerCta, p.H - h0);
  const int L = p.r + p.dr, P = int(mla_row_pitch(L));
  int64_t* sRow = reinterpret_cast<int64_t*>(smem);             // [kTile] element offset of each row; -1 past
  float* sQ = reinterpret_cast<float*>(smem + kTile * 8);        // [kHeadsPerCta][P]
  float* sK = sQ + kHeadsPerCta * P;                             // [kTile][P]
  float* sS = sK + kTile * P;                                    // [kHeadsPerCta][kTile] scores, then weights
  float* sM = sS + kHeadsPerCta * kTile;                         // [kHeadsPerCta] running max (log2 units)
  float* sL = sM + kHeadsPerCta;                                 // running sum
  float* sA = sL + kHeadsPerCta;                                 // this tile's rescale of the old state

  // Heads past H get zero queries: their scores are finite and never stored.
  for (int idx = tid; idx < kHeadsPerCta * L; idx += kThreads) {
    const int hh = idx / L, c = idx % L;
    sQ[hh * P + c] = hh < nh ? p.q_lat[(int64_t(w.b) * p.H + h0 + hh) * L + c] : 0.f;
  }
  if (tid < kHeadsPerCta) sM[tid] = -INFINITY, sL[tid] = 0.f;

  float acc[kHeadsPerCta][kCols];
#pragma unroll
  for (int hh = 0; hh < kHeadsPerCta; ++hh)
#pragma unroll
    for (int k = 0; k < kCols; ++k) acc[hh][k] = 0.f;

  // Each thread scores one head against two keys of the tile.
  const int my_head = tid / (kTile / 2), my_key = (tid % (kTile / 2)) * 2;
  static_assert(kHeadsPerCta * kTile == 2 * kThreads);
  const int n_tiles = (w.k_end - w.k_begin + kTile - 1) / kTile;
  for (int i = 0; i < n_tiles; ++i) {
    const int k0 = w.k_begin + i * kTile;
    if (tid < kTile) sRow[tid] = latent_row(p, w, k0 + tid);
    __syncthreads();  // sRow is written, and every thread is done with the previous tile's sK and sS
    // Rows past the chunk are zeros: their weights are zero, and 0 * garbage could be NaN.
    for (int idx = tid; idx < kTile * L; idx += kThreads) {
      const int j = idx / L, c = idx % L;
      const int64_t at = sRow[j];
      sK[j * P + c] = at >= 0 ? load_elem(p.latent, p.latent_type, at + c) : 0.f;
    }
    __syncthreads();

    {
      const float* q = sQ + my_head * P;
      const float* k_a = sK + my_key * P;
      const float* k_b = k_a + P;
      float s0 = 0.f, s1 = 0.f;
      for (int c = 0; c < L; ++c) {
        const float qc = q[c];
        s0 += qc * k_a[c];
        s1 += qc * k_b[c];
      }
      sS[my_head * kTile + my_key] = k0 + my_key < w.k_end ? s0 * p.scale_log2 : -INFINITY;
      sS[my_head * kTile + my_key + 1] = k0 + my_key + 1 < w.k_end ? s1 * p.scale_log2 : -INFINITY;
    }
    __syncthreads();

    // One thread per head: the new max, the weights in place of the scores, the running sum. Every tile holds
    // at least one row of the chunk, so the new max is finite.
    if (tid < kHeadsPerCta) {
      float* s = sS + tid * kTile;
      float m = sM[tid];
      for (int j = 0; j < kTile; ++j) m = fmaxf(m, s[j]);
      const float alpha = exp2f(sM[tid] - m);  // 0 on the first tile (-inf - m)
      float sum = 0.f;
      for (int j = 0; j < kTile; ++j) {
        s[j] = exp2f(s[j] - m);
        sum += s[j];
      }
      sL[tid] = sL[tid] * alpha + sum;
      sM[tid] = m;
      sA[tid] = alpha;
    }
    __syncthreads();

#pragma unroll
    for (int hh = 0; hh < kHeadsPerCta; ++hh) {
      const float alpha = sA[hh];
#pragma unroll
      for (int k = 0; k < kCols; ++k) acc[hh][k] *= alpha;
    }
    for (int j = 0; j < kTile; ++j) {
      float v[kCols];
#pragma unroll
      for (int k = 0; k < kCols; ++k) {
        const int c = tid + k * kThreads;
        v[k] = c < p.r ? sK[j * P + c] : 0.f;
      }
#pragma unroll
      for (int hh = 0; hh < kHeadsPerCta; ++hh) {
        const float pw = sS[hh * kTile + j];
#pragma unroll
        for (int k = 0; k < kCols; ++k) acc[hh][k] += pw * v[k];
      }
    }
  }
  __syncthreads();  // the softmax state is final (and written, even with no tile)

#pragma unroll
  for (int hh = 0; hh < kHeadsPerCta; ++hh) {
    if (hh >= nh) break;
    const int h = h0 + hh;
    const float l = sL[hh], inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
    for (int k = 0; k < kCols; ++k) {
      const int c = tid + k * kThreads;
      if (c >= p.r) continue;
      if (w.slot < 0) p.ctx[(int64_t(w.b) * p.H + h) * p.r + c] = acc[hh][k] * inv;
      else p.part_o[(int64_t(w.slot) * p.H + h) * p.r + c] = acc[hh][k];
    }
  }
  if (w.slot >= 0 && tid < nh) {
    p.part_m[int64_t(w.slot) * p.H + h0 + tid] = sM[tid];
    p.part_l[int64_t(w.slot) * p.H + h0 + tid] = sL[tid];
  }
}

// Grid (merges, H): one split sequence's chunks for one head, by the log-sum-exp rule.
__device__ __forceinline__ void mla_merge(const MlaDecodeParams& p) {
  const MlaMerge mg = p.merges[blockIdx.x];
  const int h = int(blockIdx.y);
  float m = -INFINITY;
  for (int s = 0; s < mg.num_slots; ++s) m = fmaxf(m, p.part_m[int64_t(mg.first_slot + s) * p.H + h]);
  for (int c = int(threadIdx.x); c < p.r; c += kThreads) {
    float l = 0.f, o = 0.f;
    for (int s = 0; s < mg.num_slots; ++s) {
      const int64_t at = int64_t(mg.first_slot + s) * p.H + h;
      if (p.part_m[at] == -INFINITY) continue;  // keeps -inf - -inf out of exp2
      const float f = exp2f(p.part_m[at] - m);
      l += f * p.part_l[at];
      o += f * p.part_o[at * p.r + c];
    }
    p.ctx[(int64_t(mg.b) * p.H + h) * p.r + c] = l > 0.f ? o / l : 0.f;
  }
}

#if defined(ATTNZOO_CUDA_EMULATION)
// The emulator's: the same 16 bytes, alignment- and bounds-checked, so a row the host wrongly took for aligned
// (mla_expand_is_wide) fails the case instead of reading across a piece boundary.
inline uint4 load16(const void* p) {
  if (reinterpret_cast<uintptr_t>(p) % 16) cuda_emulation::fail("16-byte weight load from misaligned %p", p);
  cuda_emulation::check_global(p, 16, "weight load");
  uint4 v;
  std::memcpy(&v, p, 16);
  return v;
}
#else
__device__ __forceinline__ uint4 load16(const void* p) { return *static_cast<const uint4*>(p); }
#endif

// Sums each of a lane's 32 partials over the warp. Each step halves what a lane holds: it keeps the half its lane
// bit picks and adds its partner's share of that half. 31 shuffles where 32 warp sums take 160; lane l ends with
// the total of partial l. Every index into v must be a constant after unrolling, or v becomes a stack array.
__device__ __forceinline__ float warp_sum_scattered(float (&v)[32]) {
  const int lane = int(threadIdx.x) % 32;
#pragma unroll
  for (int half = 16; half >= 1; half /= 2) {
    const bool upper = lane & half;
#pragma unroll
    for (int j = 0; j < 16; ++j) {  // a fixed count: nvcc unrolled `j < half` by 4 at sm_80 (v on the stack)
      if (j >= half) break;
      const float keep = upper ? v[j + half] : v[j], send = upper ? v[j] : v[j + half];
      v[j] = keep + __shfl_xor_sync(0xffffffffu, send, half);
    }
  }
  return v[0];
}

// Rows of W_UV_h a warp of the expand multiplies at once: each ctx value it reads from shared memory serves this
// many rows, and its partials, kExpandRows x kBatchPerCta, are one a lane after the warp sum.
constexpr int kExpandRows = 4;
static_assert(kExpandRows * kBatchPerCta == 32);

// A warp takes kExpandRows rows of W_UV_h, its lanes side by side along r: coalesced, and 16 bytes a lane when
// kWide (mla_expand_is_wide: every row 16-byte aligned, r whole pieces), one element otherwise. All the loads of a
// step leave before any is used. Every weight multiplies into all of the CTA's sequences; f32 throughout.
template <Elem kW, bool kWide>
__device__ __forceinline__ void mla_expand_rows(const MlaDecodeParams& p, const float* sc, int h, int b0, int nb) {
  constexpr int kSize = kW == Elem::f32 ? 4 : 2;
  constexpr int kN = kWide ? 16 / kSize : 1;         // elements a lane loads at once
  constexpr int kPerWord = kWide ? 4 / kSize : 1;    // of them in each 32-bit word
  constexpr uint32_t kMask = kSize == 4 ? ~0u : 0xffffu;
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
  const int64_t w_uv = (int64_t(h) * (p.dn + p.dv) + p.dn) * p.w_row;
  for (int i0 = warp * kExpandRows; i0 < p.dv; i0 += kWarps * kExpandRows) {
    float acc[kExpandRows * kBatchPerCta] = {};  // [row][sequence]
    for (int c = lane * kN; c < p.r; c += 32 * kN) {
      uint32_t words[kExpandRows][kN / kPerWord];
#pragma unroll
      for (int rr = 0; rr < kExpandRows; ++rr) {
        const int64_t at = w_uv + int64_t(i0 + rr) * p.w_row + c;
        if constexpr (kWide) {
          const uint4 u = i0 + rr < p.dv ? load16(static_cast<const unsigned char*>(p.w) + at * kSize) : uint4{};
          words[rr][0] = u.x, words[rr][1] = u.y, words[rr][2] = u.z, words[rr][3] = u.w;
        } else {
          words[rr][0] = i0 + rr < p.dv ? load_bits(p.w, kW, at) : 0u;
        }
      }
      float wv[kExpandRows][kN];
#pragma unroll
      for (int rr = 0; rr < kExpandRows; ++rr)
#pragma unroll
        for (int j = 0; j < kN; ++j)
          wv[rr][j] = bits_to_float((words[rr][j / kPerWord] >> (16 * (j % kPerWord))) & kMask, kW);
#pragma unroll
      for (int bb = 0; bb < kBatchPerCta; ++bb) {
        float x[kN];
        const float* from = sc + bb * p.r + c;
        if constexpr (kN % 4 == 0) {
#pragma unroll
          for (int j = 0; j < kN; j += 4) {
            const float4 q4 = *reinterpret_cast<const float4*>(from + j);
            x[j] = q4.x, x[j + 1] = q4.y, x[j + 2] = q4.z, x[j + 3] = q4.w;
          }
        } else {
          x[0] = from[0];
        }
#pragma unroll
        for (int rr = 0; rr < kExpandRows; ++rr)
#pragma unroll
          for (int j = 0; j < kN; ++j) acc[rr * kBatchPerCta + bb] += wv[rr][j] * x[j];
      }
    }
    const float total = warp_sum_scattered(acc);
    const int i = i0 + lane / kBatchPerCta, bb = lane % kBatchPerCta;
    if (i < p.dv && bb < nb)
      store_elt(p.o, p.o_type, int64_t(b0 + bb) * p.o_batch + int64_t(h) * p.o_head + i, total);
  }
}

// Grid (H, ceil(B / kBatchPerCta)); shared memory mla_rows_smem_bytes(r). The CTA's sequences' ctx rows are staged
// in shared memory; then mla_expand_rows, its weight type a template argument.
template <bool kWide>
__device__ __forceinline__ void mla_expand(const MlaDecodeParams& p, unsigned char* smem) {
  const int tid = int(threadIdx.x);
  const int h = int(blockIdx.x), b0 = int(blockIdx.y) * kBatchPerCta, nb = min(kBatchPerCta, p.B - b0);
  float* sc = reinterpret_cast<float*>(smem);  // [kBatchPerCta][r]
  for (int idx = tid; idx < kBatchPerCta * p.r; idx += kThreads) {
    const int bb = idx / p.r, c = idx % p.r;
    sc[idx] = bb < nb ? p.ctx[(int64_t(b0 + bb) * p.H + h) * p.r + c] : 0.f;
  }
  __syncthreads();
  switch (p.w_type) {
    case Elem::bf16: return mla_expand_rows<Elem::bf16, kWide>(p, sc, h, b0, nb);
    case Elem::f16: return mla_expand_rows<Elem::f16, kWide>(p, sc, h, b0, nb);
    default: return mla_expand_rows<Elem::f32, kWide>(p, sc, h, b0, nb);
  }
}

}  // namespace attnzoo::cuda_mla
