// row_group_pairs.h for AVX-512-BF16 CPUs (compiled without fused multiply-add: the values must be
// dequantize_rows' products and sums). Four rows at a time, as dequant.cc's GroupedRows: four 16-byte loads of a
// unit's slices transposed in registers give each row 16 consecutive GGUF bytes (Q6_K: its codes, built 16 rows
// at a time, transposed in zmm). The nibble formats then look their values up: a block (Q4_0, Q4_1) or a
// sub-block (Q4_K, IQ4_XS) has 16 possible values (Q5_K's sub-block 32), computed in f32 with dequantize_rows'
// operations and rounded to bf16 by vcvtne(2)ps2bf16 (pack_f32_to_bf16_pairs' instruction) into a table that vpermw
// indexes with the codes: one lookup per 32 weights, where the f32 route converted, scaled, stored and reloaded
// every weight. IQ4_NL / IQ4_XS are such tables too: their 16 values are the fixed grid times the block's (the
// sub-block's) scale, so the grid's non-linearity costs nothing here. Q8_0 (256 values) and Q6_K (64 per 16
// weights) are converted and scaled as dequantize_rows does, in registers.
// GCC 12 reports the intrinsics' _mm512_undefined_* operands as uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>

#include "kernels/quant/k_scales_x86.h"
#include "kernels/quant/quant_blocks.h"
#include "kernels/quant/row_group_pairs.h"
#include "kernels/quant/row_groups.h"
#include "kernels/quant/transpose4_x86.h"

namespace attnzoo {
namespace {

// 16 bytes as 32 word indices: the low nibbles, then the high nibbles plus `high` (a block's element order).
inline __m512i nibble_indices(__m128i bytes, short high) {
  const __m256i w = _mm256_cvtepu8_epi16(bytes);
  const __m256i lo = _mm256_and_si256(w, _mm256_set1_epi16(0xF));
  const __m256i hi = _mm256_or_si256(_mm256_srli_epi16(w, 4), _mm256_set1_epi16(high));
  return _mm512_inserti64x4(_mm512_zextsi256_si512(lo), hi, 1);
}

inline __m512i table16(__m512 values) { return _mm512_zextsi256_si512((__m256i)_mm512_cvtneps_pbh(values)); }

inline void store_pairs(uint32_t* p, __m512i v) { _mm512_storeu_si512(p, v); }

// kIq4Values as f32 lanes (exact): the IQ4 tables are these times a scale, ScaleCodes' product.
inline __m512 iq4_grid() {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Values))));
}

// Rows [i0, i1) of a unit (multiples of 4) of a block-of-32 format, row i0's block at o, rows `stride` pairs apart.
// IQ4_NL's unit is Q4_0's, its table d times the grid.
template <QuantType kType>
inline void unit_rows32(const uint8_t* unit, int64_t i0, int64_t i1, uint32_t* o, size_t stride) {
  constexpr int64_t head = kType == QuantType::Q4_1 ? 4 : 2;
  alignas(64) float d[kRowGroup], m[kRowGroup];
  _mm512_store_ps(d, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(unit))));
  if constexpr (kType == QuantType::Q4_1)
    _mm512_store_ps(m, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(unit + 32))));
  const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512 centred = _mm512_sub_ps(iota, _mm512_set1_ps(8.f));  // q - 8, exact
  const __m512 grid = iq4_grid();
  for (int64_t i = i0; i < i1; i += 4) {
    __m128i q[2][4];  // Q8_0: bytes 0-15 and 16-31 of each row; Q4_0 / Q4_1: bytes 0-15
    transpose4(unit + head * kRowGroup + 4 * i, q[0]);
    if constexpr (kType == QuantType::Q8_0) transpose4(unit + head * kRowGroup + 256 + 4 * i, q[1]);
    for (int64_t r = 0; r < 4; ++r) {
      uint32_t* y = o + size_t(i - i0 + r) * stride;
      const __m512 dr = _mm512_set1_ps(d[i + r]);
      if constexpr (kType == QuantType::Q8_0) {
        const __m512 lo = _mm512_mul_ps(dr, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q[0][r])));
        const __m512 hi = _mm512_mul_ps(dr, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q[1][r])));
        store_pairs(y, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
      } else {
        const __m512 values = kType == QuantType::Q4_0   ? _mm512_mul_ps(dr, centred)
                            : kType == QuantType::IQ4_NL ? _mm512_mul_ps(dr, grid)
                            : _mm512_add_ps(_mm512_mul_ps(dr, iota), _mm512_set1_ps(m[i + r]));
        store_pairs(y, _mm512_permutexvar_epi16(nibble_indices(q[0][r], 0), table16(values)));
      }
    }
  }
}

