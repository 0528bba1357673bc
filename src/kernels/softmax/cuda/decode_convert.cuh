#pragma once
// The CUDA decode's 8-bit caches: int8 / e4m3 bytes widened into the 16-bit operand types (the f32 <-> 16-bit
// packing both kernels share is in sm80.cuh).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "kernels/softmax/cuda/sm80.cuh"

namespace attnzoo::cuda_decode {

// One e4m3 byte of the cache as a template argument (int8_t stands for int8 caches).
struct Fp8Byte {
  uint8_t bits;
};

namespace convert {

// Four cache bytes (bits 0-7 the lowest element) widened to two Elem pairs, exactly: every int8 and every e4m3
// value is representable in both bf16 and f16, so the only rounding left is the scale's, applied in f32.
template <class Elem, class KvT>
__device__ __forceinline__ void widen4(uint32_t w, uint32_t& lo, uint32_t& hi) {
  static_assert(sizeof(KvT) == 1, "only 8-bit caches are widened");
  if constexpr (std::is_same_v<KvT, int8_t>) {
    // 2^23 + (x + 128) as the bits of an f32, minus 2^23 + 128: one PRMT and one FADD per byte instead of I2F,
    // which issues at a quarter of their rate and would make the widening outlast the memory it hides behind.
    const uint32_t u = w ^ 0x80808080u;
    float f[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) f[i] = __uint_as_float(__byte_perm(u, 0x4B000000u, 0x7540u | uint32_t(i))) - 8388736.f;
    lo = sm80::pack2<Elem>(f[0], f[1]);
    hi = sm80::pack2<Elem>(f[2], f[3]);
  } else {
    // cvt.rn.f16x2.e4m3x2 where the GPU has it (sm_89+), cuda_fp8.h's bit manipulation on sm_80.
    const __half2_raw h01 = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(w & 0xFFFFu), __NV_E4M3);
    const __half2_raw h23 = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(w >> 16), __NV_E4M3);
    if constexpr (std::is_same_v<Elem, __half>) {
      lo = uint32_t(h01.x) | (uint32_t(h01.y) << 16);
      hi = uint32_t(h23.x) | (uint32_t(h23.y) << 16);
    } else {
      const float2 a = __half22float2(__half2(h01)), b = __half22float2(__half2(h23));
      lo = sm80::pack2<Elem>(a.x, a.y);
      hi = sm80::pack2<Elem>(b.x, b.y);
    }
  }
}

}  // namespace convert

}  // namespace attnzoo::cuda_decode
