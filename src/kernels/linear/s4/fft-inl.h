// Radix-2 complex FFTs over vectors of independent transforms: element k of the lane-th transform is at
// re[k * V + lane] / im[k * V + lane] (V = lanes of the float tag), so every butterfly is a few vector
// operations and all lanes share one twiddle. The forward transform decimates in frequency (natural order in,
// bit-reversed out) and the inverse in time (bit-reversed in, natural out): a convolution multiplies spectra
// elementwise, so the bit-reversal permutation is never done. Stages go two at a time (one pass over memory for
// two radix-2 stages), and both transforms recurse on quarters above kFftRecurse points, so large transforms run
// most of their stages on a part that fits in cache (depth first) instead of streaming the whole array per stage.
// Per-target header: include it after hwy/foreach_target.h.
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

constexpr size_t kFftRecurse = 256;

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

// Two forward stages in one pass over m points: stage m on (k, k + m/2) and (k + m/4, k + 3m/4), then stage m/2
// on (k, k + m/4) and (k + m/2, k + 3m/4), the four points loaded and stored once (radix-2 work, radix-4 traffic).
// w_m^(k + m/4) = -i w_m^k and w_(m/2)^k = w_m^(2k).
HWY_INLINE void DifStage2(float* HWY_RESTRICT re, float* HWY_RESTRICT im, size_t m, const float* tw, size_t n0,
                          size_t stride) {
  const hn::ScalableTag<float> d;
  const size_t V = hn::Lanes(d), q = m / 4;
  for (size_t k = 0; k < q; ++k) {
    const auto wr = hn::Set(d, tw[k * stride]), wi = hn::Set(d, tw[n0 / 2 + k * stride]);
    const auto vr = hn::Set(d, tw[2 * k * stride]), vi = hn::Set(d, tw[n0 / 2 + 2 * k * stride]);
    float* r[4] = {re + k * V, re + (k + q) * V, re + (k + 2 * q) * V, re + (k + 3 * q) * V};
    float* i[4] = {im + k * V, im + (k + q) * V, im + (k + 2 * q) * V, im + (k + 3 * q) * V};
    const auto x0r = hn::Load(d, r[0]), x0i = hn::Load(d, i[0]), x1r = hn::Load(d, r[1]), x1i = hn::Load(d, i[1]);
    const auto x2r = hn::Load(d, r[2]), x2i = hn::Load(d, i[2]), x3r = hn::Load(d, r[3]), x3i = hn::Load(d, i[3]);
    const auto a0r = hn::Add(x0r, x2r), a0i = hn::Add(x0i, x2i), a1r = hn::Add(x1r, x3r), a1i = hn::Add(x1i, x3i);
    const auto d0r = hn::Sub(x0r, x2r), d0i = hn::Sub(x0i, x2i), d1r = hn::Sub(x1r, x3r), d1i = hn::Sub(x1i, x3i);
    // b0 = d0 w, b1 = d1 w (-i)
    const auto b0r = hn::NegMulAdd(d0i, wi, hn::Mul(d0r, wr)), b0i = hn::MulAdd(d0r, wi, hn::Mul(d0i, wr));
    const auto e1r = hn::NegMulAdd(d1i, wi, hn::Mul(d1r, wr)), e1i = hn::MulAdd(d1r, wi, hn::Mul(d1i, wr));
    const auto b1r = e1i, b1i = hn::Neg(e1r);
    hn::Store(hn::Add(a0r, a1r), d, r[0]);
    hn::Store(hn::Add(a0i, a1i), d, i[0]);
    const auto f0r = hn::Sub(a0r, a1r), f0i = hn::Sub(a0i, a1i);
    hn::Store(hn::NegMulAdd(f0i, vi, hn::Mul(f0r, vr)), d, r[1]);
    hn::Store(hn::MulAdd(f0r, vi, hn::Mul(f0i, vr)), d, i[1]);
    hn::Store(hn::Add(b0r, b1r), d, r[2]);
    hn::Store(hn::Add(b0i, b1i), d, i[2]);
    const auto f1r = hn::Sub(b0r, b1r), f1i = hn::Sub(b0i, b1i);
    hn::Store(hn::NegMulAdd(f1i, vi, hn::Mul(f1r, vr)), d, r[3]);
    hn::Store(hn::MulAdd(f1r, vi, hn::Mul(f1i, vr)), d, i[3]);
  }
}

