// Per-target dequantization of the formats decode and prefill read most (Q4_0, Q4_1, Q8_0, Q4_K, Q5_K, Q6_K, IQ4_NL,
// IQ4_XS): the packed integers (the IQ4 codes through a 16-byte table shuffle first) are widened to i32 lanes,
// converted, and scaled with the same f32 operations as the reference (dequant_reference.cc), so results are
// bit-identical (this file is built without fused multiply-add). The loops step by the f32 vector length, which
// divides 16 on every target we build.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "core/convert.h"
#include "core/dispatch.h"
#include "core/error.h"
#include "kernels/quant/quant.h"
#include "kernels/quant/quant_blocks.h"
#include "kernels/quant/row_group_pieces.h"
#include "kernels/quant/row_groups.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/quant/dequant.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/quant/half-inl.h"
#include "kernels/quant/iq4_codes-inl.h"
#if HWY_ARCH_X86
#include "kernels/quant/k_scales_x86.h"
#include "kernels/quant/transpose4_x86.h"
#endif

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

// Q4_K, and Q5_K (kFive: qh[32] before qs, bit j of byte l the fifth bit of element l of sub-block j).
template <bool kFive>
HWY_INLINE void QKBlock(const uint8_t* b, float* y) {
  const DF df;
  const DI di;
  const float d = Half(b), dmin = Half(b + 2);
  const uint8_t* qs = b + (kFive ? 48 : 16);
  const VI mask = hn::Set(di, 0xF), one = hn::Set(di, 1);
  for (int c = 0; c < 4; ++c) {  // chunk c: sub-blocks 2c (low nibbles) and 2c + 1 (high nibbles)
    const KScaleMin lo = k_scale_min(b + 4, 2 * c), hi = k_scale_min(b + 4, 2 * c + 1);
    const VF dlo = hn::Set(df, d * float(lo.scale)), mlo = hn::Set(df, dmin * float(lo.min));
    const VF dhi = hn::Set(df, d * float(hi.scale)), mhi = hn::Set(df, dmin * float(hi.min));
    for (size_t l = 0; l < 32; l += hn::Lanes(df)) {
      const VI q = LoadBytes(qs + 32 * c + l);
      VI ql = hn::And(q, mask), qh = hn::ShiftRight<4>(q);
      if constexpr (kFive) {
        const VI h = LoadBytes(b + 16 + l);
        ql = hn::Or(ql, hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(h, 2 * c), one)));
        qh = hn::Or(qh, hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(h, 2 * c + 1), one)));
      }
      hn::StoreU(hn::Sub(hn::Mul(dlo, hn::ConvertTo(df, ql)), mlo), df, y + 64 * c + l);
      hn::StoreU(hn::Sub(hn::Mul(dhi, hn::ConvertTo(df, qh)), mhi), df, y + 64 * c + 32 + l);
    }
  }
}
HWY_INLINE void Q4_KBlock(const uint8_t* b, float* y) { QKBlock<false>(b, y); }
HWY_INLINE void Q5_KBlock(const uint8_t* b, float* y) { QKBlock<true>(b, y); }

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

// y[0, 32) = scale * codes, the reference's f32 product.
HWY_INLINE void ScaleCodes(const int8_t* codes, float scale, float* y) {
  const DF df;
  const DI di;
  const hn::Rebind<int8_t, DI> di8;
  const VF s = hn::Set(df, scale);
  for (size_t j = 0; j < 32; j += hn::Lanes(df))
    hn::StoreU(hn::Mul(s, hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(di8, codes + j)))), df, y + j);
}

HWY_INLINE void Iq4_NLBlock(const uint8_t* b, float* y) {
  int8_t codes[32];
  Iq4Codes(b + 2, codes);
  ScaleCodes(codes, Half(b), y);
}

