#include "core/convert.h"

#include <cstring>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/convert.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void Bf16ToF32(const uint16_t* HWY_RESTRICT src, float* HWY_RESTRICT dst, size_t n) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<hwy::bfloat16_t, decltype(df)> dbf;
  const size_t L = hn::Lanes(df);
  size_t i = 0;
  for (; i + L <= n; i += L)
    hn::StoreU(hn::PromoteTo(df, hn::LoadU(dbf, reinterpret_cast<const hwy::bfloat16_t*>(src) + i)), df, dst + i);
  for (; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

void F32ToBf16(const float* HWY_RESTRICT src, uint16_t* HWY_RESTRICT dst, size_t n) {
  // Round-to-nearest-even done with integer ops so every target gives the same bits as the scalar path.
  const hn::ScalableTag<uint32_t> du;
  const hn::RebindToSigned<decltype(du)> di;
  const hn::Rebind<uint16_t, decltype(du)> du16;
  const size_t L = hn::Lanes(du);
  size_t i = 0;
  const auto kRound = hn::Set(du, 0x7fffu);
  const auto kOne = hn::Set(du, 1u);
  const auto kExpMask = hn::Set(du, 0x7f800000u);
  const auto kAbsMask = hn::Set(du, 0x7fffffffu);
  for (; i + L <= n; i += L) {
    auto bits = hn::LoadU(du, reinterpret_cast<const uint32_t*>(src) + i);
    const auto is_nan = hn::Gt(hn::And(bits, kAbsMask), kExpMask);
    auto rounded = hn::Add(bits, hn::Add(kRound, hn::And(hn::ShiftRight<16>(bits), kOne)));
    rounded = hn::IfThenElse(is_nan, hn::Or(bits, hn::Set(du, 0x400000u)), rounded);
    hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di, hn::ShiftRight<16>(rounded))), du16, dst + i);
  }
  for (; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(Bf16ToF32);
HWY_EXPORT(F32ToBf16);

void convert_to_f32(const void* src, DType t, float* dst, size_t n) {
  switch (t) {
    case DType::f32: std::memcpy(dst, src, n * 4); return;
    case DType::bf16: HWY_DYNAMIC_DISPATCH(Bf16ToF32)(static_cast<const uint16_t*>(src), dst, n); return;
    case DType::f16:
      for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(static_cast<const uint16_t*>(src)[i]);
      return;
    case DType::i8:
      for (size_t i = 0; i < n; ++i) dst[i] = float(static_cast<const int8_t*>(src)[i]);
      return;
    case DType::f8_e4m3:
      for (size_t i = 0; i < n; ++i) dst[i] = f8e4m3_to_f32(static_cast<const uint8_t*>(src)[i]);
      return;
    default: throw_not_float(t, "convert_to_f32");
  }
}

void convert_from_f32(const float* src, void* dst, DType t, size_t n) {
  switch (t) {
    case DType::f32: std::memcpy(dst, src, n * 4); return;
    case DType::bf16: HWY_DYNAMIC_DISPATCH(F32ToBf16)(src, static_cast<uint16_t*>(dst), n); return;
    case DType::f16:
      for (size_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_f16(src[i]);
      return;
    default: return;
  }
}
}  // namespace attnzoo
#endif
