#pragma once
// The horizontal sums of the decode score kernels' hand-written AVX-512 files (decode_avx512bf16.cc,
// decode_avx512vnni.cc), each compiled for its own ISA: internal linkage, so each file keeps its own copy.
#include <immintrin.h>

namespace attnzoo {
namespace {

// [sum a, sum b, sum c, sum e]: two interleave levels, then the four 128-bit blocks folded.
inline __m128 sums_of_four(__m512 a, __m512 b, __m512 c, __m512 e) {
  const __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
  const __m512 ce = _mm512_add_ps(_mm512_unpacklo_ps(c, e), _mm512_unpackhi_ps(c, e));
  const __m512d ab64 = _mm512_castps_pd(ab), ce64 = _mm512_castps_pd(ce);
  const __m512 s = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(ab64, ce64)),
                                 _mm512_castpd_ps(_mm512_unpackhi_pd(ab64, ce64)));
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(s), _mm512_extractf32x8_ps(s, 1));
  return _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
}

}  // namespace
}  // namespace attnzoo
