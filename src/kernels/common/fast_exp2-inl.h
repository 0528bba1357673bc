// 2^x on Highway vectors for arguments that are never large and positive: the exponential decays of the
// state-space scans (x = dt * A * log2 e <= 0) and softmax weights (x = (s - max) * log2 e <= 0, -inf for masked
// scores). x = k + r with |r| <= 1/2, 2^r by its Taylor polynomial of degree 6 (relative error < 2e-7), 2^k built
// in the exponent bits. Highway's Exp also serves any x with a two-step scaling against overflow and a checked
// float-to-int conversion: about twice the instructions. Below 2^-126 the result is flushed to 0 (-inf gives
// exactly 0); x is clamped to [-127, 127]. Adding 1.5 * 2^23 rounds x to an integer k and leaves k in the low
// mantissa bits, so the exponent of 2^k is (bits + 127) << 23 (the magic number's own bits shift out) without a
// float-to-int conversion. Per-target header: include it after hwy/foreach_target.h.
#if defined(ATTNZOO_FAST_EXP2_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNZOO_FAST_EXP2_INL_H_
#undef ATTNZOO_FAST_EXP2_INL_H_
#else
#define ATTNZOO_FAST_EXP2_INL_H_
#endif

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// kDegree 5 drops the polynomial's last term (relative error < 3e-6: enough for weights rounded to bf16), and
// kClampHigh = false the upper clamp, for callers whose x stays below 127 (a softmax against its running maximum).
template <int kDegree = 6, bool kClampHigh = true, class D, class V = hn::Vec<D>>
HWY_INLINE V FastExp2(D d, V x) {
  static_assert(kDegree == 5 || kDegree == 6, "degree 5 or 6");
  const hn::RebindToSigned<D> di;
  const V magic = hn::Set(d, 12582912.f);
  x = hn::Max(x, hn::Set(d, -127.f));
  if constexpr (kClampHigh) x = hn::Min(x, hn::Set(d, 127.f));
  const V shifted = hn::Add(x, magic);
  const V r = hn::Sub(x, hn::Sub(shifted, magic));
  V p = hn::Set(d, 1.3333558146428443e-3f);  // ln2^5 / 5!
  if constexpr (kDegree == 6) p = hn::MulAdd(hn::Set(d, 1.5403530393381606e-4f), r, p);  // + ln2^6 / 6! r
  p = hn::MulAdd(p, r, hn::Set(d, 9.6181291076284772e-3f));
  p = hn::MulAdd(p, r, hn::Set(d, 5.5504108664821580e-2f));
  p = hn::MulAdd(p, r, hn::Set(d, 2.4022650695910071e-1f));
  p = hn::MulAdd(p, r, hn::Set(d, 6.9314718055994531e-1f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.f));
  const auto bits = hn::ShiftLeft<23>(hn::Add(hn::BitCast(di, shifted), hn::Set(di, 127)));
  return hn::Mul(p, hn::BitCast(d, bits));
}

// s[j] = exp(s[j] - m) for j < n (n a multiple of the vector length, s aligned); returns their sum. The softmax
// step of attention rows: every argument is <= 0 when m is the row's maximum, and exp(-inf) == 0 for masked
// entries.
template <class D>
HWY_INLINE float ExpMinusMaxInPlace(D d, float* HWY_RESTRICT s, size_t n, float m) {
  const auto vlog2e = hn::Set(d, 1.44269504088896341f), vm = hn::Set(d, m);
  auto vsum = hn::Zero(d);
  for (size_t j = 0; j < n; j += hn::Lanes(d)) {
    const auto p = FastExp2(d, hn::Mul(hn::Sub(hn::Load(d, s + j), vm), vlog2e));
    vsum = hn::Add(vsum, p);
    hn::Store(p, d, s + j);
  }
  return hn::GetLane(hn::SumOfLanes(d, vsum));
}

// The largest of s[0, n) (n a multiple of the vector length), or NaN when one of them is NaN or +inf: a score
// row's maximum. hn::Max passes over a NaN lane and the clamped exponent gives it a weight of 0, so a softmax would
// drop that key without a trace where an exact one (and torch) gives NaN; a +inf maximum gives exp(inf - inf),
// NaN in an exact softmax, where the clamped exponent would make the whole row 0.
template <class D>
HWY_INLINE float MaxOrNaN(D d, const float* HWY_RESTRICT s, size_t n) {
  auto vmax = hn::Set(d, -INFINITY);
  auto nan = hn::IsNaN(hn::Zero(d));  // all false
  for (size_t j = 0; j < n; j += hn::Lanes(d)) {
    const auto x = hn::Load(d, s + j);
    vmax = hn::Max(vmax, x);
    nan = hn::Or(nan, hn::IsNaN(x));
  }
  const float max = hn::GetLane(hn::MaxOfLanes(d, vmax));
  return hn::AllFalse(d, nan) && max != INFINITY ? max : NAN;
}

// A row whose scores hold a NaN or +inf (a NaN or Inf in a cache, Inf * 0 in a product): its weights, its running sum and
// the factor returned for its output accumulator all become NaN, so the row's output is NaN.
template <class D>
HWY_INLINE float PoisonRow(D d, float* HWY_RESTRICT s, size_t n, float* l) {
  for (size_t j = 0; j < n; j += hn::Lanes(d)) hn::Store(hn::Set(d, NAN), d, s + j);
  *l = NAN;
  return NAN;
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#endif  // ATTNZOO_FAST_EXP2_INL_H_
