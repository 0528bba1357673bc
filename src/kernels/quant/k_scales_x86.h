#pragma once
// Q4_K's 6-bit sub-block scales and minima for the 16 (or 8) rows of a regrouped unit at once (row_groups.h lays
// byte k of the rows' 12 packed bytes side by side): for the VNNI and the AVX2 regrouped rows (x86, SSE2).
#include <immintrin.h>

#include <cstddef>

namespace attnzoo {

// Sub-block j's scales (s) and minima (m) as u8 lanes, one per row, where bytes(k) gives the rows' packed byte k
// (llama.cpp's packing of 8 + 8 six-bit values in 12 bytes).
template <class Bytes>
inline void q4_k_rows_scale_min(Bytes bytes, size_t j, __m128i& s, __m128i& m) {
  const __m128i m63 = _mm_set1_epi8(63), m15 = _mm_set1_epi8(15), m48 = _mm_set1_epi8(0x30);
  if (j < 4) {
    s = _mm_and_si128(bytes(j), m63);
    m = _mm_and_si128(bytes(j + 4), m63);
  } else {
    s = _mm_or_si128(_mm_and_si128(bytes(j + 4), m15), _mm_and_si128(_mm_srli_epi16(bytes(j - 4), 2), m48));
    m = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(bytes(j + 4), 4), m15),
                     _mm_and_si128(_mm_srli_epi16(bytes(j), 2), m48));
  }
}

}  // namespace attnzoo
