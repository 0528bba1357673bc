#pragma once
// Our GEMM's CTA (gemm_plan.h has the shapes): y[m0.., n0..] = x W^T over a BM x BN block. Device code for
// gemm.cu and for the CTA emulator (testing/cuda_emulation/gemm_cases.cc) alike; the instructions are
// softmax/cuda/sm80.cuh's.
//
// Main loop, per 32-wide K step: stage s of the ring holds x's BM rows and W's BN rows, K-contiguous ([row][k], the
// layout both operands have in memory, so neither is transposed: W's rows are mma's "col" B operand as they
// stand). Each warp reads its A fragments and B fragments by ldmatrix and issues MI x NI mma.m16n8k16 per 16 of K.
// Edges: rows past M or N and columns past K are staged as zeros, so every product is over whole tiles and the
// epilogue only masks its stores.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/linear/common/cuda/float_elem.cuh"
#include "kernels/softmax/cuda/sm80.cuh"
#include "layers/cuda/gemm_plan.h"

namespace attnzoo::cuda_gemm {

template <class W>
__device__ __forceinline__ W to_operand(float v) {
  if constexpr (std::is_same_v<W, __nv_bfloat16>) return __float2bfloat16_rn(v);
  else return __float2half_rn(v);
}

enum class Staging { async, f32_pieces, elements };

// `Rows` rows of one operand, [row0, row0 + Rows) x [k0, k0 + 32), into a stage (pitch Tile::kPitch), from `base`
// with row stride `ld` and `rows` rows in all, in 8-element pieces: by cp.async; or (f32 x) two 16-byte loads
// rounded to W and stored as one 16-byte piece; or element by element, converted. The caller's barrier orders the
// plain stores as the async copies' wait orders theirs.
template <class Tile, int Rows, class W>
__device__ __forceinline__ void stage_operand(W* dst, const void* base, Elem type, int64_t ld, int rows, int row0,
                                              int k0, int K, Staging how) {
  constexpr int kPieces = Tile::BK / 8;
  for (int c = sm80::thread_index(); c < Rows * kPieces; c += Tile::kThreads) {
    const int r = c / kPieces, kc = c % kPieces * 8;
    const int row = row0 + r, k = k0 + kc;
    W* to = dst + r * Tile::kPitch + kc;
    if (how == Staging::async) {
      const bool valid = row < rows && k < K;
      const auto* from = static_cast<const W*>(base) + (valid ? int64_t(row) * ld + k : 0);
      sm80::cp_async_16(sm80::smem_u32(to), from, valid);
    } else if (how == Staging::f32_pieces) {
      uint4 lo = make_uint4(0, 0, 0, 0), hi = lo;  // zero bits are 0.f
      if (row < rows && k < K) {
        const auto* from = reinterpret_cast<const uint4*>(static_cast<const float*>(base) + int64_t(row) * ld + k);
        lo = from[0];
        hi = from[1];
      }
      *reinterpret_cast<uint4*>(to) =
          make_uint4(sm80::pack2<W>(__uint_as_float(lo.x), __uint_as_float(lo.y)),
                     sm80::pack2<W>(__uint_as_float(lo.z), __uint_as_float(lo.w)),
                     sm80::pack2<W>(__uint_as_float(hi.x), __uint_as_float(hi.y)),
                     sm80::pack2<W>(__uint_as_float(hi.z), __uint_as_float(hi.w)));
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j)
        to[j] = to_operand<W>(row < rows && k + j < K ? cuda_linear::load_elem(base, type, int64_t(row) * ld + k + j)
                                                      : 0.f);
    }
  }
}

template <class Tile, class W>
__device__ __forceinline__ void stage_step(W* stage, const GemmParams& p, int m0, int n0, int k0) {
  const Staging x_how = p.x_async ? Staging::async : p.x_f32_pieces ? Staging::f32_pieces : Staging::elements;
  stage_operand<Tile, Tile::BM>(stage, p.x, p.x_type, p.ldx, p.M, m0, k0, p.K, x_how);
  constexpr Elem kW = std::is_same_v<W, __nv_bfloat16> ? Elem::bf16 : Elem::f16;
  stage_operand<Tile, Tile::BN>(stage + Tile::BM * Tile::kPitch, p.w, kW, p.ldw, p.N, n0, k0, p.K,
                                p.w_async ? Staging::async : Staging::elements);
}

template <class Out>
__device__ __forceinline__ float load_out(const Out* y) {
  if constexpr (std::is_same_v<Out, float>) return *y;
  else if constexpr (std::is_same_v<Out, __nv_bfloat16>) return __bfloat162float(*y);
  else return __half2float(*y);
}

// The accumulators of one warp into y, bias and the old y added, masked to [0, M) x [0, N). Out is y's dtype: one
// switch outside the loops keeps their body small enough to unroll, so acc stays in registers.
template <class Tile, class Out>
__device__ __forceinline__ void store_block(const GemmParams& p, const float (&acc)[Tile::MI][Tile::NI][4], int row0,
                                            int col0) {
  Out* y = static_cast<Out*>(p.y);
  const int lane = sm80::thread_index() % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int i = 0; i < Tile::MI; ++i)
