// Per-target kernel behind rms_norm. The sum of squares keeps the order of the portable loop it replaced (eight
// partial sums, element i into sum i % 8, the tail then the eight sums added in order), and every product is
// rounded before its sum (built with -ffp-contract=off: no fused multiply-add), so each target gives the bits the
// baseline build gave; only the width changes.
#include <cmath>

#include "core/dispatch.h"
#include "layers/norm.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "layers/norm_kernels.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Lane j of vector v holds partial sum v * N + j: eight sums whatever the width (8 x 1 lane on scalar, 2 x 4
// on SSE / NEON-like widths, 1 x 8 from AVX2 up).
HWY_INLINE float SumOfSquares(const float* x, size_t dim) {
  const hn::CappedTag<float, 8> d;
  constexpr size_t N = hn::MaxLanes(d), kVecs = 8 / N;
  static_assert(N * kVecs == 8, "eight partial sums");
  hn::Vec<decltype(d)> part[kVecs];
  for (size_t v = 0; v < kVecs; ++v) part[v] = hn::Zero(d);
  size_t i = 0;
  for (; i + 8 <= dim; i += 8)
    for (size_t v = 0; v < kVecs; ++v) {
      const auto xv = hn::LoadU(d, x + i + v * N);
      part[v] = hn::Add(part[v], hn::Mul(xv, xv));
    }
  float ss = 0.f;
  for (; i < dim; ++i) ss += x[i] * x[i];
  HWY_ALIGN float sums[8];
  for (size_t v = 0; v < kVecs; ++v) hn::Store(part[v], d, sums + v * N);
  for (float p : sums) ss += p;
  return ss;
}

void RmsNormRows(const float* x, int64_t rows, int64_t dim, int64_t x_stride, const float* w, float eps, float* y,
                 int64_t y_stride) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d), n = size_t(dim);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * x_stride;
    float* yr = y + r * y_stride;
    const float inv = 1.f / std::sqrt(SumOfSquares(xr, n) / float(dim) + eps);
    const auto vinv = hn::Set(d, inv);
    size_t k = 0;
    for (; k + L <= n; k += L) hn::StoreU(hn::Mul(hn::LoadU(d, w + k), hn::Mul(hn::LoadU(d, xr + k), vinv)), d, yr + k);
    for (; k < n; ++k) yr[k] = w[k] * (xr[k] * inv);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(RmsNormRows);

// Row-wise and memory-bound next to the projections around it: dispatched so that it runs at the active target's
// width rather than the baseline's.
void rms_norm(const float* x, int64_t rows, int64_t dim, int64_t x_stride, const float* w, float eps, float* y,
              int64_t y_stride) {
  active_target();
  HWY_DYNAMIC_DISPATCH(RmsNormRows)(x, rows, dim, x_stride, w, eps, y, y_stride);
}

}  // namespace attnzoo
#endif  // HWY_ONCE
