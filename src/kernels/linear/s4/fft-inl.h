// Radix-2 complex FFTs over vectors of independent transforms: element k of the lane-th transform is at
// re[k * V + lane] / im[k * V + lane] (V = lanes of the float tag), so every butterfly is a few vector
// operations and all lanes share one twiddle. The forward transform decimates in frequency (natural order in,
// bit-reversed out) and the inverse in time (bit-reversed in, natural out): a convolution multiplies spectra
// elementwise, so the bit-reversal permutation is never done. Both recurse on halves above kFftRecurse points so
// large transforms run most of their stages on a half, quarter... that fits in cache (depth first) instead of
// streaming the whole array once per stage. Per-target header: include it after hwy/foreach_target.h.
#if defined(ATTNZOO_S4_FFT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNZOO_S4_FFT_INL_H_
#undef ATTNZOO_S4_FFT_INL_H_
#else
#define ATTNZOO_S4_FFT_INL_H_
#endif

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr size_t kFftRecurse = 1024;

// One stage on m points: (a, b) -> (a + b, (a - b) w^k), w^k = table[k * stride] (exp(-2 pi i k / m)).
HWY_INLINE void DifStage(float* HWY_RESTRICT re, float* HWY_RESTRICT im, size_t m, const float* tw, size_t n0,
                         size_t stride) {
  const hn::ScalableTag<float> d;
  const size_t V = hn::Lanes(d), half = m / 2;
  for (size_t k = 0; k < half; ++k) {
    const auto wr = hn::Set(d, tw[k * stride]), wi = hn::Set(d, tw[n0 / 2 + k * stride]);
    float *ar = re + k * V, *ai = im + k * V, *br = re + (k + half) * V, *bi = im + (k + half) * V;
    const auto xr = hn::Load(d, ar), xi = hn::Load(d, ai), yr = hn::Load(d, br), yi = hn::Load(d, bi);
    hn::Store(hn::Add(xr, yr), d, ar);
    hn::Store(hn::Add(xi, yi), d, ai);
    const auto dr = hn::Sub(xr, yr), di = hn::Sub(xi, yi);
    hn::Store(hn::NegMulAdd(di, wi, hn::Mul(dr, wr)), d, br);
    hn::Store(hn::MulAdd(dr, wi, hn::Mul(di, wr)), d, bi);
  }
}

// The inverse stage: (a, b) -> (a + b conj(w^k), a - b conj(w^k)).
HWY_INLINE void DitStage(float* HWY_RESTRICT re, float* HWY_RESTRICT im, size_t m, const float* tw, size_t n0,
                         size_t stride) {
  const hn::ScalableTag<float> d;
  const size_t V = hn::Lanes(d), half = m / 2;
  for (size_t k = 0; k < half; ++k) {
    const auto wr = hn::Set(d, tw[k * stride]), wi = hn::Set(d, tw[n0 / 2 + k * stride]);
    float *ar = re + k * V, *ai = im + k * V, *br = re + (k + half) * V, *bi = im + (k + half) * V;
    const auto yr0 = hn::Load(d, br), yi0 = hn::Load(d, bi);
    const auto yr = hn::MulAdd(yr0, wr, hn::Mul(yi0, wi)), yi = hn::NegMulAdd(yr0, wi, hn::Mul(yi0, wr));
    const auto xr = hn::Load(d, ar), xi = hn::Load(d, ai);
    hn::Store(hn::Add(xr, yr), d, ar);
    hn::Store(hn::Add(xi, yi), d, ai);
    hn::Store(hn::Sub(xr, yr), d, br);
    hn::Store(hn::Sub(xi, yi), d, bi);
  }
}

// Forward transform of m points (a sub-transform of the n0-point one whose twiddles `tw` holds).
inline void FftForward(float* re, float* im, size_t m, const float* tw, size_t n0) {
  const size_t V = hn::Lanes(hn::ScalableTag<float>());
  if (m > kFftRecurse) {
    DifStage(re, im, m, tw, n0, n0 / m);
    FftForward(re, im, m / 2, tw, n0);
    FftForward(re + m / 2 * V, im + m / 2 * V, m / 2, tw, n0);
    return;
  }
  for (size_t len = m; len >= 2; len /= 2)
    for (size_t start = 0; start < m; start += len) DifStage(re + start * V, im + start * V, len, tw, n0, n0 / len);
}

// Inverse of FftForward, unscaled (the result is m times the input).
inline void FftInverse(float* re, float* im, size_t m, const float* tw, size_t n0) {
  const size_t V = hn::Lanes(hn::ScalableTag<float>());
  if (m > kFftRecurse) {
    FftInverse(re, im, m / 2, tw, n0);
    FftInverse(re + m / 2 * V, im + m / 2 * V, m / 2, tw, n0);
    DitStage(re, im, m, tw, n0, n0 / m);
    return;
  }
  for (size_t len = 2; len <= m; len *= 2)
    for (size_t start = 0; start < m; start += len) DitStage(re + start * V, im + start * V, len, tw, n0, n0 / len);
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#endif  // include guard
