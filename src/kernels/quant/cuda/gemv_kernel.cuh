#pragma once
// The device side of the quantized GEMV (gemv.cu launches it as gemv_launch.h plans it; gemv_cuda.h has the
// contract). Decode is weight-bandwidth bound: every byte of w is read once, by 16-byte asynchronous copies where
// the rows allow (4-byte ones, or plain 2-byte loads, where they do not), and the few activation rows are reused
// from shared memory for all the block's rows.
//
// A block of kWarps warps owns kRowsPerBlock consecutive rows of w, kRowsPerWarp per warp, and walks K in tiles
// of kTileElems, two buffers of each: while tile t is decoded, each warp's copies of its rows' bytes of tile t + 1
// and the block's of x [M, tile t + 1] (f32, cp.async; bf16 / f16 is loaded and converted instead) are in flight. After
// tile t's copies have landed and a barrier, each lane decodes its weights (gemv_formats.cuh: elements
// 4 lane .. 4 lane + 3 of each 128) and FMAs them with the kM activations (the bucket's rows past M are zeros whose
// sums are dropped, so the products need no branch) into kRowsPerWarp x kM f32 sums. At the end one butterfly reduction per sum, and
// lane 0 writes the row's outputs: + bias, + y's value when accumulating, rounded to y's dtype (gemm_cuda's
// epilogue, so a projection needs no second pass).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/quant/cuda/gemv_formats.cuh"
#include "kernels/quant/cuda/gemv_launch.h"
#include "kernels/softmax/cuda/sm80.cuh"

#if defined(ATTNZOO_CUDA_EMULATION)
#include <cstring>
#endif

namespace attnzoo::cuda_quant {

// Element i of an f32 / bf16 / f16 array (x, or y when accumulating), and y's stores rounded to its dtype.
__device__ __forceinline__ float load_value(const void* a, DType dtype, int64_t i) {
  if (dtype == DType::bf16) return __bfloat162float(static_cast<const __nv_bfloat16*>(a)[i]);
  if (dtype == DType::f16) return __half2float(static_cast<const __half*>(a)[i]);
  return static_cast<const float*>(a)[i];
}
__device__ __forceinline__ void store_value(void* a, DType dtype, int64_t i, float v) {
  if (dtype == DType::bf16)
    static_cast<__nv_bfloat16*>(a)[i] = __float2bfloat16_rn(v);
  else if (dtype == DType::f16)
    static_cast<__half*>(a)[i] = __float2half_rn(v);
  else
    static_cast<float*>(a)[i] = v;
}

#if defined(ATTNZOO_CUDA_EMULATION)
// The emulator's: the same bytes, alignment- and bounds-checked, so an over-read of a row fails the case.
inline unsigned short load_weights2(const unsigned char* p) {
  if (reinterpret_cast<uintptr_t>(p) % 2) cuda_emulation::fail("2-byte weight load from misaligned %p", p);
  cuda_emulation::check_global(p, 2, "weight load");
  unsigned short v;
  std::memcpy(&v, p, 2);
  return v;
}
inline float load_x(const void* x, DType dtype, int64_t i) {
  cuda_emulation::check_global(static_cast<const unsigned char*>(x) + i * int64_t(dtype_size(dtype)), dtype_size(dtype), "x load");
  return load_value(x, dtype, i);
}
inline float load_y(const void* y, DType dtype, int64_t i) {
  cuda_emulation::check_global(static_cast<const unsigned char*>(y) + i * int64_t(dtype_size(dtype)), dtype_size(dtype), "y load");
  return load_value(y, dtype, i);
}
inline float load_bias(const float* bias, int64_t n) {
  cuda_emulation::check_global(bias + n, 4, "bias load");
  return bias[n];
}
inline void store_y(void* y, DType dtype, int64_t i, float v) {
  cuda_emulation::check_global(static_cast<unsigned char*>(y) + i * int64_t(dtype_size(dtype)), dtype_size(dtype), "y store");
  store_value(y, dtype, i, v);
}
#else
// Weights are read once: streaming loads (evict-first), which keep L2 for the activations every block reads.
__device__ __forceinline__ unsigned short load_weights2(const unsigned char* p) {
  return __ldcs(reinterpret_cast<const unsigned short*>(p));
}
__device__ __forceinline__ float load_x(const void* x, DType dtype, int64_t i) { return load_value(x, dtype, i); }
__device__ __forceinline__ float load_y(const void* y, DType dtype, int64_t i) { return load_value(y, dtype, i); }
__device__ __forceinline__ float load_bias(const float* bias, int64_t n) { return bias[n]; }
__device__ __forceinline__ void store_y(void* y, DType dtype, int64_t i, float v) { store_value(y, dtype, i, v); }
#endif

// Four activations in one 16-byte shared-memory load (the project's own type: the emulator has no float4).
struct alignas(16) Float4 {
  float x, y, z, w;
};

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// A warp's rows' bytes of tile t into `dst` (kRowsPerWarp tiles of kTileBytes): asynchronous copies (cp.async,
// landing at the wait that covers the group the caller commits) where the rows allow 16- or 4-byte pieces,
// plain 2-byte loads and stores otherwise. `bytes` is a multiple of the width: every full tile is a multiple of
// 16, and the row is one of the width.
template <int kTileBytes>
__device__ __forceinline__ void stage_weights(const Params& p, int64_t row0, int64_t tile_start, int bytes,
                                              unsigned char* dst, int lane) {
  for (int r = 0; r < kRowsPerWarp; ++r) {
    if (row0 + r >= p.N) break;  // warp-uniform
    const unsigned char* src = p.w + (row0 + r) * p.w_row_bytes + tile_start;
    unsigned char* d = dst + r * kTileBytes;
    if (p.w_load_bytes == 16) {
      for (int o = lane * 16; o < bytes; o += 32 * 16) sm80::cp_async_16(sm80::smem_u32(d + o), src + o, true);
    } else if (p.w_load_bytes == 4) {
      for (int o = lane * 4; o < bytes; o += 32 * 4) sm80::cp_async_4(sm80::smem_u32(d + o), src + o, true);
    } else {
      for (int o = lane * 2; o < bytes; o += 32 * 2)
        *reinterpret_cast<unsigned short*>(d + o) = load_weights2(src + o);
    }
  }
}

// Tile t's activations into xs [kM][kTileElems] f32 (rows from M on keep the zeros written at the start): by the
// whole block, as asynchronous 16-byte copies (f32 rows of whole vectors) or loaded and converted.
template <int kM>
__device__ __forceinline__ void stage_x(const Params& p, int64_t k0, int elems, float* xs) {
  for (int m = 0; m < kM && m < p.M; ++m) {
    if (p.x_async) {
      const float* src = static_cast<const float*>(p.x) + m * p.x_stride + k0;
      for (int c = int(threadIdx.x) * 4; c < elems; c += kThreads * 4)
        sm80::cp_async_16(sm80::smem_u32(xs + m * kTileElems + c), src + c, true);
    } else {
      for (int c = int(threadIdx.x); c < elems; c += kThreads)
        xs[m * kTileElems + c] = load_x(p.x, p.x_dtype, m * p.x_stride + k0 + c);
    }
  }
}

// Shared memory: two buffers of xs [kM][kTileElems] f32, then two of the block's rows' tiles (tile_bytes(kType)
// each): tile t + 1's activations and weights are in flight while tile t is decoded.
template <QuantType kType, int kM>
__device__ __forceinline__ void quant_gemv_cta(const Params& p, unsigned char* smem) {
  using F = Format<kType>;
  constexpr int kTileBytes = kTileElems / F::kElems * F::kBytes;
  static_assert(kTileBytes % 16 == 0, "a row's tile must be whole 16-byte vectors");
  float* xs = reinterpret_cast<float*>(smem);
  unsigned char* ws = smem + 2 * kM * kTileElems * sizeof(float);
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
  const int64_t row0 = int64_t(blockIdx.x) * kRowsPerBlock + warp * kRowsPerWarp;
  auto x_tile = [&](int buffer) { return xs + buffer * kM * kTileElems; };
  auto warp_tiles = [&](int buffer) { return ws + (buffer * kRowsPerBlock + warp * kRowsPerWarp) * kTileBytes; };
  auto tile_elems = [&](int64_t k0) { return int(p.K - k0 < kTileElems ? p.K - k0 : kTileElems); };  // whole blocks
  auto stage = [&](int64_t k0, int buffer) {
    stage_weights<kTileBytes>(p, row0, k0 / F::kElems * F::kBytes, tile_elems(k0) / F::kElems * F::kBytes,
                              warp_tiles(buffer), lane);
    stage_x<kM>(p, k0, tile_elems(k0), x_tile(buffer));
  };

  float acc[kRowsPerWarp][kM];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int m = 0; m < kM; ++m) acc[r][m] = 0.f;
  // The bucket's rows past M: their sums are never written, so any bytes would do, but zeros keep them finite
  // (the loop's first barrier orders these stores before any read).
  for (int i = int(threadIdx.x); i < (kM - p.M) * kTileElems; i += kThreads)
    x_tile(0)[p.M * kTileElems + i] = x_tile(1)[p.M * kTileElems + i] = 0.f;

