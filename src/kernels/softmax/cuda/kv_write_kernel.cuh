#pragma once
// The device side of the paged KV-cache write (kv_write.cu launches it; kv_write_cuda.h has the contract): one
// warp per (token, head) row, lanes striding over head_dim, so a row of any length and any cache dtype is one
// pass of coalesced loads and stores. Quantized rows take a second pass over the same (now cached) elements after
// a warp-wide amax. Every conversion is the host's, operation for operation: the widening is exact, f32 -> bf16 /
// f16 rounds to nearest even, the scale is the IEEE quotient amax / qmax, int8 rounds x / scale with rint and e4m3
// is encoded by the integer steps of core/dtype.cc's f32_to_f8e4m3, so bytes and scales match kv_quant's.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/softmax/kv_quant.h"

namespace attnzoo::cuda_kv_write {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// Src: float / __nv_bfloat16 / __half. Dst: the same three, int8_t or Fp8E4M3.
template <class Src, class Dst>
struct KvWriteParams {
  const Src* rows;
  int64_t row_token, row_head;  // element strides of rows [T, H, D] (row_head 0 for [T, D])
  Dst* cache;
  int64_t cache_block, cache_slot, cache_head;  // element strides of cache [blocks, block_size, H, D]
  float* scale;                                 // quantized caches: [blocks, block_size, H]
  int64_t scale_block, scale_slot, scale_head;
  const int64_t* slot_mapping;  // [T], on the device
  int64_t tokens, heads, dim, block_size, num_slots;
};

template <class Dst>
inline constexpr bool kQuantized = std::is_same_v<Dst, int8_t> || std::is_same_v<Dst, Fp8E4M3>;

template <class T> __device__ __forceinline__ float widen(T v);
template <> __device__ __forceinline__ float widen(float v) { return v; }
template <> __device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> __device__ __forceinline__ float widen(__half v) { return __half2float(v); }

template <class T> __device__ __forceinline__ T narrow(float v);
template <> __device__ __forceinline__ float narrow(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 narrow(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half narrow(float v) { return __float2half_rn(v); }

// core/dtype.cc's f32_to_f8e4m3 step for step (saturating to +-448, NaN to 0x7f, round to nearest even), not
// cvt.rn.satfinite.e4m3x2.f32, which sm_80 lacks and whose NaN byte differs.
__device__ __forceinline__ uint8_t f32_to_e4m3(float f) {
  uint32_t bits = __float_as_uint(f);
  const uint8_t sign = uint8_t((bits >> 24) & 0x80);
  bits &= 0x7fffffffu;
  if (bits > 0x7f800000u) return uint8_t(sign | 0x7f);
  const float mag = __uint_as_float(bits);
  if (mag >= 448.f) return uint8_t(sign | 0x7e);
  if (mag < 0x1p-6f) return uint8_t(sign | uint8_t(rintf(mag * 512.f)));
  const uint32_t exp = (bits >> 23) - 127 + 7, mant = bits & 0x7fffff;
  uint32_t q = (exp << 3) | (mant >> 20);
  const uint32_t rem = mant & 0xfffff;
  if (rem > 0x80000 || (rem == 0x80000 && (q & 1))) ++q;
  return uint8_t(sign | (q > 0x7e ? 0x7e : q));
}

// The host quantizes on threads that flush subnormals to zero (core/denormals.h), inputs included; so does this.
template <class Src>
__device__ __forceinline__ float widen_flushed(Src v) {
  const float x = widen(v);
  return fabsf(x) < FLT_MIN ? copysignf(0.f, x) : x;
}

template <class Src, class Dst>
__device__ __forceinline__ void quantize_row(const KvWriteParams<Src, Dst>& p, const Src* src, Dst* dst,
                                             float* scale_out, int lane) {
  float amax = 0.f;
  int finite = 1;
  for (int64_t i = lane; i < p.dim; i += 32) {
    const float x = widen_flushed(src[i]);
    amax = fmaxf(amax, fabsf(x));  // a NaN is dropped here but caught by `finite`
    finite &= isfinite(x) ? 1 : 0;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    finite &= __shfl_xor_sync(0xffffffffu, finite, o);
  }
  constexpr float kMax = std::is_same_v<Dst, int8_t> ? 127.f : 448.f;
  const float scale = amax / kMax;
  // As quantize_kv_row: zeros for a row that is zero, too small to scale without subnormals, or not finite.
  const bool zero = !finite || !(scale >= FLT_MIN);
  for (int64_t i = lane; i < p.dim; i += 32) {
    const float x = zero ? 0.f : widen_flushed(src[i]) / scale;
    if constexpr (std::is_same_v<Dst, int8_t>) {
      dst[i] = int8_t(fminf(fmaxf(rintf(x), -127.f), 127.f));
    } else {
      dst[i] = Fp8E4M3{f32_to_e4m3(x)};
    }
  }
  if (lane == 0) *scale_out = !finite ? __uint_as_float(0x7fc00000u) : zero ? 0.f : scale;
}

template <class Src, class Dst>
__device__ __forceinline__ void write_rows(const KvWriteParams<Src, Dst>& p) {
  const int lane = int(threadIdx.x) % 32;
  const int64_t n = p.tokens * p.heads;
  for (int64_t r = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32; r < n; r += int64_t(gridDim.x) * kWarps) {
    const int64_t t = r / p.heads, h = r % p.heads;
    const int64_t slot = p.slot_mapping[t];
    // Padding (negative) is skipped; a slot past the cache too, so an unchecked call never writes outside it.
    if (slot < 0 || slot >= p.num_slots) continue;
    const int64_t block = slot / p.block_size, off = slot % p.block_size;
    const Src* src = p.rows + t * p.row_token + h * p.row_head;
    Dst* dst = p.cache + block * p.cache_block + off * p.cache_slot + h * p.cache_head;
    if constexpr (kQuantized<Dst>) {
      quantize_row(p, src, dst, p.scale + block * p.scale_block + off * p.scale_slot + h * p.scale_head, lane);
    } else if constexpr (std::is_same_v<Src, Dst>) {
      for (int64_t i = lane; i < p.dim; i += 32) dst[i] = src[i];  // the bits, NaN payloads included
    } else {
      for (int64_t i = lane; i < p.dim; i += 32) dst[i] = narrow<Dst>(widen(src[i]));
    }
  }
}

// The checked path's first pass: the lowest token whose slot is past the cache, into *first_bad (which starts
// at ~0ull and stays so when every slot fits).
__device__ __forceinline__ void find_bad_slot(const int64_t* slot_mapping, int64_t tokens, int64_t num_slots,
                                              unsigned long long* first_bad) {
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < tokens; t += int64_t(gridDim.x) * blockDim.x)
    if (slot_mapping[t] >= num_slots) atomicMin(first_bad, (unsigned long long)t);
}

// Blocks for a grid-stride loop over `items`.
inline unsigned grid_for(int64_t items, int64_t per_block) {
  const int64_t blocks = (items + per_block - 1) / per_block;
  return unsigned(blocks < 65536 ? blocks : 65536);
}

}  // namespace attnzoo::cuda_kv_write