// The same for Q4_K: per chunk of 64 values (sub-blocks 2c: low nibbles, 2c + 1: high nibbles) one table of 32,
// the low sub-block's 16 values then the high one's, each d sc q - dmin m as dequantize_rows computes it. Q5_K
// (kFive): a sub-block's fifth bit doubles its values to 32, so each sub-block gets its own table of 32 (q 0 .. 31)
// and its indices are the nibble with bit 4 taken from qh, whose 32 bytes per row (the qh slices, shared by the
// four chunks) are widened to words once per row; vpermw reads only the index's low 5 bits, so one vpternlogd
// puts the fifth bit in place without clearing the bits above it.
template <bool kFive>
inline void unit_rows_qk(const uint8_t* unit, int64_t i0, int64_t i1, uint32_t* o, size_t stride) {
  // Each sub-block's d sc and dmin m for the 16 rows at once (the f32 products dequantize_rows forms row by row,
  // where they cost four scalar conversions and products per 64 values); the lookups broadcast them from here.
  alignas(64) float scale[8][kRowGroup], offset[8][kRowGroup];
  const auto bytes = [&](size_t k) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(unit + 64 + kRowGroup * int64_t(k)));
  };
  const __m512 dv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(unit)));
  const __m512 dminv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(unit + 32)));
  for (size_t sb = 0; sb < 8; ++sb) {
    __m128i s, m;
    q4_k_rows_scale_min(bytes, sb, s, m);
    _mm512_store_ps(scale[sb], _mm512_mul_ps(dv, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(s))));
    _mm512_store_ps(offset[sb], _mm512_mul_ps(dminv, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(m))));
  }
  const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512 iota16 = _mm512_add_ps(iota, _mm512_set1_ps(16.f));  // 16 .. 31, exact
  const __m512i bit4 = _mm512_set1_epi16(0x10);
  const int64_t values_at = kFive ? kQ5KValuesAt : kQ4KValuesAt;
  const auto line = [&](int64_t sb, int64_t row, __m512 q) {  // d sc q - dmin m for 16 values q
    return _mm512_sub_ps(_mm512_mul_ps(_mm512_set1_ps(scale[sb][row]), q), _mm512_set1_ps(offset[sb][row]));
  };
  for (int64_t i = i0; i < i1; i += 4) {
    __m512i high[4];  // Q5_K: each row's qh[0 .. 32) as words, shifted so that qh bit j lies at bit 4 + j
    if constexpr (kFive) {
      __m128i h[2][4];
      transpose4(unit + kQ5KHighAt + 4 * i, h[0]);
      transpose4(unit + kQ5KHighAt + 64 * 4 + 4 * i, h[1]);
      for (int64_t r = 0; r < 4; ++r)
        high[r] = _mm512_slli_epi16(_mm512_cvtepu8_epi16(_mm256_set_m128i(h[1][r], h[0][r])), 4);
    }
    for (int c = 0; c < 4; ++c) {
      __m128i q[2][4];
      transpose4(unit + values_at + 64 * 8 * c + 4 * i, q[0]);
      transpose4(unit + values_at + 64 * (8 * c + 4) + 4 * i, q[1]);
      for (int64_t r = 0; r < 4; ++r) {
        const int64_t row = i + r;
        const __m512i w = _mm512_cvtepu8_epi16(_mm256_set_m128i(q[1][r], q[0][r]));
        uint32_t* y = o + size_t(i - i0 + r) * stride + 32 * c;
        if constexpr (kFive) {
          // bit 4 of each index from bit 2c (low nibbles) or 2c + 1 (high nibbles) of qh: vpternlogd's 0xD8 takes
          // the third operand's bits from the second operand, the others from the first
          const __m512i lo = _mm512_ternarylogic_epi32(w, _mm512_srli_epi16(high[r], 2 * c), bit4, 0xD8);
          const __m512i hi = _mm512_ternarylogic_epi32(_mm512_srli_epi16(w, 4), _mm512_srli_epi16(high[r], 2 * c + 1),
                                                       bit4, 0xD8);
          const int64_t sb = 2 * c;
          const __m512i tlo = (__m512i)_mm512_cvtne2ps_pbh(line(sb, row, iota16), line(sb, row, iota));
          const __m512i thi = (__m512i)_mm512_cvtne2ps_pbh(line(sb + 1, row, iota16), line(sb + 1, row, iota));
          store_pairs(y, _mm512_permutexvar_epi16(lo, tlo));
          store_pairs(y + 16, _mm512_permutexvar_epi16(hi, thi));
        } else {
          // words 0-15 the low sub-block's values, 16-31 the high one's
          const __m512i table = (__m512i)_mm512_cvtne2ps_pbh(line(2 * c + 1, row, iota), line(2 * c, row, iota));
          store_pairs(y, _mm512_permutexvar_epi16(_mm512_and_si512(w, _mm512_set1_epi16(0xF)), table));
          store_pairs(y + 16, _mm512_permutexvar_epi16(_mm512_or_si512(_mm512_srli_epi16(w, 4), bit4), table));
        }
      }
    }
  }
}

