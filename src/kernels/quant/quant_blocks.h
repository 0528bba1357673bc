#pragma once
// Small pieces of the block layouts shared by the reference and the per-target kernels.
#include <cstdint>
#include <cstring>

namespace attnzoo {

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// IEEE half to f32, exactly (subnormals included), inline: block scales are converted once per block, and an
// out-of-line call per block costs more than the block's arithmetic.
inline float half_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16, em = h & 0x7FFF;
  uint32_t bits;
  if (em >= 0x7C00) {
    bits = sign | 0x7F800000u | ((em & 0x3FF) << 13);  // inf / NaN
  } else if (em >= 0x0400) {
    bits = sign | ((em << 13) + ((127u - 15u) << 23));
  } else {  // subnormal or zero: m * 2^-24 is exact in f32
    float f = float(em) * 5.9604644775390625e-8f;
    std::memcpy(&bits, &f, 4);
    bits |= sign;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline float load_half(const uint8_t* p) { return half_to_f32(load_u16(p)); }

// Q4_K / Q5_K pack eight 6-bit scales and eight 6-bit mins into 12 bytes: sub-blocks 0-3 in the low 6 bits of
// bytes 0-3 (scales) and 4-7 (mins); sub-blocks 4-7 in the nibbles of bytes 8-11 plus the top 2 bits of bytes 0-7.
struct KScaleMin {
  int scale, min;
};
inline KScaleMin k_scale_min(const uint8_t* s, int j) {
  if (j < 4) return {s[j] & 63, s[j + 4] & 63};
  return {(s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4), (s[j + 4] >> 4) | ((s[j] >> 6) << 4)};
}

// All of a Q4_K / Q5_K block's scales and mins at once, 4 per 32-bit word: u[0..1] = scale bytes 0-7, u[2..3] =
// min bytes 0-7 (the same values as k_scale_min, for kernels that widen them 8 at a time).
inline void k_scales_mins(const uint8_t* s, uint32_t u[4]) {
  std::memcpy(u, s, 12);
  const uint32_t low6 = 0x3f3f3f3f, low4 = 0x0f0f0f0f, top2 = 0x03030303;
  u[3] = ((u[2] >> 4) & low4) | (((u[1] >> 6) & top2) << 4);  // mins 4-7
  const uint32_t mins03 = u[1] & low6;
  u[1] = (u[2] & low4) | (((u[0] >> 6) & top2) << 4);  // scales 4-7
  u[2] = mins03;
  u[0] &= low6;  // scales 0-3
}

// MXFP4: E2M1 code -> value, doubled so that every entry is an integer; the block scale is halved to match.
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// IQ4_NL / IQ4_XS: 4-bit code -> signed value, a fixed non-uniform grid (llama.cpp's kvalues_iq4nl) times the
// block's or sub-block's scale.
inline constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// IQ4_XS's 6-bit scale of sub-block j (of 8), biased by 32: the low 4 bits are nibble j % 2 of scales_l[j / 2], the
// high 2 bits are bits 2j, 2j + 1 of the little-endian scales_h.
inline int iq4_xs_scale(const uint8_t* block, int j) {
  const int lo = (block[4 + j / 2] >> (4 * (j % 2))) & 0xF, hi = (load_u16(block + 2) >> (2 * j)) & 3;
  return (lo | (hi << 4)) - 32;
}

// 2^(e - 127) / 2 as an f32 (E8M0 scale, halved); e < 2 gives the subnormals 2^-128 and 2^-127.
inline float e8m0_to_f32_half(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : uint32_t(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace attnzoo