HWY_INLINE void Iq4_XSBlock(const uint8_t* b, float* y) {
  const float d = Half(b);
  for (int j = 0; j < 8; ++j) {
    int8_t codes[32];
    Iq4Codes(b + 8 + 16 * j, codes);
    ScaleCodes(codes, d * float(iq4_xs_scale(b, j)), y + 32 * j);
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
    case QuantType::Q5_K: Blocks<Q5_KBlock>(p, dst, nb, bb, be); return true;
    case QuantType::Q6_K: Blocks<Q6_KBlock>(p, dst, nb, bb, be); return true;
    case QuantType::IQ4_NL: Blocks<Iq4_NLBlock>(p, dst, nb, bb, be); return true;
    case QuantType::IQ4_XS: Blocks<Iq4_XSBlock>(p, dst, nb, bb, be); return true;
    default: return false;
  }
}

// Rows [r0, r0 + nr) of a regrouped matrix (row_groups.h) straight from its units, for the prefill panels.
//
// Blocks of 32 and Q4_K: four rows at a time, the 16-byte loads of four slices (4 rows' 4 bytes each) are
// transposed in registers into each row's 16 consecutive GGUF bytes, which the block kernels' f32 operations then
// decode as they decode a GGUF row (same values, full-width stores). Copying the pieces back into GGUF blocks
// first cost 5-58% of a 16-token prefill on AVX2 (rows_of_group's memcpy calls, docs/benchmarks/cpu-classes.md);
// moving them into a stack block with fixed-size moves still cost a store per 4 bytes on top of the decode's.
// Q5_K, Q6_K (a head matrix, which prefill multiplies for one token), rows outside whole runs of 4, the scalar
// target and other architectures take that stack block (Q5_K's transposed form not written yet). IQ4_NL / IQ4_XS:
// the transposed row's 16 code bytes go through Iq4Codes and ScaleCodes as a GGUF block's do (through the stack
// block the 16-token prefill of an all-IQ4_XS file ran 20-35% slower than from its GGUF rows).
template <QuantType kType>
HWY_INLINE void GatherBlock(const uint8_t* unit, int64_t i, uint8_t* block) {
  for_each_piece(kType, i, [&](int64_t at, int64_t from, size_t n) [[gnu::always_inline]] {
    std::memcpy(block + at, unit + from, n);
  });
}

#if HWY_TARGET != HWY_SCALAR && HWY_ARCH_X86  // k_scales_x86.h
using D128 = hn::Full128<uint8_t>;
using V128 = hn::Vec<D128>;

// transpose4_x86.h's transpose (row_group_pairs' too) as Highway vectors.
HWY_INLINE void Transpose4(const uint8_t* slice0, V128 rows[4]) {
  __m128i raw[4];
  transpose4(slice0, raw);
  for (int r = 0; r < 4; ++r) rows[r] = V128{raw[r]};
}

// Bytes j .. j + Lanes - 1 of 16 widened to i32 lanes (j a multiple of the lane count); Signed: as int8.
template <bool Signed = false>
HWY_INLINE VI WidenBytes(V128 v, size_t j) {
  const DI di;
  using Byte = std::conditional_t<Signed, int8_t, uint8_t>;
  const hn::Rebind<Byte, DI> db;
  if constexpr (hn::MaxLanes(DI()) == 16) {
    return hn::PromoteTo(di, hn::BitCast(db, v));
  } else {  // 8 lanes (AVX2)
    const hn::Full64<uint8_t> d64;
    return hn::PromoteTo(di, hn::BitCast(db, j == 0 ? hn::LowerHalf(d64, v) : hn::UpperHalf(d64, v)));
  }
}

