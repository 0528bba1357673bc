#pragma once
// What the two AVX-512 VNNI files (gemv_avx512vnni.cc: the GGUF rows; gemv_groups_avx512vnni.cc: the regrouped
// rows) both use. Only for sources compiled with -mavx512vnni (the *_avx512vnni.cc files).
#include <immintrin.h>

#include <cstring>

#include "kernels/quant/quant_blocks.h"

namespace attnzoo {

// F16C's scalar conversion (exact): cheaper than the portable bit manipulation, once per block.
inline float half(const uint8_t* p) { return _cvtsh_ss(load_u16(p)); }

// The formats of blocks of 32; IQ4_XS's sub-blocks of 32 are taken as such blocks whose scale is d (ls - 32).
enum class Fmt32 { Q4_0, Q4_1, Q8_0, IQ4_NL, IQ4_XS };

// The IQ4 grid plus 128 (u8, as vpdpbusd's weight side must be) in every 128-bit lane, for vpshufb on the codes.
inline __m512i iq4_grid_u8() {
  __m128i g;
  std::memcpy(&g, kIq4Values, 16);
  return _mm512_broadcast_i32x4(_mm_xor_si128(g, _mm_set1_epi8(char(0x80))));
}

}  // namespace attnzoo