// Q6_K: a sub-block's 64 possible values would make a table of four times its 16 weights' products, so the codes
// are converted instead: 16 weights of a sub-block are one zmm of f32, each code less 32 times d sc as
// dequantize_rows computes it, and two sub-blocks are rounded to pairs by one vcvtne2ps2bf16, in registers where
// the f32 route stored, reloaded and packed them. The codes are built for the unit's 16 rows at once: per half h
// and part g (elements 128h + 32g .. + 31: sub-blocks 8h + 2g and 8h + 2g + 1) each run of three slices
// (row_groups.h) holds the ql and qh bytes of 16 rows side by side, one zmm each, which a few byte operations turn
// into the rows' codes less 32; 4 x 4 transposes in zmm (each 128-bit lane a quad of rows) give every row its 16
// codes per sub-block, stored to L1 for the widening to read. Built row by row (four rows' bytes transposed in xmm,
// 32 codes a ymm) the same conversion took 1.05-1.19x the time (docs/benchmarks/cpu-classes.md).
inline void unit_rows_q6_k(const uint8_t* unit, int64_t i0, int64_t i1, uint32_t* o, size_t stride) {
  alignas(64) float scale[16][kRowGroup];  // sub-block sb's d sc for the 16 rows, as Q4_K's
  const __m512 dv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(unit)));
  for (int64_t sb = 0; sb < 16; ++sb) {
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(unit + 32 + kRowGroup * sb));
    _mm512_store_ps(scale[sb], _mm512_mul_ps(dv, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc))));
  }
  // codes[j][k][L]: the 16 codes of sub-block 2g + j (of the half) of row 4L + k
  alignas(64) int8_t codes[2][4][4][16];
  const __m512i low4 = _mm512_set1_epi8(0x0F), six = _mm512_set1_epi8(0x3F), bias = _mm512_set1_epi8(32);
  for (int64_t h = 0; h < 2; ++h)
    for (int g = 0; g < 4; ++g) {
      for (int64_t j = 0; j < 2; ++j) {  // slices 4j .. 4j + 3: codes 16j .. 16j + 15 of the part
        __m512i c[4];
        for (int64_t t = 0; t < 4; ++t) {
          const uint8_t* run = unit + kQ6ValuesAt + 192 * (8 * h + 4 * j + t);
          const __m512i l = _mm512_loadu_si512(run + (g & 1 ? 64 : 0)), q = _mm512_loadu_si512(run + 128);
          const __m512i nib = g < 2 ? l : _mm512_srli_epi16(l, 4);
          // qh bits 2g, 2g + 1 to bits 4, 5
          const __m512i top = g == 0 ? _mm512_slli_epi16(q, 4) : g == 1 ? _mm512_slli_epi16(q, 2)
                            : g == 2 ? q : _mm512_srli_epi16(q, 2);
          // bits 0-3 from the nibble (0xD8: where the third operand is set, the second's bits), 4-5 from qh, and
          // the bits above cleared
          const __m512i code = _mm512_and_si512(_mm512_ternarylogic_epi32(top, nib, low4, 0xD8), six);
          c[t] = _mm512_sub_epi8(code, bias);
        }
        const __m512i t0 = _mm512_unpacklo_epi32(c[0], c[1]), t1 = _mm512_unpacklo_epi32(c[2], c[3]);
        const __m512i t2 = _mm512_unpackhi_epi32(c[0], c[1]), t3 = _mm512_unpackhi_epi32(c[2], c[3]);
        _mm512_store_si512(codes[j][0], _mm512_unpacklo_epi64(t0, t1));
        _mm512_store_si512(codes[j][1], _mm512_unpackhi_epi64(t0, t1));
        _mm512_store_si512(codes[j][2], _mm512_unpacklo_epi64(t2, t3));
        _mm512_store_si512(codes[j][3], _mm512_unpackhi_epi64(t2, t3));
      }
      const int64_t sb = 8 * h + 2 * g;
      for (int64_t row = i0; row < i1; ++row) {
        const int64_t L = row / 4, k = row % 4;
        const __m512 a = _mm512_mul_ps(_mm512_set1_ps(scale[sb][row]), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                                           _mm_load_si128(reinterpret_cast<const __m128i*>(codes[0][k][L])))));
        const __m512 b = _mm512_mul_ps(_mm512_set1_ps(scale[sb + 1][row]), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                                           _mm_load_si128(reinterpret_cast<const __m128i*>(codes[1][k][L])))));
        store_pairs(o + size_t(row - i0) * stride + 64 * h + 16 * g, (__m512i)_mm512_cvtne2ps_pbh(b, a));
      }
    }
}