// Rows [i0, i1) of a unit (multiples of 4), row i0's block at o, rows K apart. Blocks of 32: the head fields 16
// rows at a time, then slice c (bytes 4c .. 4c + 3 of every row) at head * 16 + 64 c.
template <QuantType kType>
HWY_INLINE void UnitRows32(const uint8_t* unit, int64_t i0, int64_t i1, float* o, int64_t K) {
  const DF df;
  const DI di;
  const size_t L = hn::Lanes(df);
  const VI mask = hn::Set(di, 0xF), eight = hn::Set(di, 8);
  constexpr int64_t head = kType == QuantType::Q4_1 ? 4 : 2;
  for (int64_t i = i0; i < i1; i += 4) {
    V128 q[2][4];  // Q8_0: bytes 0-15 and 16-31 of each row; Q4_0 / Q4_1: bytes 0-15
    Transpose4(unit + head * kRowGroup + 4 * i, q[0]);
    if constexpr (kType == QuantType::Q8_0) Transpose4(unit + head * kRowGroup + 256 + 4 * i, q[1]);
    for (int64_t r = 0; r < 4; ++r) {
      float* y = o + (i - i0 + r) * K;
      const VF d = hn::Set(df, Half(unit + 2 * (i + r)));
      if constexpr (kType == QuantType::Q8_0) {
        for (size_t j = 0; j < 32; j += L)
          hn::StoreU(hn::Mul(d, hn::ConvertTo(df, WidenBytes<true>(q[j / 16][r], j % 16))), df, y + j);
      } else if constexpr (kType == QuantType::Q4_0) {
        for (size_t j = 0; j < 16; j += L) {
          const VI b = WidenBytes(q[0][r], j);
          hn::StoreU(hn::Mul(d, hn::ConvertTo(df, hn::Sub(hn::And(b, mask), eight))), df, y + j);
          hn::StoreU(hn::Mul(d, hn::ConvertTo(df, hn::Sub(hn::ShiftRight<4>(b), eight))), df, y + 16 + j);
        }
      } else {
        const VF m = hn::Set(df, Half(unit + 32 + 2 * (i + r)));
        for (size_t j = 0; j < 16; j += L) {
          const VI b = WidenBytes(q[0][r], j);
          hn::StoreU(hn::Add(hn::Mul(d, hn::ConvertTo(df, hn::And(b, mask))), m), df, y + j);
          hn::StoreU(hn::Add(hn::Mul(d, hn::ConvertTo(df, hn::ShiftRight<4>(b))), m), df, y + 16 + j);
        }
      }
    }
  }
}

