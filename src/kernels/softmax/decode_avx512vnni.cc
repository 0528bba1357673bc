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

#include "kernels/softmax/decode_avx512_scores.h"

namespace attnzoo {
namespace {

struct Int16Dot {
  using Key = int8_t;
  using Query = int16_t;
  using Acc = __m512i;
  static __m512i zero() { return _mm512_setzero_si512(); }
  static __m512i load_key(const int8_t* k) {
    return _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(k)));
  }
  static __m512i load_query(const int16_t* q) { return _mm512_loadu_si512(q); }
  static __m512i dot(__m512i acc, __m512i k, __m512i q) { return _mm512_dpwssd_epi32(acc, k, q); }
  // As f32: every lane and sum is an integer below 2^31 (exact up to 2^24, rounded once past it).
  static __m512 to_f32(__m512i acc) { return _mm512_cvtepi32_ps(acc); }
};

}  // namespace

// s[h * lds_head + r * lds] (+ 1 for k1) = sum_d q[(h * R + r) * D + d] * k[h * k_head + d] for H heads and R
// rows each (int16 queries, int8 keys, unscaled); k1 may be null. D is a multiple of 32 and at most 512, so
// |sum| <= 32767 * 128 * D < 2^31.
void decode_score_keys_i8_i16(const int8_t* k0, const int8_t* k1, int64_t k_head, size_t H, size_t D,
                              const int16_t* q, size_t R, float* s, size_t lds_head, size_t lds) {
  score_keys<Int16Dot, true>(k0, k1, k_head, H, D, q, R, s, lds_head, lds);
}

}  // namespace attnzoo
