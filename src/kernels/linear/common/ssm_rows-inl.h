// Row kernels shared by the state-space recurrences, compiled once per SIMD target (include inside
// HWY_NAMESPACE users, after hwy/highway.h). Rows need not be a multiple of the vector length: tails run scalar.
#if defined(ATTNZOO_SSM_ROWS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNZOO_SSM_ROWS_INL_H_
#undef ATTNZOO_SSM_ROWS_INL_H_
#else
#define ATTNZOO_SSM_ROWS_INL_H_
#endif

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// row = decay * row + coef * b, then returns row . c (one state row of a scalar-decay SSM step).
HWY_INLINE float DecayAddDot(float* HWY_RESTRICT row, size_t n, float decay, float coef, const float* HWY_RESTRICT b,
                             const float* HWY_RESTRICT c) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  const auto vd = hn::Set(d, decay), vc = hn::Set(d, coef);
  auto acc = hn::Zero(d);
  size_t i = 0;
  for (; i + L <= n; i += L) {
    const auto r = hn::MulAdd(vc, hn::LoadU(d, b + i), hn::Mul(vd, hn::LoadU(d, row + i)));
    hn::StoreU(r, d, row + i);
    acc = hn::MulAdd(r, hn::LoadU(d, c + i), acc);
  }
  float sum = hn::GetLane(hn::SumOfLanes(d, acc));
  for (; i < n; ++i) {
    row[i] = decay * row[i] + coef * b[i];
    sum += row[i] * c[i];
  }
  return sum;
}

// As DecayAddDot with a decay per element: row = exp(dt * a) * row + coef * b (Mamba-1: A differs per state).
HWY_INLINE float ExpDecayAddDot(float* HWY_RESTRICT row, size_t n, float dt, const float* HWY_RESTRICT a, float coef,
                                const float* HWY_RESTRICT b, const float* HWY_RESTRICT c) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  const auto vdt = hn::Set(d, dt), vc = hn::Set(d, coef);
  auto acc = hn::Zero(d);
  size_t i = 0;
  for (; i + L <= n; i += L) {
    const auto decay = hn::Exp(d, hn::Mul(vdt, hn::LoadU(d, a + i)));
    const auto r = hn::MulAdd(vc, hn::LoadU(d, b + i), hn::Mul(decay, hn::LoadU(d, row + i)));
    hn::StoreU(r, d, row + i);
    acc = hn::MulAdd(r, hn::LoadU(d, c + i), acc);
  }
  float sum = hn::GetLane(hn::SumOfLanes(d, acc));
  for (; i < n; ++i) {
    row[i] = std::exp(dt * a[i]) * row[i] + coef * b[i];
    sum += row[i] * c[i];
  }
  return sum;
}

// y = (y + D * x) * silu(z) over a row; D and z may be null.
HWY_INLINE void SkipAndGate(float* HWY_RESTRICT y, size_t n, const float* HWY_RESTRICT D, const float* HWY_RESTRICT x,
                            const float* HWY_RESTRICT z) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  size_t i = 0;
  const auto one = hn::Set(d, 1.f);
  for (; i + L <= n; i += L) {
    auto v = hn::LoadU(d, y + i);
    if (D) v = hn::MulAdd(hn::LoadU(d, D + i), hn::LoadU(d, x + i), v);
    if (z) {
      const auto zv = hn::LoadU(d, z + i);
      v = hn::Mul(v, hn::Div(zv, hn::Add(one, hn::Exp(d, hn::Neg(zv)))));
    }
    hn::StoreU(v, d, y + i);
  }
  for (; i < n; ++i) {
    float v = y[i];
    if (D) v += D[i] * x[i];
    if (z) v *= z[i] / (1.f + std::exp(-z[i]));
    y[i] = v;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#endif  // include guard