// The inverse of DifStage2 (unscaled): stage m/2 on both halves, then stage m, conjugate twiddles.
HWY_INLINE void DitStage2(float* HWY_RESTRICT re, float* HWY_RESTRICT im, size_t m, const float* tw, size_t n0,
                          size_t stride) {
  const hn::ScalableTag<float> d;
  const size_t V = hn::Lanes(d), q = m / 4;
  for (size_t k = 0; k < q; ++k) {
    const auto wr = hn::Set(d, tw[k * stride]), wi = hn::Set(d, tw[n0 / 2 + k * stride]);
    const auto vr = hn::Set(d, tw[2 * k * stride]), vi = hn::Set(d, tw[n0 / 2 + 2 * k * stride]);
    float* r[4] = {re + k * V, re + (k + q) * V, re + (k + 2 * q) * V, re + (k + 3 * q) * V};
    float* i[4] = {im + k * V, im + (k + q) * V, im + (k + 2 * q) * V, im + (k + 3 * q) * V};
    const auto x0r = hn::Load(d, r[0]), x0i = hn::Load(d, i[0]), x1r0 = hn::Load(d, r[1]), x1i0 = hn::Load(d, i[1]);
    const auto x2r = hn::Load(d, r[2]), x2i = hn::Load(d, i[2]), x3r0 = hn::Load(d, r[3]), x3i0 = hn::Load(d, i[3]);
    // x1 conj(v), x3 conj(v)
    const auto x1r = hn::MulAdd(x1r0, vr, hn::Mul(x1i0, vi)), x1i = hn::NegMulAdd(x1r0, vi, hn::Mul(x1i0, vr));
    const auto x3r = hn::MulAdd(x3r0, vr, hn::Mul(x3i0, vi)), x3i = hn::NegMulAdd(x3r0, vi, hn::Mul(x3i0, vr));
    const auto a0r = hn::Add(x0r, x1r), a0i = hn::Add(x0i, x1i), a1r = hn::Sub(x0r, x1r), a1i = hn::Sub(x0i, x1i);
    const auto b0r0 = hn::Add(x2r, x3r), b0i0 = hn::Add(x2i, x3i), b1r0 = hn::Sub(x2r, x3r), b1i0 = hn::Sub(x2i, x3i);
    // b0 conj(w); b1 conj(w) i
    const auto b0r = hn::MulAdd(b0r0, wr, hn::Mul(b0i0, wi)), b0i = hn::NegMulAdd(b0r0, wi, hn::Mul(b0i0, wr));
    const auto c1r = hn::MulAdd(b1r0, wr, hn::Mul(b1i0, wi)), c1i = hn::NegMulAdd(b1r0, wi, hn::Mul(b1i0, wr));
    const auto b1r = hn::Neg(c1i), b1i = c1r;
    hn::Store(hn::Add(a0r, b0r), d, r[0]);
    hn::Store(hn::Add(a0i, b0i), d, i[0]);
    hn::Store(hn::Sub(a0r, b0r), d, r[2]);
    hn::Store(hn::Sub(a0i, b0i), d, i[2]);
    hn::Store(hn::Add(a1r, b1r), d, r[1]);
    hn::Store(hn::Add(a1i, b1i), d, i[1]);
    hn::Store(hn::Sub(a1r, b1r), d, r[3]);
    hn::Store(hn::Sub(a1i, b1i), d, i[3]);
  }
}

// Forward transform of m points (a sub-transform of the n0-point one whose twiddles `tw` holds).
inline void FftForward(float* re, float* im, size_t m, const float* tw, size_t n0) {
  const size_t V = hn::Lanes(hn::ScalableTag<float>());
  if (m > kFftRecurse) {
    DifStage2(re, im, m, tw, n0, n0 / m);
    for (size_t part = 0; part < 4; ++part) FftForward(re + part * m / 4 * V, im + part * m / 4 * V, m / 4, tw, n0);
    return;
  }
  size_t len = m;
  for (; len >= 4; len /= 4)
    for (size_t start = 0; start < m; start += len) DifStage2(re + start * V, im + start * V, len, tw, n0, n0 / len);
  if (len == 2)
    for (size_t start = 0; start < m; start += 2) DifStage(re + start * V, im + start * V, 2, tw, n0, n0 / 2);
}

// Inverse of FftForward, unscaled (the result is m times the input).
inline void FftInverse(float* re, float* im, size_t m, const float* tw, size_t n0) {
  const size_t V = hn::Lanes(hn::ScalableTag<float>());
  if (m > kFftRecurse) {
    for (size_t part = 0; part < 4; ++part) FftInverse(re + part * m / 4 * V, im + part * m / 4 * V, m / 4, tw, n0);
    DitStage2(re, im, m, tw, n0, n0 / m);
    return;
  }
  int bits = 0;
  while ((size_t(1) << bits) < m) ++bits;
  size_t len = 4;
  if (bits % 2) {  // the lone stage is the last of FftForward's, so the first here
    for (size_t start = 0; start < m; start += 2) DitStage(re + start * V, im + start * V, 2, tw, n0, n0 / 2);
    len = 8;
  }
  for (; len <= m; len *= 4)
    for (size_t start = 0; start < m; start += len) DitStage2(re + start * V, im + start * V, len, tw, n0, n0 / len);
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#endif  // include guard