// IQ4_XS (row_groups.h: 16 d, 16 scales_h, 16 scales_l, then sub-block j's 4 slices at kIq4XsValuesAt + 256 j):
// each sub-block's scale d (ls - 32) for the 16 rows at once, as dequantize_rows forms it row by row (the f16 d
// times the 6-bit ls less 32: iq4_xs_scale's fields, nibble j of the u32 scales_l and bits 2j, 2j + 1 of scales_h,
// taken by vector shifts), then per row two sub-blocks' tables in one vcvtne2ps2bf16, as Q4_K's chunks: words 0-15
// sub-block j's 16 values, 16-31 sub-block j + 1's, whose indices carry bit 4.
inline void unit_rows_iq4_xs(const uint8_t* unit, int64_t i0, int64_t i1, uint32_t* o, size_t stride) {
  alignas(64) float scale[8][kRowGroup];
  const __m512 dv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(unit)));
  const __m512i high = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(unit + 32)));
  const __m512i low = _mm512_loadu_si512(unit + 64);
  for (int j = 0; j < 8; ++j) {
    const __m512i lo = _mm512_and_si512(_mm512_srli_epi32(low, 4 * j), _mm512_set1_epi32(0xF));
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(high, 2 * j), _mm512_set1_epi32(3));
    const __m512i ls = _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), _mm512_set1_epi32(32));
    _mm512_store_ps(scale[j], _mm512_mul_ps(dv, _mm512_cvtepi32_ps(ls)));
  }
  const __m512 grid = iq4_grid();
  const __m512i bit4 = _mm512_set1_epi16(0x10);
  for (int64_t i = i0; i < i1; i += 4)
    for (int j = 0; j < 8; j += 2) {
      __m128i q[2][4];
      transpose4(unit + kIq4XsValuesAt + 256 * j + 4 * i, q[0]);
      transpose4(unit + kIq4XsValuesAt + 256 * (j + 1) + 4 * i, q[1]);
      for (int64_t r = 0; r < 4; ++r) {
        const int64_t row = i + r;
        const __m512i table = (__m512i)_mm512_cvtne2ps_pbh(_mm512_mul_ps(_mm512_set1_ps(scale[j + 1][row]), grid),
                                                           _mm512_mul_ps(_mm512_set1_ps(scale[j][row]), grid));
        uint32_t* y = o + size_t(i - i0 + r) * stride + 16 * j;
        store_pairs(y, _mm512_permutexvar_epi16(nibble_indices(q[0][r], 0), table));
        store_pairs(y + 16, _mm512_permutexvar_epi16(_mm512_or_si512(nibble_indices(q[1][r], 0), bit4), table));
      }
    }
}

