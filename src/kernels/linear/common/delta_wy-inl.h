// The WY / UT machinery of the chunked delta rule, shared by the gated delta rule and KDA. Include inside a
// per-target translation unit.
//
// Within a chunk of c tokens (rows padded to cp, a multiple of 16, with zero tokens that change nothing), the
// sequential updates collapse to dense products once the strictly lower matrix
//   A[i][j] = beta_i (k_i . k_j decayed from j to i)            (j < i)
// is inverted: T = (I + A)^-1 by forward substitution, then
//   [W | U0] = T [-beta Gamma K | beta V]   (Gamma: decay from the chunk start; W carries the minus sign)
//   U = U0 + W S                            (the chunk's corrected values, u_i = beta_i (v_i - ...))
//   O = (Gamma Q) S + Aqk U                 (Aqk lower triangular, diagonal included)
//   S <- Gamma_last S + (K decayed to the chunk end)^T U
// Every product is a tile GEMM; lower-triangular factors are multiplied one 16-row block at a time so the zero
// upper triangle costs nothing.
#if defined(ATTNZOO_DELTA_WY_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNZOO_DELTA_WY_INL_H_
#undef ATTNZOO_DELTA_WY_INL_H_
#else
#define ATTNZOO_DELTA_WY_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>

#include "kernels/common/tile_gemm-inl.h"
#include "kernels/linear/common/delta_rows-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {

constexpr size_t kDeltaBlock = 16;  // rows per triangular block (and KDA's sub-chunk)

// Row i of T = (I + A)^-1 for strictly lower A: e_i - sum_{m<i} A[i][m] T[m], accumulated in kVecs registers
// (row m of T is zero right of its diagonal, so only columns [0, i) are touched).
template <size_t kVecs>
HWY_INLINE void DeltaInverseRow(const float* HWY_RESTRICT A, size_t cp, size_t i, float* HWY_RESTRICT T) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  hn::Vec<decltype(d)> acc[kVecs];
  for (size_t v = 0; v < kVecs; ++v) acc[v] = hn::Zero(d);
  for (size_t m = 0; m < i; ++m) {
    const auto a = hn::Set(d, A[i * cp + m]);
    const float* src = T + m * cp;
    for (size_t v = 0; v < kVecs; ++v) acc[v] = hn::NegMulAdd(a, hn::Load(d, src + v * L), acc[v]);
  }
  float* row = T + i * cp;
  for (size_t v = 0; v < kVecs; ++v) hn::Store(acc[v], d, row + v * L);
  for (size_t j = kVecs * L; j < cp; ++j) row[j] = 0.f;
  row[i] = 1.f;
}

// T = (I + A)^-1 for strictly lower A (cp x cp, row-major, ld cp), by forward substitution.
HWY_INLINE void DeltaUnitLowerInverse(const float* HWY_RESTRICT A, size_t cp, float* HWY_RESTRICT T) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  size_t i = 0;
  // Row i needs columns [0, i]: one vector per L columns, in registers (wide targets: at most 8 for cp 128).
  for (; i < cp && (i + 1 + L - 1) / L <= 8; ++i) {
    switch ((i + L) / L) {
      case 1: DeltaInverseRow<1>(A, cp, i, T); break;
      case 2: DeltaInverseRow<2>(A, cp, i, T); break;
      case 3: DeltaInverseRow<3>(A, cp, i, T); break;
      case 4: DeltaInverseRow<4>(A, cp, i, T); break;
      case 5: DeltaInverseRow<5>(A, cp, i, T); break;
      case 6: DeltaInverseRow<6>(A, cp, i, T); break;
      case 7: DeltaInverseRow<7>(A, cp, i, T); break;
      default: DeltaInverseRow<8>(A, cp, i, T); break;
    }
  }
  // Narrow targets with long rows: accumulate in memory.
  for (; i < cp; ++i) {
    float* row = T + i * cp;
    std::fill(row, row + cp, 0.f);
    const size_t width = (i + L) / L * L;
    for (size_t m = 0; m < i; ++m) {
      const auto a = hn::Set(d, A[i * cp + m]);
      const float* src = T + m * cp;
      for (size_t j = 0; j < width; j += L)
        hn::Store(hn::NegMulAdd(a, hn::Load(d, src + j), hn::Load(d, row + j)), d, row + j);
    }
    row[i] = 1.f;
  }
}

