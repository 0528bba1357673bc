// Highway bodies of the sampler passes (see sampler_kernels.h). Tails shorter than a vector run in scalar code
// so callers need not pad their buffers.
#include "engine/sampler_kernels.h"

#include <algorithm>
#include <cmath>

#include "core/dispatch.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "engine/sampler_kernels.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

MaxResult LogitsMax(const float* HWY_RESTRICT x, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  auto vmax = hn::Set(d, -INFINITY);
  auto nan = hn::Zero(d);  // all-ones lanes mark a NaN seen
  size_t i = 0;
  for (; i + L <= n; i += L) {
    const auto v = hn::LoadU(d, x + i);
    nan = hn::Or(nan, hn::VecFromMask(d, hn::IsNaN(v)));
    vmax = hn::Max(vmax, v);
  }
  MaxResult r;
  r.max = n >= L ? hn::GetLane(hn::MaxOfLanes(d, vmax)) : -INFINITY;
  r.has_nan = !hn::AllFalse(d, hn::MaskFromVec(nan));
  for (; i < n; ++i) {
    if (std::isnan(x[i])) r.has_nan = true;
    if (x[i] > r.max) r.max = x[i];
  }
  return r;
}

int64_t FindFirstEqual(const float* HWY_RESTRICT x, size_t n, float value) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  const auto vv = hn::Set(d, value);
  size_t i = 0;
  for (; i + L <= n; i += L) {
    const intptr_t hit = hn::FindFirstTrue(d, hn::Eq(hn::LoadU(d, x + i), vv));
    if (hit >= 0) return int64_t(i) + hit;
  }
  for (; i < n; ++i)
    if (x[i] == value) return int64_t(i);
  return -1;
}

void ScaleInPlace(float* HWY_RESTRICT x, size_t n, float s) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  const auto vs = hn::Set(d, s);
  size_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(hn::Mul(hn::LoadU(d, x + i), vs), d, x + i);
  for (; i < n; ++i) x[i] *= s;
}

void ExpShifted(const float* HWY_RESTRICT x, float* HWY_RESTRICT e, size_t n, float shift,
                double* HWY_RESTRICT block_sums) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  const auto vshift = hn::Set(d, shift);
  for (size_t b0 = 0, b = 0; b0 < n; b0 += kExpBlock, ++b) {
    const size_t end = std::min(n, b0 + kExpBlock);
    auto vsum = hn::Zero(d);
    size_t i = b0;
    for (; i + L <= end; i += L) {
      const auto p = hn::Exp(d, hn::Sub(hn::LoadU(d, x + i), vshift));
      vsum = hn::Add(vsum, p);
      hn::StoreU(p, d, e + i);
    }
    double sum = double(hn::GetLane(hn::SumOfLanes(d, vsum)));
    for (; i < end; ++i) {
      e[i] = std::exp(x[i] - shift);
      sum += double(e[i]);
    }
    block_sums[b] = sum;
  }
}

size_t IndicesAtLeast(const float* HWY_RESTRICT x, size_t n, float threshold, int32_t* HWY_RESTRICT out) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const size_t L = hn::Lanes(d);
  const auto vt = hn::Set(d, threshold);
  auto index = hn::Iota(di, 0);
  const auto step = hn::Set(di, int32_t(L));
  size_t count = 0, i = 0;
  for (; i + L <= n; i += L, index = hn::Add(index, step)) {
    const auto keep = hn::Ge(hn::LoadU(d, x + i), vt);
    // Most vectors of a peaked row hold no candidate; the rest compact without a branch per element.
    if (hn::AllFalse(d, keep)) continue;
    count += hn::CompressBlendedStore(index, hn::RebindMask(di, keep), di, out + count);
  }
  for (; i < n; ++i)
    if (x[i] >= threshold) out[count++] = int32_t(i);
  return count;
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(LogitsMax);
HWY_EXPORT(FindFirstEqual);
HWY_EXPORT(ScaleInPlace);
HWY_EXPORT(ExpShifted);
HWY_EXPORT(IndicesAtLeast);

MaxResult logits_max(const float* x, size_t n) {
  active_target();
  return HWY_DYNAMIC_DISPATCH(LogitsMax)(x, n);
}
int64_t find_first_equal(const float* x, size_t n, float value) {
  active_target();
  return HWY_DYNAMIC_DISPATCH(FindFirstEqual)(x, n, value);
}
void scale_in_place(float* x, size_t n, float s) {
  active_target();
  HWY_DYNAMIC_DISPATCH(ScaleInPlace)(x, n, s);
}
void exp_shifted(const float* x, float* e, size_t n, float shift, double* block_sums) {
  active_target();
  HWY_DYNAMIC_DISPATCH(ExpShifted)(x, e, n, shift, block_sums);
}
size_t indices_at_least(const float* x, size_t n, float threshold, int32_t* out) {
  active_target();
  return HWY_DYNAMIC_DISPATCH(IndicesAtLeast)(x, n, threshold, out);
}

}  // namespace attnzoo
#endif
