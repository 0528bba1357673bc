// Decode's P * V over an int8 value cache with vpdpwssd: each row's softmax weights (times the value rows'
// scales) are rounded to 15-bit integers against the row's largest weight in the tile, the values widened to
// i16, and one instruction then sums two keys' products into each i32 output lane, where the f32 path spends
// two FMAs and the widening of two value vectors to f32. The weights' rounding is the only new error: at most
// half a step of max_j w_j / 32767 per weight and tile, ~1e-5 of the output, far below the int8 cache's own
// rounding of the values (half a step of amax / 127). i32 lanes cannot overflow: a tile of at most 64 keys adds
// at most 64 * 32767 * 128 < 2^31. Compiled with -mavx512vnni (see CMakeLists.txt) and reached only when
// vnni_int8_enabled().
//
// Two value rows a, b (widened to i16) are interleaved into i32 lanes [a_i, b_i] within 128-bit blocks, so of
// each 32 columns, lane (block t, i) of the low interleave holds column 8 t + i and of the high one 8 t + 4 + i.
// The output rows are kept in that order (position 16 k + 4 t + i holds column 8 t + 4 k + i) while a chunk of
// keys is accumulated, and put in order once at its end (decode_vnni_order).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace attnzoo {
namespace {

constexpr float kWeightMax = 32767.f;

template <size_t kRows>
void accumulate_rows(const int8_t* __restrict v, const int64_t* __restrict vofs, size_t cols, size_t Dv,
                     const int16_t* __restrict wq, size_t ldw, const float* __restrict wscale, float* __restrict o,
                     size_t ldo) {
  for (size_t c0 = 0; c0 < Dv; c0 += 32) {
    __m512i acc[kRows][2];
    for (size_t r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
    for (size_t j = 0; j < cols; j += 2) {
      const __m512i a = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + vofs[j] + c0)));
      // Past the last key: zero values (its weight is zero too).
      const __m512i b = j + 1 < cols ? _mm512_cvtepi8_epi16(_mm256_loadu_si256(
                                           reinterpret_cast<const __m256i*>(v + vofs[j + 1] + c0)))
                                     : _mm512_setzero_si512();
      const __m512i lo = _mm512_unpacklo_epi16(a, b), hi = _mm512_unpackhi_epi16(a, b);
      for (size_t r = 0; r < kRows; ++r) {
        int32_t w2;
        std::memcpy(&w2, wq + r * ldw + j, 4);
        const __m512i w = _mm512_set1_epi32(w2);
        acc[r][0] = _mm512_dpwssd_epi32(acc[r][0], w, lo);
        acc[r][1] = _mm512_dpwssd_epi32(acc[r][1], w, hi);
      }
    }
    for (size_t r = 0; r < kRows; ++r) {
      const __m512 s = _mm512_set1_ps(wscale[r]);
      float* dst = o + r * ldo + c0;
      for (size_t k = 0; k < 2; ++k)
        _mm512_storeu_ps(dst + 16 * k,
                         _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r][k]), s, _mm512_loadu_ps(dst + 16 * k)));
    }
  }
}

}  // namespace

// Rounds w[r][0, cols) (R rows, ldw apart, non-negative) to 15-bit integers in wq (rows ldq apart, zero padded
// to an even count of keys) and returns each row's step in wscale: w ~ wq * wscale. A row holding NaN or Inf
// gets a NaN step, so its output turns NaN as the f32 path's would.
void decode_quantize_weights_i16(const float* w, size_t R, size_t cols, size_t ldw, int16_t* wq, size_t ldq,
                                 float* wscale) {
  for (size_t r = 0; r < R; ++r) {
    const float* wr = w + r * ldw;
    int16_t* qr = wq + r * ldq;
    __m512 mx = _mm512_setzero_ps(), sum = _mm512_setzero_ps();
    for (size_t j = 0; j < cols; j += 16) {
      const __m512 x = _mm512_maskz_loadu_ps(__mmask16(cols - j >= 16 ? 0xffff : (1u << (cols - j)) - 1), wr + j);
      mx = _mm512_max_ps(mx, x);
      sum = _mm512_add_ps(sum, x);
    }
    const float m = _mm512_reduce_max_ps(mx);
    if (!std::isfinite(_mm512_reduce_add_ps(sum))) {
      std::memset(qr, 0, (cols + 1) / 2 * 2 * sizeof(int16_t));
      wscale[r] = NAN;
      continue;
    }
    const __m512 inv = _mm512_set1_ps(m > 0.f ? kWeightMax / m : 0.f);
    for (size_t j = 0; j < cols; j += 16) {
      // One key past an odd count is written as zero: the masked load reads it as 0.
      const size_t n = std::min<size_t>(16, (cols + 1) / 2 * 2 - j);
      const __mmask16 k = __mmask16(n >= 16 ? 0xffff : (1u << n) - 1);
      const __mmask16 in = __mmask16(cols - j >= 16 ? 0xffff : (1u << (cols - j)) - 1);
      const __m512i i = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(in, wr + j), inv));
      _mm256_mask_storeu_epi16(qr + j, k, _mm512_cvtepi32_epi16(i));
    }
    wscale[r] = m / kWeightMax;
  }
}

// o[r][0, Dv) += sum_j wq[r][j] * wscale[r] * (V row j) for R rows, o in the interleaved order described above.
// Key j's row is v + vofs[j]; Dv is a multiple of 32, cols at most 64.
void decode_accumulate_i8_vnni(const int8_t* v, const int64_t* vofs, size_t cols, size_t Dv, size_t R,
                               const int16_t* wq, size_t ldw, const float* wscale, float* o, size_t ldo) {
  size_t r = 0;
  for (; r + 4 <= R; r += 4) accumulate_rows<4>(v, vofs, cols, Dv, wq + r * ldw, ldw, wscale + r, o + r * ldo, ldo);
  switch (R - r) {
    case 3: accumulate_rows<3>(v, vofs, cols, Dv, wq + r * ldw, ldw, wscale + r, o + r * ldo, ldo); break;
    case 2: accumulate_rows<2>(v, vofs, cols, Dv, wq + r * ldw, ldw, wscale + r, o + r * ldo, ldo); break;
    case 1: accumulate_rows<1>(v, vofs, cols, Dv, wq + r * ldw, ldw, wscale + r, o + r * ldo, ldo); break;
    default: break;
  }
}

// From the interleaved order to natural order.
void decode_vnni_order(float* o, size_t Dv) {
  float tmp[32];
  for (size_t c0 = 0; c0 < Dv; c0 += 32) {
    for (size_t k = 0; k < 2; ++k)
      for (size_t t = 0; t < 4; ++t)
        for (size_t i = 0; i < 4; ++i) tmp[8 * t + 4 * k + i] = o[c0 + 16 * k + 4 * t + i];
    std::memcpy(o + c0, tmp, sizeof(tmp));
  }
}

}  // namespace attnzoo