// The same for Q4_K: 16 d, 16 dmin, byte j of the 12 packed scale bytes 16 rows at a time, then qs slice s (bytes
// 4s .. 4s + 3: chunk s / 8) at kQ4KValuesAt + 64 s. Scales and minima are Q4_KBlock's products.
HWY_INLINE void UnitRowsQ4_K(const uint8_t* unit, int64_t i0, int64_t i1, float* o, int64_t K) {
  const DF df;
  const DI di;
  const size_t L = hn::Lanes(df);
  const VI mask = hn::Set(di, 0xF);
  // Sub-block sb's 6-bit scales and minima of the 16 rows (k_scale_min's values) unpacked in xmm lanes at once:
  // unpacked row by row they cost a fifth of the unit's time.
  alignas(16) uint8_t sc[8][kRowGroup], mn[8][kRowGroup];
  const auto bytes = [&](size_t k) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(unit + 64 + kRowGroup * int64_t(k)));
  };
  for (size_t sb = 0; sb < 8; ++sb) {
    __m128i s, m;
    q4_k_rows_scale_min(bytes, sb, s, m);
    _mm_store_si128(reinterpret_cast<__m128i*>(sc[sb]), s);
    _mm_store_si128(reinterpret_cast<__m128i*>(mn[sb]), m);
  }
  for (int64_t i = i0; i < i1; i += 4) {
    float d[4], dmin[4];
    for (int64_t r = 0; r < 4; ++r) {
      d[r] = Half(unit + 2 * (i + r));
      dmin[r] = Half(unit + 32 + 2 * (i + r));
    }
    for (int c = 0; c < 4; ++c) {  // chunk c: sub-blocks 2c (low nibbles) and 2c + 1 (high nibbles), 32 bytes
      V128 q[2][4];
      Transpose4(unit + kQ4KValuesAt + 64 * 8 * c + 4 * i, q[0]);
      Transpose4(unit + kQ4KValuesAt + 64 * (8 * c + 4) + 4 * i, q[1]);
      for (int64_t r = 0; r < 4; ++r) {
        const VF dlo = hn::Set(df, d[r] * float(sc[2 * c][i + r]));
        const VF mlo = hn::Set(df, dmin[r] * float(mn[2 * c][i + r]));
        const VF dhi = hn::Set(df, d[r] * float(sc[2 * c + 1][i + r]));
        const VF mhi = hn::Set(df, dmin[r] * float(mn[2 * c + 1][i + r]));
        float* y = o + (i - i0 + r) * K + 64 * c;
        for (size_t l = 0; l < 32; l += L) {
          const VI b = WidenBytes(q[l / 16][r], l % 16);
          hn::StoreU(hn::Sub(hn::Mul(dlo, hn::ConvertTo(df, hn::And(b, mask))), mlo), df, y + l);
          hn::StoreU(hn::Sub(hn::Mul(dhi, hn::ConvertTo(df, hn::ShiftRight<4>(b))), mhi), df, y + 32 + l);
        }
      }
    }
  }
}
// IQ4_NL (Q4_0's unit) and IQ4_XS (16 d, 16 scales_h, 16 scales_l of 4 bytes, then from kIq4XsValuesAt sub-block
// j's 4 slices at 256 j): each row's 16 code bytes per block / sub-block, decoded by the GGUF block's steps, the
// IQ4_XS scale by iq4_xs_scale on the row's 8 head bytes put back together.
template <QuantType kType>
HWY_INLINE void UnitRowsIq4(const uint8_t* unit, int64_t i0, int64_t i1, float* o, int64_t K) {
  const D128 d8;
  for (int64_t i = i0; i < i1; i += 4) {
    constexpr int kSub = kType == QuantType::IQ4_XS ? 8 : 1;
    for (int j = 0; j < kSub; ++j) {
      V128 q[4];
      Transpose4(unit + (kType == QuantType::IQ4_XS ? kIq4XsValuesAt + 256 * j : 2 * kRowGroup) + 4 * i, q);
      for (int64_t r = 0; r < 4; ++r) {
        alignas(16) uint8_t qs[16];
        int8_t codes[32];
        hn::Store(q[r], d8, qs);
        Iq4Codes(qs, codes);
        float scale = Half(unit + 2 * (i + r));
        if constexpr (kType == QuantType::IQ4_XS) {
          uint8_t head[8];
          std::memcpy(head, unit + 2 * (i + r), 2);
          std::memcpy(head + 2, unit + 32 + 2 * (i + r), 2);
          std::memcpy(head + 4, unit + 64 + 4 * (i + r), 4);
          scale = scale * float(iq4_xs_scale(head, j));
        }
        ScaleCodes(codes, scale, o + (i - i0 + r) * K + 32 * j);
      }
    }
  }
}
constexpr bool kTransposes = true;
#else
constexpr bool kTransposes = false;
#endif