template <QuantType kType>
void grouped_rows(const QuantMatrix& w, int64_t r0, int64_t nr, uint32_t* dst, size_t stride) {
  constexpr int64_t be = kType == QuantType::Q4_K || kType == QuantType::Q5_K || kType == QuantType::Q6_K ||
                                 kType == QuantType::IQ4_XS ? 256 : 32;
  constexpr int64_t bb = kType == QuantType::Q6_K ? 210 : kType == QuantType::Q5_K ? 176
                       : kType == QuantType::Q4_K ? 144 : kType == QuantType::IQ4_XS ? 136
                       : kType == QuantType::Q8_0 ? 34 : kType == QuantType::Q4_1 ? 20 : 18;
  const uint8_t* data = static_cast<const uint8_t*>(w.data);
  for (int64_t r = r0; r < r0 + nr;) {
    const int64_t i0 = r % kRowGroup, i1 = std::min(kRowGroup, i0 + (r0 + nr - r));
    const uint8_t* group = data + (r / kRowGroup) * kRowGroup * w.row_bytes;
    uint32_t* out = dst + size_t(r - r0) * stride;
    for (int64_t b = 0; b < w.cols / be; ++b) {
      const uint8_t* unit = group + b * kRowGroup * bb;
      // The decode rows' prefetch, 8 KiB ahead into L2: a model's weights come from memory, and without it the
      // layer's short-prompt GEMMs ran 5-40% slower (one thread, in a loop of 12 layers' copies).
      for (int64_t o = 0; o < kRowGroup * bb; o += 64) group_prefetch(unit + o);
      if constexpr (kType == QuantType::Q6_K)
        unit_rows_q6_k(unit, i0, i1, out + b * be / 2, stride);
      else if constexpr (kType == QuantType::Q4_K || kType == QuantType::Q5_K)
        unit_rows_qk<kType == QuantType::Q5_K>(unit, i0, i1, out + b * be / 2, stride);
      else if constexpr (kType == QuantType::IQ4_XS)
        unit_rows_iq4_xs(unit, i0, i1, out + b * be / 2, stride);
      else
        unit_rows32<kType>(unit, i0, i1, out + b * be / 2, stride);
    }
    r += i1 - i0;
  }
}

}  // namespace

bool row_group_pairs(const QuantMatrix& w, int64_t r0, int64_t nr, uint32_t* dst, size_t stride) {
  if (w.row_group != kRowGroup || r0 % 4 != 0 || nr % 4 != 0 || r0 < 0 || nr < 0 || r0 + nr > w.rows) return false;
  switch (w.type) {
    case QuantType::Q4_0: grouped_rows<QuantType::Q4_0>(w, r0, nr, dst, stride); return true;
    case QuantType::Q4_1: grouped_rows<QuantType::Q4_1>(w, r0, nr, dst, stride); return true;
    case QuantType::Q8_0: grouped_rows<QuantType::Q8_0>(w, r0, nr, dst, stride); return true;
    case QuantType::Q4_K: grouped_rows<QuantType::Q4_K>(w, r0, nr, dst, stride); return true;
    case QuantType::Q5_K: grouped_rows<QuantType::Q5_K>(w, r0, nr, dst, stride); return true;
    case QuantType::Q6_K: grouped_rows<QuantType::Q6_K>(w, r0, nr, dst, stride); return true;
    case QuantType::IQ4_NL: grouped_rows<QuantType::IQ4_NL>(w, r0, nr, dst, stride); return true;
    case QuantType::IQ4_XS: grouped_rows<QuantType::IQ4_XS>(w, r0, nr, dst, stride); return true;
    default: return false;
  }
}

}  // namespace attnzoo