  const int64_t tiles = (p.K + kTileElems - 1) / kTileElems;
  if (tiles > 0) stage(0, 0);
  sm80::cp_async_commit();
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t k0 = t * kTileElems;
    const int elems = tile_elems(k0);
    __syncthreads();  // every warp is done with tile t - 1: the other buffers are free
    if (t + 1 < tiles) stage(k0 + kTileElems, int(t + 1) & 1);
    sm80::cp_async_commit();  // possibly empty: the wait below always leaves exactly the newest group in flight
    sm80::cp_async_wait<1>();  // this thread's copies of tile t have landed
    __syncthreads();           // and every thread's

    const float* x_now = x_tile(int(t) & 1);
    const unsigned char* tiles_now = warp_tiles(int(t) & 1);
    // 4 consecutive weights per lane, 128 per warp pass; the pass's activations are loaded once for both rows.
    for (int e = lane * 4; e < elems; e += 128) {
      Float4 xv[kM];
#pragma unroll
      for (int m = 0; m < kM; ++m) xv[m] = *reinterpret_cast<const Float4*>(x_now + m * kTileElems + e);
      const int blk = e / F::kElems, off = e % F::kElems;
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        if (row0 + r >= p.N) break;  // warp-uniform
        float w[4];
        F::decode4(tiles_now + r * kTileBytes + blk * F::kBytes, off, w);
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
      float s = warp_sum(acc[r][m]);
      if (lane == 0 && m < p.M) {
        const int64_t at = m * p.y_stride + row0 + r;
        if (p.bias) s += load_bias(p.bias, row0 + r);
        if (p.accumulate) s += load_y(p.y, p.y_dtype, at);
        store_y(p.y, p.y_dtype, at, s);
      }
    }
  }
}

}  // namespace attnzoo::cuda_quant
