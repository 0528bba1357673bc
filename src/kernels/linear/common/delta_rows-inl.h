// Per-target helpers shared by the delta-family kernels (recurrent and chunked): loading one head vector of a
// token into padded f32 (optionally L2-normalised and scaled), and short vector reductions.
// Include inside a per-target translation unit, after <hwy/highway.h>.
#if defined(ATTNZOO_DELTA_ROWS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNZOO_DELTA_ROWS_INL_H_
#undef ATTNZOO_DELTA_ROWS_INL_H_
#else
#define ATTNZOO_DELTA_ROWS_INL_H_
#endif

#include <hwy/highway.h>

#include <cmath>

#include "core/convert.h"
#include "kernels/linear/common/delta_problem.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Every row buffer is padded to a multiple of 16 floats (the widest vector), padding kept at zero, so loops
// run over whole vectors on every target and the tile GEMM's "N multiple of the lane count" always holds.
constexpr size_t kDeltaPad = 16;
HWY_INLINE size_t DeltaPadded(int64_t n) { return (size_t(n) + kDeltaPad - 1) / kDeltaPad * kDeltaPad; }

HWY_INLINE float DeltaDot(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, size_t n_padded) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  auto acc0 = hn::Zero(d), acc1 = hn::Zero(d);
  size_t i = 0;
  for (; i + 2 * L <= n_padded; i += 2 * L) {
    acc0 = hn::MulAdd(hn::LoadU(d, a + i), hn::LoadU(d, b + i), acc0);
    acc1 = hn::MulAdd(hn::LoadU(d, a + i + L), hn::LoadU(d, b + i + L), acc1);
  }
  for (; i < n_padded; i += L) acc0 = hn::MulAdd(hn::LoadU(d, a + i), hn::LoadU(d, b + i), acc0);
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(acc0, acc1)));
}

HWY_INLINE void DeltaScale(float* HWY_RESTRICT x, size_t n_padded, float s) {
  const hn::ScalableTag<float> d;
  const auto vs = hn::Set(d, s);
  for (size_t i = 0; i < n_padded; i += hn::Lanes(d)) hn::StoreU(hn::Mul(hn::LoadU(d, x + i), vs), d, x + i);
}

// dst[0, n) = the head vector at element `offset` of t, as f32; dst[n, padded) = 0. With `l2norm`, divided by
// sqrt(|x|^2 + 1e-6) as fla's l2norm does; then multiplied by `mul` (the query scale).
HWY_INLINE void DeltaLoadRow(const TensorView& t, int64_t offset, int64_t n, float* HWY_RESTRICT dst, bool l2norm,
                             float mul) {
  const size_t np = DeltaPadded(n);
  convert_to_f32(static_cast<const char*>(t.data) + offset * int64_t(dtype_size(t.dtype)), t.dtype, dst, size_t(n));
  for (size_t i = size_t(n); i < np; ++i) dst[i] = 0.f;
  if (l2norm) mul = float(double(mul) / std::sqrt(double(DeltaDot(dst, dst, np)) + 1e-6));
  if (mul != 1.f) DeltaScale(dst, np, mul);
}

HWY_INLINE float DeltaLoadScalar(const TensorView& t, int64_t offset) { return load_as_f32(t.data, t.dtype, offset); }

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#endif  // include guard
