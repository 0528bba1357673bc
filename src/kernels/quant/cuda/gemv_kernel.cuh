#pragma once
// The device side of the quantized GEMV (gemv.cu launches it as gemv_launch.h plans it; gemv_cuda.h has the
// contract). Decode is weight-bandwidth bound: every byte of w is read once, by 16-byte loads where the rows
// allow (4- or 2-byte ones where they do not), and the few activation rows are reused from shared memory for all the block's rows.
//
// A block of kWarps warps owns kRowsPerBlock consecutive rows of w, kRowsPerWarp per warp, and walks K in tiles
// of kTileElems: the block stages x [kM, tile] as f32 (rows past M as zeros, so the products need no branch), each
// warp copies its rows' bytes of the tile, and after one barrier each lane decodes its weights (gemv_formats.cuh:
// elements 4 lane .. 4 lane + 3 of each 128) and FMAs them with the kM activations into kRowsPerWarp x kM f32 sums. At the
// end one butterfly reduction per sum, and lane 0 writes the row's outputs.
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/quant/cuda/gemv_formats.cuh"
#include "kernels/quant/cuda/gemv_launch.h"

#if defined(ATTNZOO_CUDA_EMULATION)
#include <cstring>
#endif

namespace attnzoo::cuda_quant {

#if defined(ATTNZOO_CUDA_EMULATION)
// The emulator's: the same bytes, alignment- and bounds-checked, so an over-read of a row fails the case.
inline uint4 load_weights16(const unsigned char* p) {
  if (reinterpret_cast<uintptr_t>(p) % 16) cuda_emulation::fail("16-byte weight load from misaligned %p", p);
  cuda_emulation::check_global(p, 16, "weight load");
  uint4 v;
  std::memcpy(&v, p, 16);
  return v;
}
inline uint32_t load_weights4(const unsigned char* p) {
  if (reinterpret_cast<uintptr_t>(p) % 4) cuda_emulation::fail("4-byte weight load from misaligned %p", p);
  cuda_emulation::check_global(p, 4, "weight load");
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline unsigned short load_weights2(const unsigned char* p) {
  if (reinterpret_cast<uintptr_t>(p) % 2) cuda_emulation::fail("2-byte weight load from misaligned %p", p);
  cuda_emulation::check_global(p, 2, "weight load");
  unsigned short v;
  std::memcpy(&v, p, 2);
  return v;
}
inline void store_y(float* y, float v) {
  cuda_emulation::check_global(y, 4, "y store");
  *y = v;
}
inline float load_x(const void* x, bool bf16, int64_t i) {
  cuda_emulation::check_global(static_cast<const unsigned char*>(x) + i * (bf16 ? 2 : 4), bf16 ? 2 : 4, "x load");
  return bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(x)[i]) : static_cast<const float*>(x)[i];
}
#else
// Weights are read once: streaming loads (evict-first), which keep L2 for the activations every block reads.
__device__ __forceinline__ uint4 load_weights16(const unsigned char* p) {
  return __ldcs(reinterpret_cast<const uint4*>(p));
}
__device__ __forceinline__ uint32_t load_weights4(const unsigned char* p) {
  return __ldcs(reinterpret_cast<const unsigned int*>(p));
}
__device__ __forceinline__ unsigned short load_weights2(const unsigned char* p) {
  return __ldcs(reinterpret_cast<const unsigned short*>(p));
}
__device__ __forceinline__ void store_y(float* y, float v) { *y = v; }
__device__ __forceinline__ float load_x(const void* x, bool bf16, int64_t i) {
  return bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(x)[i]) : static_cast<const float*>(x)[i];
}
#endif

// Four activations in one 16-byte shared-memory load (the project's own type: the emulator has no float4).
struct alignas(16) Float4 {
  float x, y, z, w;
};

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Shared memory: xs [kM][kTileElems] f32, then the block's rows' tiles, tile_bytes(kType) each.
template <QuantType kType, int kM>
__device__ __forceinline__ void quant_gemv_cta(const Params& p, unsigned char* smem) {
  using F = Format<kType>;
  constexpr int kTileBytes = kTileElems / F::kElems * F::kBytes;
  static_assert(kTileBytes % 16 == 0, "a row's tile must be whole 16-byte vectors");
  float* xs = reinterpret_cast<float*>(smem);
  unsigned char* ws = smem + kM * kTileElems * sizeof(float);
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
  const int64_t row0 = int64_t(blockIdx.x) * kRowsPerBlock + warp * kRowsPerWarp;

  float acc[kRowsPerWarp][kM];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int m = 0; m < kM; ++m) acc[r][m] = 0.f;

  for (int64_t k0 = 0; k0 < p.K; k0 += kTileElems) {
    const int elems = int(p.K - k0 < kTileElems ? p.K - k0 : kTileElems);  // whole blocks: K is
    const int bytes = elems / F::kElems * F::kBytes;
    __syncthreads();  // every warp is done with the previous tile
    for (int m = 0; m < kM; ++m)
      for (int c = int(threadIdx.x); c < elems; c += kThreads)
        xs[m * kTileElems + c] = m < p.M ? load_x(p.x, p.x_bf16, m * p.x_stride + k0 + c) : 0.f;
    for (int r = 0; r < kRowsPerWarp; ++r) {
      if (row0 + r >= p.N) break;  // warp-uniform
      const unsigned char* src = p.w + (row0 + r) * p.w_row_bytes + k0 / F::kElems * F::kBytes;
      unsigned char* dst = ws + (warp * kRowsPerWarp + r) * kTileBytes;
      // bytes is a multiple of the load width: every full tile is a multiple of 16, and so is the row of the width
      if (p.w_load_bytes == 16) {
        for (int o = lane * 16; o < bytes; o += 32 * 16)
          *reinterpret_cast<uint4*>(dst + o) = load_weights16(src + o);
      } else if (p.w_load_bytes == 4) {
        for (int o = lane * 4; o < bytes; o += 32 * 4)
          *reinterpret_cast<uint32_t*>(dst + o) = load_weights4(src + o);
      } else {
        for (int o = lane * 2; o < bytes; o += 32 * 2)
          *reinterpret_cast<unsigned short*>(dst + o) = load_weights2(src + o);
      }
    }
    __syncthreads();  // x is the block's; each warp's rows are its own, but one barrier serves both

    // 4 consecutive weights per lane, 128 per warp pass; the pass's activations are loaded once for both rows.
    for (int e = lane * 4; e < elems; e += 128) {
      Float4 xv[kM];
#pragma unroll
      for (int m = 0; m < kM; ++m) xv[m] = *reinterpret_cast<const Float4*>(xs + m * kTileElems + e);
      const int blk = e / F::kElems, off = e % F::kElems;
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        if (row0 + r >= p.N) break;  // warp-uniform
        float w[4];
        F::decode4(ws + (warp * kRowsPerWarp + r) * kTileBytes + blk * F::kBytes, off, w);
#pragma unroll
        for (int m = 0; m < kM; ++m)
          acc[r][m] += w[0] * xv[m].x + w[1] * xv[m].y + w[2] * xv[m].z + w[3] * xv[m].w;
      }
    }
  }

#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    if (row0 + r >= p.N) break;
#pragma unroll
    for (int m = 0; m < kM; ++m) {
      const float s = warp_sum(acc[r][m]);
      if (lane == 0 && m < p.M) store_y(p.y + m * p.y_stride + row0 + r, s);
    }
  }
}

}  // namespace attnzoo::cuda_quant
