// Compiled with -mavx512bf16 (see CMakeLists.txt); reached only through a CPUID-checked dispatch.
// GCC 12 flags its own AVX-512 headers (results seeded from _mm512_undefined_*) once they inline here.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>

#include "core/dtype.h"
#include "kernels/common/bf16_dot.h"

namespace attnzoo {
namespace {

template <size_t kRows, size_t kCols>
inline void micro_tile(size_t K2, const uint32_t* __restrict A, size_t lda, const uint32_t* __restrict B, size_t ldb,
                       float* __restrict C, size_t ldc, bool accumulate) {
  __m512 acc[kRows][kCols];
  for (size_t r = 0; r < kRows; ++r)
    for (size_t c = 0; c < kCols; ++c)
      acc[r][c] = accumulate ? _mm512_loadu_ps(C + r * ldc + c * 16) : _mm512_setzero_ps();
  for (size_t k = 0; k < K2; ++k) {
    __m512bh b[kCols];
    for (size_t c = 0; c < kCols; ++c) b[c] = (__m512bh)_mm512_loadu_si512(B + k * ldb + c * 16);
    for (size_t r = 0; r < kRows; ++r) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(int(A[r * lda + k]));
      for (size_t c = 0; c < kCols; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], a, b[c]);
    }
  }
  for (size_t r = 0; r < kRows; ++r)
    for (size_t c = 0; c < kCols; ++c) _mm512_storeu_ps(C + r * ldc + c * 16, acc[r][c]);
}

template <size_t kCols>
inline void rows_of_tile(size_t rows, size_t K2, const uint32_t* A, size_t lda, const uint32_t* B, size_t ldb,
                         float* C, size_t ldc, bool accumulate) {
  switch (rows) {
    case 6: return micro_tile<6, kCols>(K2, A, lda, B, ldb, C, ldc, accumulate);
    case 5: return micro_tile<5, kCols>(K2, A, lda, B, ldb, C, ldc, accumulate);
    case 4: return micro_tile<4, kCols>(K2, A, lda, B, ldb, C, ldc, accumulate);
    case 3: return micro_tile<3, kCols>(K2, A, lda, B, ldb, C, ldc, accumulate);
    case 2: return micro_tile<2, kCols>(K2, A, lda, B, ldb, C, ldc, accumulate);
    default: return micro_tile<1, kCols>(K2, A, lda, B, ldb, C, ldc, accumulate);
  }
}

}  // namespace

void bf16_pair_gemm_dot(size_t M, size_t N, size_t K2, const uint32_t* A, size_t lda, const uint32_t* B,
                        size_t ldb, float* C, size_t ldc, bool accumulate) {
  constexpr size_t kRows = 6, kCols = 4;
  size_t n = 0;
  for (; n + kCols * 16 <= N; n += kCols * 16)
    for (size_t m = 0; m < M; m += kRows)
      rows_of_tile<kCols>(std::min(kRows, M - m), K2, A + m * lda, lda, B + n, ldb, C + m * ldc + n, ldc,
                          accumulate);
  // The last 16 to 48 columns in one strip (a few-rows product's whole width, see linear_bf16_gemm.cc): one pass
  // over A, and more products per broadcast than 16-column strips.
  const auto strip = [&]<size_t kWidth>() {
    for (size_t m = 0; m < M; m += kRows)
      rows_of_tile<kWidth>(std::min(kRows, M - m), K2, A + m * lda, lda, B + n, ldb, C + m * ldc + n, ldc,
                           accumulate);
  };
  switch ((N - n) / 16) {
    case 3: strip.template operator()<3>(); break;
    case 2: strip.template operator()<2>(); break;
    case 1: strip.template operator()<1>(); break;
    default: break;
  }
}

namespace {

// 16 rows of 16 uint32 at src (row stride ld_src) -> 16 rows of 16 at dst (row stride ld_dst), transposed in
// registers: 32-bit and 64-bit interleaves within 128-bit lanes, then two rounds of 128-bit lane shuffles.
inline void transpose_16x16(const uint32_t* src, size_t ld_src, uint32_t* dst, size_t ld_dst) {
  __m512i r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_si512(src + size_t(i) * ld_src);
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xdd);
    t[i + 8] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xdd);
  }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
  }
  for (int i = 0; i < 16; ++i) _mm512_storeu_si512(dst + size_t(i) * ld_dst, r[i]);
}

}  // namespace

void transpose_pairs(const uint32_t* src, size_t ld_src, size_t rows, size_t cols, uint32_t* dst, size_t ld_dst) {
  const __m512i index = _mm512_mullo_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(int(ld_src)));
  for (size_t r0 = 0; r0 < rows; r0 += 16) {
    const size_t n = std::min<size_t>(16, rows - r0);
    const uint32_t* base = src + r0 * ld_src;
    size_t c = 0;
    if (n == 16)
      for (; c + 16 <= cols; c += 16) transpose_16x16(base + c, ld_src, dst + c * ld_dst + r0, ld_dst);
    // Edges (a last group of fewer than 16 rows, or columns past the last multiple of 16): masked gathers.
    const __mmask16 valid = __mmask16((1u << n) - 1u);
    for (; c < cols; ++c) {
      const __m512i v = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), valid, index, base + c, 4);
      _mm512_storeu_si512(dst + c * ld_dst + r0, v);
    }
  }
}

void pack_f32_to_bf16_pairs(const float* src, size_t n, uint32_t* dst) {
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    // cvtne2ps: high operand gives the upper 16 lanes; lane order keeps pairs (2i, 2i+1) together.
    const __m512bh packed = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + i + 16), _mm512_loadu_ps(src + i));
    _mm512_storeu_si512(dst + i / 2, (__m512i)packed);
  }
  for (; i < n; i += 2) {
    const uint32_t lo = f32_to_bf16(src[i]);
    const uint32_t hi = i + 1 < n ? f32_to_bf16(src[i + 1]) : 0u;
    dst[i / 2] = lo | (hi << 16);
  }
}

}  // namespace attnzoo