// C[cp x N] (+)= Lower[cp x cp] * B[cp x N] for a lower-triangular left factor, one 16-row block at a time with
// the inner dimension cut at the block's diagonal.
HWY_INLINE void DeltaLowerGemm(size_t cp, size_t N, const float* Lower, size_t ldl, const float* B, size_t ldb,
                               float* C, size_t ldc, bool accumulate) {
  for (size_t r0 = 0; r0 < cp; r0 += kDeltaBlock)
    TileGemm(kDeltaBlock, N, r0 + kDeltaBlock, Lower + r0 * ldl, ldl, B, ldb, C + r0 * ldc, ldc, accumulate);
}

// dst[c x r] = src[r x c]^T (src row-major with leading dimension lds).
HWY_INLINE void DeltaTranspose(const float* HWY_RESTRICT src, size_t lds, size_t rows, size_t cols,
                               float* HWY_RESTRICT dst, size_t ldd) {
  constexpr size_t kB = 8;  // small square blocks keep both sides in cache lines
  for (size_t r0 = 0; r0 < rows; r0 += kB)
    for (size_t c0 = 0; c0 < cols; c0 += kB)
      for (size_t r = r0; r < std::min(rows, r0 + kB); ++r)
        for (size_t c = c0; c < std::min(cols, c0 + kB); ++c) dst[c * ldd + r] = src[r * lds + c];
}

// The chunk's work after A, Aqk and the decayed operands are built.
//   Z: [2cp x ld] with ld = Kp + Vp. On entry rows [0, cp) are unused, rows [cp, 2cp) hold Gamma Q in
//      columns [0, Kp). On exit rows [0, cp) hold [W | U] and rows [cp, 2cp) columns [Kp, Kp + Vp) hold O.
//   rhs: [cp x ld] = [-beta Gamma K | beta V].   kd_t: [K x cp] = (K decayed to the chunk end)^T.
//   S: [K x Vp] state; decay_state(S) multiplies it by Gamma_last once it has been read for U and O.
struct DeltaChunkOperands {
  size_t cp, K, Kp, Vp;
  const float* T;    // (I + A)^-1, cp x cp
  const float* Aqk;  // cp x cp
  const float* rhs;
  const float* kd_t;
  float* Z;
};

template <class DecayState>
HWY_INLINE void DeltaChunkStep(const DeltaChunkOperands& c, float* HWY_RESTRICT S, const DecayState& decay_state) {
  const size_t ld = c.Kp + c.Vp;
  // [W | U0] = T [-beta Gamma K | beta V]
  DeltaLowerGemm(c.cp, ld, c.T, c.cp, c.rhs, ld, c.Z, ld, false);
  // O starts at zero; then one product gives both U = U0 + W S and O = (Gamma Q) S.
  for (size_t i = c.cp; i < 2 * c.cp; ++i) std::fill(c.Z + i * ld + c.Kp, c.Z + i * ld + ld, 0.f);
  TileGemm(2 * c.cp, c.Vp, c.K, c.Z, ld, S, c.Vp, c.Z + c.Kp, ld, true);
  // O += Aqk U
  DeltaLowerGemm(c.cp, c.Vp, c.Aqk, c.cp, c.Z + c.Kp, ld, c.Z + c.cp * ld + c.Kp, ld, true);
  // S <- Gamma_last S + Kd^T U
  decay_state(S);
  TileGemm(c.K, c.Vp, c.cp, c.kd_t, c.cp, c.Z + c.Kp, ld, S, c.Vp, true);
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#endif  // include guard
