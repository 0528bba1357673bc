// Decode scores against an int8 KV cache with integer dot products (AVX-512 VNNI). Each query row is rounded
// once per call to 16-bit integers with its own scale (|q| max -> 32767), and vpdpwssd multiplies 32 int16
// pairs per instruction against the key bytes sign-extended in registers (one vpmovsxbw per 32 elements,
// shared by every query row of the head), where the bf16 / f32 paths spend a widening and a conversion per 16
// or 32 elements. The products and their int32 sums are exact; the only rounding is the queries', at most
// |q|max / 65534 per element (bf16 query elements above |q|max / 256 keep all their bits), so the path is taken
// for bf16 queries only (kv_quant_test.cc bounds its error). The query's and the key's scales multiply the score.
// Compiled with -mavx512vnni (see CMakeLists.txt); reached only when vnni_int8_enabled().
// GCC 12 flags its own AVX-512 headers (results seeded from _mm512_undefined_*) once they inline here.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/softmax/decode_avx512_sums.h"

namespace attnzoo {
namespace {

template <size_t kRows>
inline void score_rows(const int8_t* __restrict k, size_t D, const int16_t* __restrict q, float* __restrict s,
                       size_t lds) {
  __m512i acc[kRows];
  for (size_t r = 0; r < kRows; ++r) acc[r] = _mm512_setzero_si512();
  for (size_t d = 0; d < D; d += 32) {
    const __m512i kv = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + d)));
    for (size_t r = 0; r < kRows; ++r) acc[r] = _mm512_dpwssd_epi32(acc[r], kv, _mm512_loadu_si512(q + r * D + d));
  }
  if constexpr (kRows == 4) {
    alignas(16) float sums[4];
    // As f32: every lane and sum is an integer below 2^31 (exact up to 2^24, rounded once past it).
    _mm_store_ps(sums, sums_of_four(_mm512_cvtepi32_ps(acc[0]), _mm512_cvtepi32_ps(acc[1]),
                                    _mm512_cvtepi32_ps(acc[2]), _mm512_cvtepi32_ps(acc[3])));
    for (size_t r = 0; r < 4; ++r) s[r * lds] = sums[r];
  } else {
    for (size_t r = 0; r < kRows; ++r) s[r * lds] = float(_mm512_reduce_add_epi32(acc[r]));
  }
}

}  // namespace

// s[h * lds_head + r * lds] = sum_d q[(h * R + r) * D + d] * k[h * k_head + d] for H heads and R rows each (int16
// queries, int8 keys, unscaled). D is a multiple of 32 and at most 512, so |sum| <= 32767 * 128 * D < 2^31.
void decode_score_key_i8_i16(const int8_t* k, int64_t k_head, size_t H, size_t D, const int16_t* q, size_t R,
                             float* s, size_t lds_head, size_t lds) {
  for (size_t h = 0; h < H; ++h) {
    const int8_t* kh = k + int64_t(h) * k_head;
    const int16_t* qh = q + h * R * D;
    float* sh = s + h * lds_head;
    size_t r = 0;
    for (; r + 4 <= R; r += 4) score_rows<4>(kh, D, qh + r * D, sh + r * lds, lds);
    switch (R - r) {
      case 3: score_rows<3>(kh, D, qh + r * D, sh + r * lds, lds); break;
      case 2: score_rows<2>(kh, D, qh + r * D, sh + r * lds, lds); break;
      case 1: score_rows<1>(kh, D, qh + r * D, sh + r * lds, lds); break;
      default: break;
    }
  }
}

}  // namespace attnzoo
