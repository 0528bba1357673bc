// Register-blocked f32 tile products, compiled once per SIMD target (include inside HWY_NAMESPACE users).
// C[M x N] (+)= A[M x K] * B[K x N]: A's elements are broadcast, B's rows are loaded as vectors, so B must be
// row-major with N padded to a multiple of the vector length. This one shape serves both halves of attention:
// S = Q * K^T (with K packed transposed) and O += P * V.
#if defined(ATTNZOO_TILE_GEMM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNZOO_TILE_GEMM_INL_H_
#undef ATTNZOO_TILE_GEMM_INL_H_
#else
#define ATTNZOO_TILE_GEMM_INL_H_
#endif

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Wide targets have 32 vector registers: 6 rows x 4 vectors of accumulators; narrow ones 16: 6 x 2.
#if HWY_MAX_BYTES >= 64
constexpr size_t kTileCols = 4;
#else
constexpr size_t kTileCols = 2;
#endif
constexpr size_t kTileRows = 6;

template <size_t kRows, size_t kCols>
HWY_INLINE void MicroTile(size_t K, const float* HWY_RESTRICT A, size_t lda, const float* HWY_RESTRICT B,
                          size_t ldb, float* HWY_RESTRICT C, size_t ldc, bool accumulate) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  using V = hn::Vec<decltype(d)>;
  V acc[kRows][kCols];
  for (size_t r = 0; r < kRows; ++r)
    for (size_t c = 0; c < kCols; ++c)
      acc[r][c] = accumulate ? hn::LoadU(d, C + r * ldc + c * L) : hn::Zero(d);
  for (size_t k = 0; k < K; ++k) {
    V b[kCols];
    for (size_t c = 0; c < kCols; ++c) b[c] = hn::LoadU(d, B + k * ldb + c * L);
    for (size_t r = 0; r < kRows; ++r) {
      const V a = hn::Set(d, A[r * lda + k]);
      for (size_t c = 0; c < kCols; ++c) acc[r][c] = hn::MulAdd(a, b[c], acc[r][c]);
    }
  }
  for (size_t r = 0; r < kRows; ++r)
    for (size_t c = 0; c < kCols; ++c) hn::StoreU(acc[r][c], d, C + r * ldc + c * L);
}

template <size_t kCols>
HWY_INLINE void RowsOfTile(size_t rows, size_t K, const float* A, size_t lda, const float* B, size_t ldb, float* C,
                           size_t ldc, bool accumulate) {
  switch (rows) {
    case 6: return MicroTile<6, kCols>(K, A, lda, B, ldb, C, ldc, accumulate);
    case 5: return MicroTile<5, kCols>(K, A, lda, B, ldb, C, ldc, accumulate);
    case 4: return MicroTile<4, kCols>(K, A, lda, B, ldb, C, ldc, accumulate);
    case 3: return MicroTile<3, kCols>(K, A, lda, B, ldb, C, ldc, accumulate);
    case 2: return MicroTile<2, kCols>(K, A, lda, B, ldb, C, ldc, accumulate);
    default: return MicroTile<1, kCols>(K, A, lda, B, ldb, C, ldc, accumulate);
  }
}

// N must be a multiple of Lanes(float). Column panels stay outermost so a panel of B stays in L1.
HWY_INLINE void TileGemm(size_t M, size_t N, size_t K, const float* A, size_t lda, const float* B, size_t ldb,
                         float* C, size_t ldc, bool accumulate) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  size_t n = 0;
  for (; n + kTileCols * L <= N; n += kTileCols * L)
    for (size_t m = 0; m < M; m += kTileRows)
      RowsOfTile<kTileCols>(HWY_MIN(kTileRows, M - m), K, A + m * lda, lda, B + n, ldb, C + m * ldc + n, ldc,
                            accumulate);
  for (; n < N; n += L)
    for (size_t m = 0; m < M; m += kTileRows)
      RowsOfTile<1>(HWY_MIN(kTileRows, M - m), K, A + m * lda, lda, B + n, ldb, C + m * ldc + n, ldc, accumulate);
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#endif  // include guard
