// IQ4_NL / IQ4_XS codes through their grid: 16 bytes of nibbles (low nibbles first, as Q4_0) to 32 int8 values, one
// 16-byte table shuffle (pshufb / tbl) per half where vectors hold 16 bytes. Compiled once per SIMD target (included
// after foreach_target.h) for dequant.cc and gemv_unpack-inl.h.
#if defined(ATTNZOO_QUANT_IQ4_CODES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNZOO_QUANT_IQ4_CODES_INL_H_
#undef ATTNZOO_QUANT_IQ4_CODES_INL_H_
#else
#define ATTNZOO_QUANT_IQ4_CODES_INL_H_
#endif

#include <hwy/highway.h>

#include "kernels/quant/quant_blocks.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {

HWY_INLINE void Iq4Codes(const uint8_t* HWY_RESTRICT qs, int8_t* HWY_RESTRICT codes) {
#if HWY_TARGET == HWY_SCALAR
  for (int j = 0; j < 16; ++j) {
    codes[j] = kIq4Values[qs[j] & 0xF];
    codes[j + 16] = kIq4Values[qs[j] >> 4];
  }
#else
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::Full128<uint8_t> d8;
  const auto grid = hn::LoadU(d8, reinterpret_cast<const uint8_t*>(kIq4Values));
  const auto q = hn::LoadU(d8, qs);
  uint8_t* out = reinterpret_cast<uint8_t*>(codes);
  hn::StoreU(hn::TableLookupBytes(grid, hn::And(q, hn::Set(d8, uint8_t{0xF}))), d8, out);
  hn::StoreU(hn::TableLookupBytes(grid, hn::ShiftRight<4>(q)), d8, out + 16);
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#endif  // include guard
