// An f16 block scale to f32 through the target's conversion (F16C on x86: exact, and cheaper than bit
// manipulation once per block). Compiled once per SIMD target (included after foreach_target.h).
#if defined(ATTNZOO_QUANT_HALF_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNZOO_QUANT_HALF_INL_H_
#undef ATTNZOO_QUANT_HALF_INL_H_
#else
#define ATTNZOO_QUANT_HALF_INL_H_
#endif

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {

HWY_INLINE float Half(const uint8_t* p) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::CappedTag<float, 1> d1;
  const hn::Rebind<hwy::float16_t, decltype(d1)> dh;
  return hn::GetLane(hn::PromoteTo(d1, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p))));
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#endif  // include guard
