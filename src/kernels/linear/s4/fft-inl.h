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

using FloatTag = hn::ScalableTag<float>;
using FloatVec = hn::Vec<FloatTag>;

// A vector of complex values (lanes = independent transforms), and the few operations the stages need.
struct Cx {
  FloatVec r, i;
};
HWY_INLINE Cx LoadCx(const float* re, const float* im, size_t k) {
  const FloatTag d;
  const size_t V = hn::Lanes(d);
  return {hn::Load(d, re + k * V), hn::Load(d, im + k * V)};
}
HWY_INLINE void StoreCx(Cx x, float* re, float* im, size_t k) {
  const FloatTag d;
  const size_t V = hn::Lanes(d);
  hn::Store(x.r, d, re + k * V);
  hn::Store(x.i, d, im + k * V);
}
HWY_INLINE Cx Add(Cx a, Cx b) { return {hn::Add(a.r, b.r), hn::Add(a.i, b.i)}; }
HWY_INLINE Cx Sub(Cx a, Cx b) { return {hn::Sub(a.r, b.r), hn::Sub(a.i, b.i)}; }
HWY_INLINE Cx Mul(Cx a, Cx w) { return {hn::NegMulAdd(a.i, w.i, hn::Mul(a.r, w.r)), hn::MulAdd(a.r, w.i, hn::Mul(a.i, w.r))}; }
HWY_INLINE Cx MulConj(Cx a, Cx w) { return {hn::MulAdd(a.r, w.r, hn::Mul(a.i, w.i)), hn::NegMulAdd(a.r, w.i, hn::Mul(a.i, w.r))}; }
HWY_INLINE Cx TimesMinusI(Cx a) { return {a.i, hn::Neg(a.r)}; }
HWY_INLINE Cx TimesI(Cx a) { return {hn::Neg(a.i), a.r}; }
// Twiddle k of the n0-point table, broadcast.
HWY_INLINE Cx Twiddle(const float* tw, size_t n0, size_t k) {
  const FloatTag d;
  return {hn::Set(d, tw[k]), hn::Set(d, tw[n0 / 2 + k])};
}

// One stage on m points: (a, b) -> (a + b, (a - b) w^k), w^k = table[k * stride] (exp(-2 pi i k / m)).
HWY_INLINE void DifStage(float* HWY_RESTRICT re, float* HWY_RESTRICT im, size_t m, const float* tw, size_t n0,
                         size_t stride) {
  for (size_t k = 0, half = m / 2; k < half; ++k) {
    const Cx a = LoadCx(re, im, k), b = LoadCx(re, im, k + half);
    StoreCx(Add(a, b), re, im, k);
    StoreCx(Mul(Sub(a, b), Twiddle(tw, n0, k * stride)), re, im, k + half);
  }
}

// The inverse stage: (a, b) -> (a + b conj(w^k), a - b conj(w^k)).
HWY_INLINE void DitStage(float* HWY_RESTRICT re, float* HWY_RESTRICT im, size_t m, const float* tw, size_t n0,
                         size_t stride) {
  for (size_t k = 0, half = m / 2; k < half; ++k) {
    const Cx a = LoadCx(re, im, k), b = MulConj(LoadCx(re, im, k + half), Twiddle(tw, n0, k * stride));
    StoreCx(Add(a, b), re, im, k);
    StoreCx(Sub(a, b), re, im, k + half);
  }
}

// Two forward stages in one pass over m points: stage m on (k, k + m/2) and (k + m/4, k + 3m/4), then stage m/2
// on (k, k + m/4) and (k + m/2, k + 3m/4), the four points loaded and stored once (radix-2 work, radix-4 traffic).
// w_m^(k + m/4) = -i w_m^k and w_(m/2)^k = w_m^(2k).
HWY_INLINE void DifStage2(float* HWY_RESTRICT re, float* HWY_RESTRICT im, size_t m, const float* tw, size_t n0,
                          size_t stride) {
  for (size_t k = 0, q = m / 4; k < q; ++k) {
    const Cx w = Twiddle(tw, n0, k * stride), v = Twiddle(tw, n0, 2 * k * stride);
    const Cx x0 = LoadCx(re, im, k), x1 = LoadCx(re, im, k + q), x2 = LoadCx(re, im, k + 2 * q),
             x3 = LoadCx(re, im, k + 3 * q);
    const Cx a0 = Add(x0, x2), a1 = Add(x1, x3);
    const Cx b0 = Mul(Sub(x0, x2), w), b1 = TimesMinusI(Mul(Sub(x1, x3), w));
    StoreCx(Add(a0, a1), re, im, k);
    StoreCx(Mul(Sub(a0, a1), v), re, im, k + q);
    StoreCx(Add(b0, b1), re, im, k + 2 * q);
    StoreCx(Mul(Sub(b0, b1), v), re, im, k + 3 * q);
  }
}

// The inverse of DifStage2 (unscaled): stage m/2 on both halves, then stage m, conjugate twiddles.
HWY_INLINE void DitStage2(float* HWY_RESTRICT re, float* HWY_RESTRICT im, size_t m, const float* tw, size_t n0,
                          size_t stride) {
  for (size_t k = 0, q = m / 4; k < q; ++k) {
    const Cx w = Twiddle(tw, n0, k * stride), v = Twiddle(tw, n0, 2 * k * stride);
    const Cx x0 = LoadCx(re, im, k), x1 = MulConj(LoadCx(re, im, k + q), v), x2 = LoadCx(re, im, k + 2 * q),
             x3 = MulConj(LoadCx(re, im, k + 3 * q), v);
    const Cx a0 = Add(x0, x1), a1 = Sub(x0, x1);
    const Cx b0 = MulConj(Add(x2, x3), w), b1 = TimesI(MulConj(Sub(x2, x3), w));
    StoreCx(Add(a0, b0), re, im, k);
    StoreCx(Sub(a0, b0), re, im, k + 2 * q);
    StoreCx(Add(a1, b1), re, im, k + q);
    StoreCx(Sub(a1, b1), re, im, k + 3 * q);
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