template <QuantType kType, void (*Block)(const uint8_t*, float*)>
void GroupedRows(const QuantMatrix& w, int64_t r0, int64_t nr, float* dst) {
  const QuantTypeInfo info = *quant_type_info(uint32_t(kType));
  const int64_t be = info.block_elems, bb = info.block_bytes, K = w.cols;
  constexpr bool kTransposed = kTransposes && kType != QuantType::Q5_K && kType != QuantType::Q6_K;
  alignas(64) uint8_t blocks[kRowGroup * 256];  // 16 blocks of at most 210 bytes (Q6_K)
  const uint8_t* data = static_cast<const uint8_t*>(w.data);
  for (int64_t r = r0; r < r0 + nr;) {
    const int64_t i0 = r % kRowGroup, i1 = std::min(kRowGroup, i0 + (r0 + nr - r));
    // rows [v0, v1) four at a time, the rest through the stack block
    const int64_t v0 = kTransposed ? std::min(i1, (i0 + 3) / 4 * 4) : i1;
    const int64_t v1 = kTransposed ? std::max(v0, i1 / 4 * 4) : i1;
    const uint8_t* group = data + (r / kRowGroup) * kRowGroup * w.row_bytes;
    float* out = dst + (r - r0) * K;
    for (int64_t b = 0; b < K / be; ++b) {
      const uint8_t* unit = group + b * kRowGroup * bb;
#if HWY_TARGET != HWY_SCALAR && HWY_ARCH_X86
      if constexpr (kType == QuantType::Q4_K) {
        if (v1 > v0) UnitRowsQ4_K(unit, v0, v1, out + (v0 - i0) * K + b * be, K);
      } else if constexpr (kType == QuantType::IQ4_NL || kType == QuantType::IQ4_XS) {
        if (v1 > v0) UnitRowsIq4<kType>(unit, v0, v1, out + (v0 - i0) * K + b * be, K);
      } else if constexpr (kTransposed) {
        if (v1 > v0) UnitRows32<kType>(unit, v0, v1, out + (v0 - i0) * K + b * be, K);
      }
#endif
      // The other rows' blocks are all gathered before any is decoded: decoding each right after its pieces were
      // stored made the vector loads wait on those stores.
      int64_t n = 0;
      for (int64_t i = i0; i < i1; ++i)
        if (i < v0 || i >= v1) GatherBlock<kType>(unit, i, blocks + n++ * bb);
      n = 0;
      for (int64_t i = i0; i < i1; ++i)
        if (i < v0 || i >= v1) Block(blocks + n++ * bb, out + (i - i0) * K + b * be);
    }
    r += i1 - i0;
  }
}

// False when w's format is not one that regroups (the caller then copies rows back one by one).
bool DequantizeGroupedRows(const QuantMatrix& w, int64_t r0, int64_t nr, float* dst) {
  switch (w.type) {
    case QuantType::Q4_0: GroupedRows<QuantType::Q4_0, Q4_0Block>(w, r0, nr, dst); return true;
    case QuantType::Q4_1: GroupedRows<QuantType::Q4_1, Q4_1Block>(w, r0, nr, dst); return true;
    case QuantType::Q8_0: GroupedRows<QuantType::Q8_0, Q8_0Block>(w, r0, nr, dst); return true;
    case QuantType::Q4_K: GroupedRows<QuantType::Q4_K, Q4_KBlock>(w, r0, nr, dst); return true;
    case QuantType::Q5_K: GroupedRows<QuantType::Q5_K, Q5_KBlock>(w, r0, nr, dst); return true;
    case QuantType::Q6_K: GroupedRows<QuantType::Q6_K, Q6_KBlock>(w, r0, nr, dst); return true;
    case QuantType::IQ4_NL: GroupedRows<QuantType::IQ4_NL, Iq4_NLBlock>(w, r0, nr, dst); return true;
    case QuantType::IQ4_XS: GroupedRows<QuantType::IQ4_XS, Iq4_XSBlock>(w, r0, nr, dst); return true;
    default: return false;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(DequantizeRowFast);
HWY_EXPORT(DequantizeGroupedRows);

bool quant_supported(QuantType t) {
  switch (t) {
    case QuantType::F32: case QuantType::F16: case QuantType::BF16: case QuantType::Q4_0: case QuantType::Q4_1:
    case QuantType::Q5_0: case QuantType::Q5_1: case QuantType::Q8_0: case QuantType::Q2_K: case QuantType::Q3_K:
    case QuantType::Q4_K: case QuantType::Q5_K: case QuantType::Q6_K: case QuantType::MXFP4: case QuantType::IQ4_NL:
    case QuantType::IQ4_XS: return true;
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
  if (w.row_group) {
    active_target();
    if (HWY_DYNAMIC_DISPATCH(DequantizeGroupedRows)(w, r0, nr, dst)) return;
  }
  thread_local AlignedBuffer<uint8_t> blocks;
  for (int64_t r = 0; r < nr; ++r) dequantize_row(w.type, row_of_group(w, r0 + r, blocks), dst + r * w.cols, w.cols);
}

}  // namespace attnzoo
#endif
