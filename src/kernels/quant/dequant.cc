// Per-target dequantization of the formats decode and prefill read most (Q4_0, Q4_1, Q8_0, Q4_K, Q6_K): the
// packed integers are widened to i32 lanes, converted, and scaled with the same f32 operations as the reference
// (dequant_reference.cc), so results are bit-identical (this file is built without fused multiply-add). The
// loops step by the f32 vector length, which divides 16 on every target we build.
#include <algorithm>
#include <cstring>

#include "core/convert.h"
#include "core/dispatch.h"
#include "core/error.h"
#include "kernels/quant/quant.h"
#include "kernels/quant/quant_blocks.h"
#include "kernels/quant/row_groups.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/quant/dequant.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/quant/half-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;
using VF = hn::Vec<DF>;
using VI = hn::Vec<DI>;

HWY_INLINE VI LoadBytes(const uint8_t* p) {
  const hn::Rebind<uint8_t, DI> du8;
  return hn::PromoteTo(DI(), hn::LoadU(du8, p));
}

HWY_INLINE void Q4_0Block(const uint8_t* b, float* y) {
  const DF df;
  const DI di;
  const VF d = hn::Set(df, Half(b));
  const VI mask = hn::Set(di, 0xF), eight = hn::Set(di, 8);
  for (size_t j = 0; j < 16; j += hn::Lanes(df)) {
    const VI q = LoadBytes(b + 2 + j);
    hn::StoreU(hn::Mul(d, hn::ConvertTo(df, hn::Sub(hn::And(q, mask), eight))), df, y + j);
    hn::StoreU(hn::Mul(d, hn::ConvertTo(df, hn::Sub(hn::ShiftRight<4>(q), eight))), df, y + 16 + j);
  }
}

HWY_INLINE void Q4_1Block(const uint8_t* b, float* y) {
  const DF df;
  const DI di;
  const VF d = hn::Set(df, Half(b)), m = hn::Set(df, Half(b + 2));
  const VI mask = hn::Set(di, 0xF);
  for (size_t j = 0; j < 16; j += hn::Lanes(df)) {
    const VI q = LoadBytes(b + 4 + j);
    hn::StoreU(hn::Add(hn::Mul(d, hn::ConvertTo(df, hn::And(q, mask))), m), df, y + j);
    hn::StoreU(hn::Add(hn::Mul(d, hn::ConvertTo(df, hn::ShiftRight<4>(q))), m), df, y + 16 + j);
  }
}

HWY_INLINE void Q8_0Block(const uint8_t* b, float* y) {
  const DF df;
  const DI di;
  const hn::Rebind<int8_t, DI> di8;
  const VF d = hn::Set(df, Half(b));
  const int8_t* qs = reinterpret_cast<const int8_t*>(b + 2);
  for (size_t j = 0; j < 32; j += hn::Lanes(df))
    hn::StoreU(hn::Mul(d, hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(di8, qs + j)))), df, y + j);
}

HWY_INLINE void Q4_KBlock(const uint8_t* b, float* y) {
  const DF df;
  const DI di;
  const float d = Half(b), dmin = Half(b + 2);
  const uint8_t* qs = b + 16;
  const VI mask = hn::Set(di, 0xF);
  for (int c = 0; c < 4; ++c) {  // chunk c: sub-blocks 2c (low nibbles) and 2c + 1 (high nibbles)
    const KScaleMin lo = k_scale_min(b + 4, 2 * c), hi = k_scale_min(b + 4, 2 * c + 1);
    const VF dlo = hn::Set(df, d * float(lo.scale)), mlo = hn::Set(df, dmin * float(lo.min));
    const VF dhi = hn::Set(df, d * float(hi.scale)), mhi = hn::Set(df, dmin * float(hi.min));
    for (size_t l = 0; l < 32; l += hn::Lanes(df)) {
      const VI q = LoadBytes(qs + 32 * c + l);
      hn::StoreU(hn::Sub(hn::Mul(dlo, hn::ConvertTo(df, hn::And(q, mask))), mlo), df, y + 64 * c + l);
      hn::StoreU(hn::Sub(hn::Mul(dhi, hn::ConvertTo(df, hn::ShiftRight<4>(q))), mhi), df, y + 64 * c + 32 + l);
    }
  }
}

HWY_INLINE void Q6_KBlock(const uint8_t* b, float* y) {
  const DF df;
  const DI di;
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* scales = reinterpret_cast<const int8_t*>(b + 192);
  const float d = Half(b + 208);
  const VI mask = hn::Set(di, 0xF), three = hn::Set(di, 3), bias = hn::Set(di, 32);
  for (int half = 0; half < 2; ++half)
    for (size_t m = 0; m < 64; m += hn::Lanes(df)) {
      // Lanes m.. of this half take the low nibbles of ql and 2-bit field m/32 of qh; lanes 64+m.. the high
      // nibbles and field 2 + m/32. A vector never crosses a 16-element scale group.
      const VI l4 = LoadBytes(ql + 64 * half + m);
      const VI h2 = LoadBytes(qh + 32 * half + m % 32);
      const int f = 2 * int(m / 32);
      const VI qa = hn::Or(hn::And(l4, mask), hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(h2, f), three)));
      const VI qb = hn::Or(hn::ShiftRight<4>(l4), hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(h2, f + 4), three)));
      const size_t ea = 128 * size_t(half) + m, eb = ea + 64;
      const VF da = hn::Set(df, d * float(scales[ea / 16])), db = hn::Set(df, d * float(scales[eb / 16]));
      hn::StoreU(hn::Mul(da, hn::ConvertTo(df, hn::Sub(qa, bias))), df, y + ea);
      hn::StoreU(hn::Mul(db, hn::ConvertTo(df, hn::Sub(qb, bias))), df, y + eb);
    }
}

