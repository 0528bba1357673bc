// Decode scores with vdpbf16ps, for bf16 queries against a bf16 cache: the products of two bf16 values are
// exact in f32 and summed in f32, so this computes what the widening f32 path computes (up to summation
// order) with one instruction per 32 elements instead of a load, two widening ops and two FMAs per row.
// int8 and fp8 (e4m3) key rows take the same instruction: every int8 value and every e4m3 value (subnormals
// included) is exactly a normal bf16, so each key vector is converted once in registers and serves all rows;
// the row's scale stays on the score, as in the widening path.
// Compiled with -mavx512bf16 (see CMakeLists.txt); reached only when bf16_dot_enabled().
// GCC 12 flags its own AVX-512 headers (results seeded from _mm512_undefined_*) once they inline here.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/softmax/decode_avx512_scores.h"

namespace attnzoo {
namespace {

// 32 key elements as bf16, in order.
inline __m512bh load_key(const uint16_t* k) { return (__m512bh)_mm512_loadu_si512(k); }

inline __m512bh load_key(const int8_t* k) {
  // |x| <= 128 has at most 8 significant bits: exact in bf16, so the round-to-nearest pack changes nothing.
  const __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k))));
  const __m512 hi =
      _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k + 16))));
  return _mm512_cvtne2ps_pbh(hi, lo);
}

// e4m3 bytes as bf16 bits: exponent and mantissa moved up with the bias difference (127 - 7) added, exact for
// normal values; the eight subnormal codes (m 2^-9, normal in bf16) come from a table, since vdpbf16ps would
// read a bf16 subnormal as zero anyway.
struct Fp8Key {
  uint8_t bits;
};

inline __m512i e4m3_subnormals() {
  alignas(64) uint16_t t[32] = {};
  for (int m = 1; m < 8; ++m) {
    const float x = float(m) * 0x1p-9f;
    uint32_t u;
    __builtin_memcpy(&u, &x, 4);
    t[m] = uint16_t(u >> 16);  // m 2^-9 has at most 3 significant bits: the truncation is exact
  }
  return _mm512_load_si512(t);
}

inline __m512bh load_key(const Fp8Key* k) {
  static const __m512i subnormals = e4m3_subnormals();
  const __m512i b = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(k)));
  const __m512i mag = _mm512_and_si512(b, _mm512_set1_epi16(0x7f));
  const __m512i normal = _mm512_add_epi16(_mm512_slli_epi16(mag, 4), _mm512_set1_epi16((127 - 7) << 7));
  const __mmask32 sub = _mm512_cmplt_epu16_mask(mag, _mm512_set1_epi16(8));
  const __m512i v = _mm512_mask_permutexvar_epi16(normal, sub, mag, subnormals);
  const __m512i sign = _mm512_slli_epi16(_mm512_and_si512(b, _mm512_set1_epi16(0x80)), 8);
  return (__m512bh)_mm512_or_si512(v, sign);
}

template <class K>
struct Bf16Dot {
  using Key = K;
  using Query = uint16_t;
  using Acc = __m512;
  static __m512 zero() { return _mm512_setzero_ps(); }
  static __m512bh load_key(const K* k) { return attnzoo::load_key(k); }
  static __m512bh load_query(const uint16_t* q) { return (__m512bh)_mm512_loadu_si512(q); }
  static __m512 dot(__m512 acc, __m512bh k, __m512bh q) { return _mm512_dpbf16_ps(acc, q, k); }
  static __m512 to_f32(__m512 acc) { return acc; }
};

}  // namespace

// s[h * lds_head + r * lds] = dot(q[(h * R + r) * D ...], key row of head h) for H heads and R rows each; head h's
// key row starts at k + h * k_head elements. D is a multiple of 32. One key per call: these caches are bound by
// memory, and two keys per call measured slower (decode.cc).
void decode_score_key_bf16(const uint16_t* k, int64_t k_head, size_t H, size_t D, const uint16_t* q, size_t R,
                           float* s, size_t lds_head, size_t lds) {
  score_keys<Bf16Dot<uint16_t>, false>(k, nullptr, k_head, H, D, q, R, s, lds_head, lds);
}

// The same against int8 key rows and e4m3 key rows (one byte per element), unscaled.
void decode_score_key_i8_bf16(const int8_t* k, int64_t k_head, size_t H, size_t D, const uint16_t* q, size_t R,
                              float* s, size_t lds_head, size_t lds) {
  score_keys<Bf16Dot<int8_t>, false>(k, nullptr, k_head, H, D, q, R, s, lds_head, lds);
}

void decode_score_key_f8_bf16(const uint8_t* k, int64_t k_head, size_t H, size_t D, const uint16_t* q, size_t R,
                              float* s, size_t lds_head, size_t lds) {
  score_keys<Bf16Dot<Fp8Key>, false>(reinterpret_cast<const Fp8Key*>(k), nullptr, k_head, H, D, q, R, s, lds_head,
                                     lds);
}

}  // namespace attnzoo
