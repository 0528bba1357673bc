#pragma once
// One weight of each GGUF format, decoded on the device from its block's bytes in shared memory: the layouts of
// dequant_reference.cc (the definition, with the same f32 operations: a scale times an integer, then the offset),
// written for the kernel's walk, in which lane l of a warp takes element 32 i + l of a block. So a warp decodes
// one 32-element sub-block at a time: every lane shares its scale (one broadcast read) and the lanes' x reads are
// consecutive floats (no bank conflicts). Bytes are read one at a time: blocks of 18, 20, 34 or 210 bytes leave
// no alignment to rely on.
#include <cuda_fp16.h>

#include <cstdint>

#include "core/quant_type.h"

namespace attnzoo::cuda_quant {

__device__ __forceinline__ float half_at(const unsigned char* p) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(p[0] | (p[1] << 8))));
}

template <QuantType kType>
struct Format;

// BF16 / F16 are walked as blocks of 32 elements like the 32-element formats.
template <>
struct Format<QuantType::BF16> {
  static constexpr int kElems = 32, kBytes = 64;
  __device__ static __forceinline__ float value(const unsigned char* b, int e) {
    return __uint_as_float(uint32_t(b[2 * e] | (b[2 * e + 1] << 8)) << 16);
  }
};

template <>
struct Format<QuantType::F16> {
  static constexpr int kElems = 32, kBytes = 64;
  __device__ static __forceinline__ float value(const unsigned char* b, int e) { return half_at(b + 2 * e); }
};

// d, then qs[16]: byte j holds element j (low nibble) and j + 16 (high); values biased by 8.
template <>
struct Format<QuantType::Q4_0> {
  static constexpr int kElems = 32, kBytes = 18;
  __device__ static __forceinline__ float value(const unsigned char* b, int e) {
    const int q = (b[2 + (e & 15)] >> (4 * (e >> 4))) & 0xF;
    return half_at(b) * float(q - 8);
  }
};

// d, m, then qs[16] as Q4_0, unbiased: d q + m.
template <>
struct Format<QuantType::Q4_1> {
  static constexpr int kElems = 32, kBytes = 20;
  __device__ static __forceinline__ float value(const unsigned char* b, int e) {
    const int q = (b[4 + (e & 15)] >> (4 * (e >> 4))) & 0xF;
    return half_at(b) * float(q) + half_at(b + 2);
  }
};

// d, then 32 int8 values.
template <>
struct Format<QuantType::Q8_0> {
  static constexpr int kElems = 32, kBytes = 34;
  __device__ static __forceinline__ float value(const unsigned char* b, int e) {
    return half_at(b) * float(static_cast<signed char>(b[2 + e]));
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
  __device__ static __forceinline__ float value(const unsigned char* b, int e) {
    const int j = e >> 5, l = e & 31;
    int sc, m;
    k_scale_min(b + 4, j, sc, m);
    const float dl = half_at(b) * float(sc), ml = half_at(b + 2) * float(m);
    const int q = (b[16 + 32 * (j >> 1) + l] >> (4 * (j & 1))) & 0xF;
    return dl * float(q) - ml;
  }
};

// As Q4_K with qh[32] before qs: bit j of byte l is the fifth bit of element l of sub-block j.
template <>
struct Format<QuantType::Q5_K> {
  static constexpr int kElems = 256, kBytes = 176;
  __device__ static __forceinline__ float value(const unsigned char* b, int e) {
    const int j = e >> 5, l = e & 31;
    int sc, m;
    k_scale_min(b + 4, j, sc, m);
    const float dl = half_at(b) * float(sc), ml = half_at(b + 2) * float(m);
    const int q = ((b[48 + 32 * (j >> 1) + l] >> (4 * (j & 1))) & 0xF) | (((b[16 + l] >> j) & 1) << 4);
    return dl * float(q) - ml;
  }
};

// ql[128] (byte m of each 64-byte half: elements m and m + 64 of the half), qh[64] (2 bits, byte l of each
// 32-byte half: elements l, l + 32, l + 64, l + 96), int8 scales[16] (per 16 elements), d; values biased by 32.
template <>
struct Format<QuantType::Q6_K> {
  static constexpr int kElems = 256, kBytes = 210;
  __device__ static __forceinline__ float value(const unsigned char* b, int e) {
    const int half = e >> 7, p = e & 127;
    const int lo = (b[64 * half + (p & 63)] >> (4 * (p >> 6))) & 0xF;
    const int hi = (b[128 + 32 * half + (p & 31)] >> (2 * (p >> 5))) & 3;
    const float dl = half_at(b + 208) * float(static_cast<signed char>(b[192 + (e >> 4)]));
    return dl * float((lo | (hi << 4)) - 32);
  }
};

}  // namespace attnzoo::cuda_quant
