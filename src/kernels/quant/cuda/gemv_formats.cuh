#pragma once
// Four consecutive weights of each GGUF format, decoded on the device from their block's bytes in shared memory:
// the layouts of dequant_reference.cc (the definition, with the same f32 operations: a scale times an integer,
// then the offset), written for the kernel's walk, in which each lane takes 4 consecutive elements (8 lanes per
// 32-element sub-block), so a scale is decoded once per 4 weights and the lanes' activation reads are
// consecutive float4s. Offsets `off` are multiples of 4; 4 weights never straddle a sub-block or a block.
// Packed values are read as one 32-bit word where the block layout keeps them 4-byte aligned (Q4_1, the
// K-quants of 144 / 176 bytes) and as two 16-bit halves where it does not (blocks of 18, 34 and 210 bytes start
// on even bytes only).
#include <cuda_fp16.h>

#include <cstdint>

#include "core/quant_type.h"

namespace attnzoo::cuda_quant {

__device__ __forceinline__ float half_at(const unsigned char* p) {
  return __half2float(__ushort_as_half(*reinterpret_cast<const unsigned short*>(p)));
}
// 4 bytes at a 2-byte aligned address, little-endian.
__device__ __forceinline__ uint32_t u32_at2(const unsigned char* p) {
  const unsigned short* h = reinterpret_cast<const unsigned short*>(p);
  return uint32_t(h[0]) | (uint32_t(h[1]) << 16);
}
__device__ __forceinline__ uint32_t u32_at4(const unsigned char* p) { return *reinterpret_cast<const uint32_t*>(p); }

// float(v) - bias for a small integer v (< 2^23) without an integer-to-float conversion, which issues at a
// quarter of the f32 rate or less and would bound the 4-bit formats below the memory's speed: v's bits under
// 2^23's exponent are the float 2^23 + v, and subtracting 2^23 + bias (exact below 2^24) leaves exactly v - bias,
// the value the reference's float(v - bias) gives.
template <int kBias>
__device__ __forceinline__ float small_int(uint32_t v) {
  return __uint_as_float(0x4B000000u | v) - float(8388608 + kBias);
}

template <QuantType kType>
struct Format;

// BF16 / F16 are walked as blocks of 32 elements like the 32-element formats.
template <>
struct Format<QuantType::BF16> {
  static constexpr int kElems = 32, kBytes = 64;
  __device__ static __forceinline__ void decode4(const unsigned char* b, int off, float (&w)[4]) {
    const uint32_t lo = u32_at4(b + 2 * off), hi = u32_at4(b + 2 * off + 4);
    w[0] = __uint_as_float(lo << 16), w[1] = __uint_as_float(lo & 0xFFFF0000u);
    w[2] = __uint_as_float(hi << 16), w[3] = __uint_as_float(hi & 0xFFFF0000u);
  }
};

template <>
struct Format<QuantType::F16> {
  static constexpr int kElems = 32, kBytes = 64;
  __device__ static __forceinline__ void decode4(const unsigned char* b, int off, float (&w)[4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = half_at(b + 2 * (off + i));
  }
};

// d, then qs[16]: byte j holds element j (low nibble) and j + 16 (high); values biased by 8.
template <>
struct Format<QuantType::Q4_0> {
  static constexpr int kElems = 32, kBytes = 18;
  __device__ static __forceinline__ void decode4(const unsigned char* b, int off, float (&w)[4]) {
    const float d = half_at(b);
    const uint32_t q = u32_at2(b + 2 + (off & 15)) >> (4 * (off >> 4));
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = d * small_int<8>((q >> (8 * i)) & 0xF);
  }
};

// d, m, then qs[16] as Q4_0, unbiased: d q + m.
template <>
struct Format<QuantType::Q4_1> {
  static constexpr int kElems = 32, kBytes = 20;
  __device__ static __forceinline__ void decode4(const unsigned char* b, int off, float (&w)[4]) {
    const float d = half_at(b), m = half_at(b + 2);
    const uint32_t q = u32_at4(b + 4 + (off & 15)) >> (4 * (off >> 4));
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = d * small_int<0>((q >> (8 * i)) & 0xF) + m;
  }
};

// d, then 32 int8 values.
template <>
struct Format<QuantType::Q8_0> {
  static constexpr int kElems = 32, kBytes = 34;
  __device__ static __forceinline__ void decode4(const unsigned char* b, int off, float (&w)[4]) {
    const float d = half_at(b);
    const uint32_t q = u32_at2(b + 2 + off);
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = d * small_int<128>(((q >> (8 * i)) & 0xFF) ^ 0x80);  // int8 + 128
  }
};

// Sub-block j's 6-bit scale and min of a Q4_K / Q5_K block (quant_blocks.h's k_scale_min, on the device).
__device__ __forceinline__ void k_scale_min(const unsigned char* s, int j, int& scale, int& min) {
  if (j < 4) {
    scale = s[j] & 63;
    min = s[j + 4] & 63;
  } else {
    scale = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// d, dmin, scales[12], qs[128]: byte l of chunk c holds element l of sub-block 2c (low nibble) and 2c + 1 (high).
template <>
struct Format<QuantType::Q4_K> {
  static constexpr int kElems = 256, kBytes = 144;
  __device__ static __forceinline__ void decode4(const unsigned char* b, int off, float (&w)[4]) {
    const int j = off >> 5;
    int sc, mn;
    k_scale_min(b + 4, j, sc, mn);
    const float dl = half_at(b) * small_int<0>(sc), ml = half_at(b + 2) * small_int<0>(mn);
    const uint32_t q = u32_at4(b + 16 + 32 * (j >> 1) + (off & 31)) >> (4 * (j & 1));
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = dl * small_int<0>((q >> (8 * i)) & 0xF) - ml;
  }
};

// As Q4_K with qh[32] before qs: bit j of byte l is the fifth bit of element l of sub-block j.
template <>
struct Format<QuantType::Q5_K> {
  static constexpr int kElems = 256, kBytes = 176;
  __device__ static __forceinline__ void decode4(const unsigned char* b, int off, float (&w)[4]) {
    const int j = off >> 5;
    int sc, mn;
    k_scale_min(b + 4, j, sc, mn);
    const float dl = half_at(b) * small_int<0>(sc), ml = half_at(b + 2) * small_int<0>(mn);
    const uint32_t q = u32_at4(b + 48 + 32 * (j >> 1) + (off & 31)) >> (4 * (j & 1));
    const uint32_t h = u32_at4(b + 16 + (off & 31)) >> j;
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = dl * small_int<0>(((q >> (8 * i)) & 0xF) | (((h >> (8 * i)) & 1) << 4)) - ml;
  }
};

// ql[128] (byte m of each 64-byte half: elements m and m + 64 of the half), qh[64] (2 bits, byte l of each
// 32-byte half: elements l, l + 32, l + 64, l + 96), int8 scales[16] (per 16 elements), d; values biased by 32.
template <>
struct Format<QuantType::Q6_K> {
  static constexpr int kElems = 256, kBytes = 210;
  __device__ static __forceinline__ void decode4(const unsigned char* b, int off, float (&w)[4]) {
    const int half = off >> 7, p = off & 127;
    const uint32_t lo = u32_at2(b + 64 * half + (p & 63)) >> (4 * (p >> 6));
    const uint32_t hi = u32_at2(b + 128 + 32 * half + (p & 31)) >> (2 * (p >> 5));
    const float dl = half_at(b + 208) * small_int<128>(b[192 + (off >> 4)] ^ 0x80u);  // int8 scale
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = dl * small_int<32>(((lo >> (8 * i)) & 0xF) | (((hi >> (8 * i)) & 3) << 4));
  }
};

}  // namespace attnzoo::cuda_quant