#pragma unroll
    for (int j = 0; j < Tile::NI; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + i * 16 + g + 8 * h, col = col0 + j * 8 + 2 * t;
        if (row >= p.M || col >= p.N) continue;
        const bool both = col + 1 < p.N;
        float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
        Out* at = y + int64_t(row) * p.ldy + col;
        if (p.bias) {
          v0 += cuda_linear::load_elem(p.bias, p.bias_type, col);
          if (both) v1 += cuda_linear::load_elem(p.bias, p.bias_type, col + 1);
        }
        if (p.accumulate) {
          v0 += load_out(at);
          if (both) v1 += load_out(at + 1);
        }
        if (both && p.y_pairs) {
          sm80::store2(at, v0, v1);
        } else {
          sm80::store1(at, v0);
          if (both) sm80::store1(at + 1, v1);
        }
      }
}

// One CTA: the block of y at rows m0.., columns n0... `smem` holds Tile::kSmemBytes, 16-byte aligned. The grouped
// GEMM (grouped_gemm_kernel.cuh) calls it with each expert's own p and its tile's corner.
template <class Tile, class W>
__device__ __forceinline__ void gemm_block_at(const GemmParams& p, unsigned char* smem, int m0, int n0) {
  W* stages = reinterpret_cast<W*>(smem);
  const int tid = sm80::thread_index(), lane = tid % 32, warp = tid / 32;
  const int wm = warp / Tile::kWarpsN, wn = warp % Tile::kWarpsN;
  const int steps = (p.K + Tile::BK - 1) / Tile::BK;

  float acc[Tile::MI][Tile::NI][4];
#pragma unroll
  for (int i = 0; i < Tile::MI; ++i)
#pragma unroll
    for (int j = 0; j < Tile::NI; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;

  // Prologue: steps 0 .. kStages - 2 in flight. Every iteration commits one group (empty past the end) so that
  // wait<kStages - 2> always means "step s has landed".
#pragma unroll
  for (int s = 0; s < Tile::kStages - 1; ++s) {
    if (s < steps) stage_step<Tile>(stages + s * Tile::kStageElems, p, m0, n0, s * Tile::BK);
    sm80::cp_async_commit();
  }
  for (int s = 0; s < steps; ++s) {
    sm80::cp_async_wait<Tile::kStages - 2>();
    // Step s visible to every warp, and every warp done with step s - 1, whose stage the prefetch below refills.
    sm80::sync_threads();
    const int next = s + Tile::kStages - 1;
    if (next < steps) stage_step<Tile>(stages + next % Tile::kStages * Tile::kStageElems, p, m0, n0, next * Tile::BK);
    sm80::cp_async_commit();

    const W* a_tile = stages + s % Tile::kStages * Tile::kStageElems;
    const W* b_tile = a_tile + Tile::BM * Tile::kPitch;
#pragma unroll
    for (int kk = 0; kk < Tile::BK; kk += 16) {
      uint32_t a[Tile::MI][4], b[Tile::NI / 2][4];
#pragma unroll
      for (int i = 0; i < Tile::MI; ++i) {
        // Lanes 0-15 address rows 0-15 at column kk, lanes 16-31 the same rows at kk + 8: a0..a3 in mma order.
        const int row = wm * Tile::WM + i * 16 + lane % 16, col = kk + lane / 16 * 8;
        sm80::ldmatrix_x4(a[i], sm80::smem_u32(a_tile + row * Tile::kPitch + col));
      }
#pragma unroll
      for (int j = 0; j < Tile::NI / 2; ++j) {
        // Two n-tiles of 8 W rows: b[j][0..1] the first's k 0-7 / 8-15, b[j][2..3] the second's.
        const int row = wn * Tile::WN + j * 16 + lane % 8 + lane / 16 * 8, col = kk + (lane / 8) % 2 * 8;
        sm80::ldmatrix_x4(b[j], sm80::smem_u32(b_tile + row * Tile::kPitch + col));
      }
#pragma unroll
      for (int i = 0; i < Tile::MI; ++i)
#pragma unroll
        for (int j = 0; j < Tile::NI; ++j)
          sm80::mma_16816<W>(acc[i][j], a[i], b[j / 2][j % 2 * 2], b[j / 2][j % 2 * 2 + 1]);
    }
  }
  sm80::cp_async_wait<0>();  // nothing may stay in flight past the block's end (the trailing groups are empty)

  const int row0 = m0 + wm * Tile::WM, col0 = n0 + wn * Tile::WN;
  switch (p.y_type) {
    case Elem::bf16: store_block<Tile, __nv_bfloat16>(p, acc, row0, col0); break;
    case Elem::f16: store_block<Tile, __half>(p, acc, row0, col0); break;
    default: store_block<Tile, float>(p, acc, row0, col0); break;
  }
}

// One CTA: block (blockIdx.x, blockIdx.y) of y.
template <class Tile, class W>
__device__ __forceinline__ void gemm_block(const GemmParams& p, unsigned char* smem) {
  gemm_block_at<Tile, W>(p, smem, int(blockIdx.x) * Tile::BM, int(blockIdx.y) * Tile::BN);
}

}  // namespace attnzoo::cuda_gemm