template <void (*Block)(const uint8_t*, float*)>
void Blocks(const uint8_t* src, float* dst, int64_t blocks, int64_t block_bytes, int64_t block_elems) {
  for (int64_t i = 0; i < blocks; ++i) Block(src + i * block_bytes, dst + i * block_elems);
}

// False when the format has no vectorised kernel here (the caller then runs the reference).
bool DequantizeRowFast(QuantType type, const void* src, float* dst, int64_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(src);
  const QuantTypeInfo info = *quant_type_info(uint32_t(type));
  const int64_t nb = n / info.block_elems, bb = info.block_bytes, be = info.block_elems;
  switch (type) {
    case QuantType::Q4_0: Blocks<Q4_0Block>(p, dst, nb, bb, be); return true;
    case QuantType::Q4_1: Blocks<Q4_1Block>(p, dst, nb, bb, be); return true;
    case QuantType::Q8_0: Blocks<Q8_0Block>(p, dst, nb, bb, be); return true;
    case QuantType::Q4_K: Blocks<Q4_KBlock>(p, dst, nb, bb, be); return true;
    case QuantType::Q6_K: Blocks<Q6_KBlock>(p, dst, nb, bb, be); return true;
    default: return false;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(DequantizeRowFast);

bool quant_supported(QuantType t) {
  switch (t) {
    case QuantType::F32: case QuantType::F16: case QuantType::BF16: case QuantType::Q4_0: case QuantType::Q4_1:
    case QuantType::Q5_0: case QuantType::Q5_1: case QuantType::Q8_0: case QuantType::Q2_K: case QuantType::Q3_K:
    case QuantType::Q4_K: case QuantType::Q5_K: case QuantType::Q6_K: case QuantType::MXFP4: return true;
    default: return false;
  }
}

QuantMatrix make_quant_matrix(const void* data, uint64_t nbytes, QuantType type, int64_t rows, int64_t cols,
                              const std::string& name) {
  require(quant_supported(type), name.c_str(), std::string("weight format ") + quant_type_name(type) +
                                                   " (id " + std::to_string(uint32_t(type)) + ") is not supported");
  require(rows > 0 && cols > 0, name.c_str(),
          "shape [" + std::to_string(rows) + ", " + std::to_string(cols) + "] must be positive");
  const auto row_bytes = quant_row_bytes(type, cols);
  require(row_bytes.has_value(), name.c_str(),
          "row of " + std::to_string(cols) + " elements is not a whole number of " + quant_type_name(type) +
              " blocks of " + std::to_string(quant_type_info(uint32_t(type))->block_elems));
  require(uint64_t(*row_bytes) <= nbytes / uint64_t(rows), name.c_str(),
          std::to_string(nbytes) + " bytes are too few for [" + std::to_string(rows) + ", " + std::to_string(cols) +
              "] " + quant_type_name(type));
  return QuantMatrix{data, type, rows, cols, *row_bytes};
}

void dequantize_row(QuantType type, const void* src, float* dst, int64_t n) {
  switch (type) {
    case QuantType::F32: std::memcpy(dst, src, size_t(n) * 4); return;
    case QuantType::F16: convert_to_f32(src, DType::f16, dst, size_t(n)); return;
    case QuantType::BF16: convert_to_f32(src, DType::bf16, dst, size_t(n)); return;
    default: break;
  }
  active_target();
  if (!HWY_DYNAMIC_DISPATCH(DequantizeRowFast)(type, src, dst, n)) dequantize_row_reference(type, src, dst, n);
}

void dequantize_rows(const QuantMatrix& w, int64_t r0, int64_t nr, float* dst) {
  thread_local AlignedBuffer<uint8_t> blocks;
  for (int64_t r = 0; r < nr;) {
    // whole groups of regrouped rows a group at a time (the prefill panels of a regrouped Linear)
    if (w.row_group && (r0 + r) % w.row_group == 0 && r + w.row_group <= nr) {
      const uint8_t* rows = rows_of_group(w, (r0 + r) / w.row_group, blocks);
      for (int64_t i = 0; i < w.row_group; ++i)
        dequantize_row(w.type, rows + i * w.row_bytes, dst + (r + i) * w.cols, w.cols);
      r += w.row_group;
      continue;
    }
    dequantize_row(w.type, row_of_group(w, r0 + r, blocks), dst + r * w.cols, w.cols);
    ++r;
  }
}

}  // namespace attnzoo
#endif
