// quant_gemv over the regrouped rows (row_groups.h) on AVX-512 VNNI: 16 rows side by side, one vpdpbusd lane
// per row, the same integer sums and block-order FMAs as the GGUF rows of gemv_avx512vnni.cc (whose header says
// how each format's unsigned weight side and offsets are formed). Compiled with -mavx512vnni, reached after the
// CPUID check (quant_gemv_vnni_enabled).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <type_traits>

#include "kernels/quant/gemv_kernels.h"
#include "kernels/quant/gemv_vnni_pieces.h"
#include "kernels/quant/k_scales_x86.h"
#include "kernels/quant/quant_blocks.h"
#include "kernels/quant/row_groups.h"

namespace attnzoo {
namespace {

template <size_t kT, Fmt32 kFmt>
void dot_group(const uint8_t* group, size_t K, const QuantActivations& a, size_t ld8, size_t t0, float* out,
               size_t ldo) {
  constexpr size_t kHead = kFmt == Fmt32::Q4_1 ? 4 : 2, kValues = kFmt == Fmt32::Q8_0 ? 32 : 16;
  constexpr size_t kUnit = 16 * (kHead + kValues), kSlices = kValues / 4;
  const size_t nb = K / 32;
  [[maybe_unused]] const __m512i grid = kFmt == Fmt32::IQ4_NL ? iq4_grid_u8() : _mm512_setzero_si512();
  __m512 acc[kT];
  for (size_t t = 0; t < kT; ++t) acc[t] = _mm512_setzero_ps();
  for (size_t b = 0; b < nb; ++b) {
    const uint8_t* u = group + b * kUnit;
    for (size_t l = 0; l < kUnit; l += 64) group_prefetch(u + l);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(u)));
    __m512 mw = _mm512_setzero_ps();
    if (kFmt == Fmt32::Q4_1) mw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(u + 32)));
    __m512i w[8];  // Q4: low nibbles in 0-3, high in 4-7; Q8_0: the 8 slices (+ 128)
    for (size_t c = 0; c < kSlices; ++c) {
      const __m512i v = _mm512_loadu_si512(u + 16 * kHead + 64 * c);
      if (kFmt == Fmt32::Q8_0) {
        w[c] = _mm512_xor_si512(v, _mm512_set1_epi8(char(0x80)));
      } else if (kFmt == Fmt32::IQ4_NL) {  // both nibbles looked up in the grid + 128 (dotted as Q8_0's w + 128)
        w[c] = _mm512_shuffle_epi8(grid, _mm512_and_si512(v, _mm512_set1_epi8(0x0F)));
        w[4 + c] = _mm512_shuffle_epi8(grid, _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0F)));
      } else {
        // the high nibbles stay in place (16 q): their chain's sum is shifted once per block, not each slice
        w[c] = _mm512_and_si512(v, _mm512_set1_epi8(0x0F));
        w[4 + c] = _mm512_and_si512(v, _mm512_set1_epi8(char(0xF0)));
      }
    }
    for (size_t t = 0; t < kT; ++t) {
      const int8_t* x = a.xs8 + (t0 + t) * ld8 + 32 * b;
      const int32_t xsum = a.xsum16[(t0 + t) * (K / 16) + 2 * b] + a.xsum16[(t0 + t) * (K / 16) + 2 * b + 1];
      __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
      if (kFmt == Fmt32::Q4_0) s0 = _mm512_set1_epi32(-8 * xsum);
      if (kFmt == Fmt32::Q8_0 || kFmt == Fmt32::IQ4_NL) s0 = _mm512_set1_epi32(-128 * xsum);
      for (size_t c = 0; c < 4; ++c) {
        // w[c] holds elements 4c .. 4c + 3, w[4 + c] elements 16 + 4c ..: Q4's low / high nibbles, Q8_0's slices
        const size_t e0 = 4 * c, e1 = 16 + 4 * c;
        s0 = _mm512_dpbusd_epi32(s0, w[c], _mm512_set1_epi32(int(load_u32(reinterpret_cast<const uint8_t*>(x + e0)))));
        s1 = _mm512_dpbusd_epi32(s1, w[4 + c], _mm512_set1_epi32(int(load_u32(reinterpret_cast<const uint8_t*>(x + e1)))));
      }
      const float dx = a.d[(t0 + t) * (K / 32) + b];
      if (kFmt == Fmt32::Q4_0 || kFmt == Fmt32::Q4_1) s1 = _mm512_srai_epi32(s1, 4);  // exact: 16 times the high nibbles' sum
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), _mm512_mul_ps(dw, _mm512_set1_ps(dx)), acc[t]);
      if (kFmt == Fmt32::Q4_1) acc[t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(a.dsum32[(t0 + t) * (K / 32) + b]), acc[t]);
    }
  }
  for (size_t t = 0; t < kT; ++t) _mm512_storeu_ps(out + t * ldo, acc[t]);
}

// 16 regrouped Q6_K rows against kT tokens from t0, reading the unit front to back: per half h and slice s,
// the two ql slices and the qh slice give the 6-bit values of elements 128h + 32j + 4s .. + 3 for the four
// quarters j (ql's low nibbles for j < 2, high ones above, joined with qh's bits 2j, 2j + 1), each dotted as
// unsigned q against the token's activations in the sub-block's chain, which starts from -32 sum(x) of the
// sub-block; after 4 slices the four sub-blocks 8h + 2j + p are scaled by d sc d_x, one FMA each.
template <size_t kT>
void dot_group_q6_k(const uint8_t* group, size_t K, const QuantActivations& a, size_t ld8, size_t t0, float* out,
                    size_t ldo) {
  constexpr size_t kUnit = 16 * 210;
  const __m512i low4 = _mm512_set1_epi8(0x0F), bits45 = _mm512_set1_epi8(0x30);
  __m512 acc[kT];
  for (size_t t = 0; t < kT; ++t) acc[t] = _mm512_setzero_ps();
  for (size_t blk = 0; blk < K / 256; ++blk) {
    const uint8_t* u = group + blk * kUnit;
    // the head (d and the scales, 288 bytes) too: the slices' prefetches below cover only the values
    for (size_t l = 0; l < kQ6ValuesAt; l += 64) group_prefetch(u + l);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(u)));
    for (size_t h = 0; h < 2; ++h)
      for (size_t p = 0; p < 2; ++p) {
        __m512i d[kT][4];
        for (size_t t = 0; t < kT; ++t)
          for (size_t j = 0; j < 4; ++j)
            d[t][j] = _mm512_set1_epi32(-32 * a.xsum16[(t0 + t) * (K / 16) + 16 * blk + 8 * h + 2 * j + p]);
        for (size_t s = 4 * p; s < 4 * p + 4; ++s) {
          const uint8_t* v = u + kQ6ValuesAt + 192 * (8 * h + s);
          group_prefetch(v);
          group_prefetch(v + 64);
          group_prefetch(v + 128);
          const __m512i qa = _mm512_loadu_si512(v), qb = _mm512_loadu_si512(v + 64), qh = _mm512_loadu_si512(v + 128);
          const __m512i w[4] = {
              _mm512_ternarylogic_epi32(_mm512_and_si512(qa, low4), _mm512_slli_epi16(qh, 4), bits45, 0xF8),
              _mm512_ternarylogic_epi32(_mm512_and_si512(qb, low4), _mm512_slli_epi16(qh, 2), bits45, 0xF8),
              _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(qa, 4), low4), qh, bits45, 0xF8),
              _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(qb, 4), low4), _mm512_srli_epi16(qh, 2),
                                        bits45, 0xF8)};
          for (size_t t = 0; t < kT; ++t) {
            const uint8_t* x = reinterpret_cast<const uint8_t*>(a.xs8 + (t0 + t) * ld8 + 256 * blk + 128 * h + 4 * s);
            for (size_t j = 0; j < 4; ++j)
              d[t][j] = _mm512_dpbusd_epi32(d[t][j], w[j], _mm512_set1_epi32(int(load_u32(x + 32 * j))));
          }
        }
        for (size_t j = 0; j < 4; ++j) {
          const size_t sb = 8 * h + 2 * j + p;
          const __m512 sc = _mm512_mul_ps(dw, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                                                  _mm_loadu_si128(reinterpret_cast<const __m128i*>(u + 32 + 16 * sb)))));
          for (size_t t = 0; t < kT; ++t) {
            const float dx = a.d[(t0 + t) * (K / 32) + 8 * blk + 4 * h + j];
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d[t][j]), _mm512_mul_ps(sc, _mm512_set1_ps(dx)), acc[t]);
          }
        }
      }
  }
  for (size_t t = 0; t < kT; ++t) _mm512_storeu_ps(out + t * ldo, acc[t]);
}

// 16 regrouped Q4_K (or, kFive, Q5_K) rows against kT tokens from t0. Per chunk c of 64 values (sub-blocks 2c
// and 2c + 1: the low and high nibbles of its 8 qs slices), each slice's nibbles are dotted against the token's
// activations (one token: two chains per sub-block, even / odd slices, so that consecutive vpdpbusd do not wait on
// each other; more tokens interleave enough chains, and two each would spill); the rows' 6-bit scales and minima
// come out of their packed bytes 16 rows at a time (byte j of the 16 rows in one xmm). w = d sc q - dmin m: one FMA
// scales the integer sums by d sc d_x, one takes dmin m d_x sum(x) off. Q5_K: qh slice s holds the fifth bits of
// qs slice s's values, bit 2c (low nibbles) and 2c + 1 (high) of each byte; one shift each puts the bit at bit 4 of
// the byte, where it joins the nibble (u8 values up to 31), and the high nibbles are moved down rather than dotted
// in place (16 q + 256 bit would not fit a byte).
template <size_t kT, bool kFive>
void dot_group_q4_k(const uint8_t* group, size_t K, const QuantActivations& a, size_t ld8, size_t t0, float* out,
                    size_t ldo) {
  constexpr size_t kUnit = 16 * (kFive ? 176 : 144), kValuesAt = kFive ? kQ5KValuesAt : kQ4KValuesAt;
  const __m512i low4 = _mm512_set1_epi8(0x0F), high4 = _mm512_set1_epi8(char(0xF0)), bit4 = _mm512_set1_epi8(0x10);
  __m512 acc[kT];
  for (size_t t = 0; t < kT; ++t) acc[t] = _mm512_setzero_ps();
  for (size_t blk = 0; blk < K / 256; ++blk) {
    const uint8_t* u = group + blk * kUnit;
    // the head (d, dmin and the packed scales, 256 bytes; Q5_K: and qh's 512) too: the qs slices' prefetches below
    // cover only qs
    for (size_t l = 0; l < kValuesAt; l += 64) group_prefetch(u + l);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(u)));
    const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(u + 32)));
    auto sbytes = [&](size_t j) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(u + 64 + 16 * j)); };
    // sub-block j's 6-bit scale and minimum of the 16 rows (llama.cpp's packing of 8 + 8 values in 12 bytes)
    auto scale_min = [&](size_t j, __m512& sc, __m512& mn) __attribute__((always_inline)) {
      __m128i s, m;
      q4_k_rows_scale_min(sbytes, j, s, m);
      sc = _mm512_mul_ps(dw, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(s)));
      mn = _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(m)));
    };
    constexpr size_t kChains = kT == 1 ? 2 : 1;
    // Q5_K: c a constant after inlining, the qh shifts immediates
    auto chunk = [&](auto c) __attribute__((always_inline)) {
      __m512i lo[kT][2], hi[kT][2];
      for (size_t t = 0; t < kT; ++t) lo[t][0] = lo[t][1] = hi[t][0] = hi[t][1] = _mm512_setzero_si512();
      for (size_t s = 0; s < 8; ++s) {
        const uint8_t* v = u + kValuesAt + 64 * (8 * c + s);
        group_prefetch(v);
        const __m512i q = _mm512_loadu_si512(v);
        __m512i wl, wh;
        if constexpr (kFive) {
          // bit 2c (2c + 1) of each qh byte to bit 4: 16-bit shifts by at most 4, so bit 4 of each byte comes from
          // its own byte
          const __m512i qh = _mm512_loadu_si512(u + kQ5KHighAt + 64 * s);
          constexpr int kLo = 4 - 2 * int(c), kHi = 3 - 2 * int(c);
          const __m512i hl = kLo >= 0 ? _mm512_slli_epi16(qh, kLo) : _mm512_srli_epi16(qh, -kLo);
          const __m512i hh = kHi >= 0 ? _mm512_slli_epi16(qh, kHi) : _mm512_srli_epi16(qh, -kHi);
          wl = _mm512_ternarylogic_epi32(_mm512_and_si512(q, low4), hl, bit4, 0xF8);  // a | (b & c)
          wh = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(q, 4), low4), hh, bit4, 0xF8);
        } else {
          wl = _mm512_and_si512(q, low4);
          wh = _mm512_and_si512(q, high4);  // 16 q, in place
        }
        for (size_t t = 0; t < kT; ++t) {
          const uint8_t* x = reinterpret_cast<const uint8_t*>(a.xs8 + (t0 + t) * ld8 + 256 * blk + 64 * c + 4 * s);
          lo[t][s % kChains] = _mm512_dpbusd_epi32(lo[t][s % kChains], wl, _mm512_set1_epi32(int(load_u32(x))));
          hi[t][s % kChains] = _mm512_dpbusd_epi32(hi[t][s % kChains], wh, _mm512_set1_epi32(int(load_u32(x + 32))));
        }
      }
      __m512 sc_lo, mn_lo, sc_hi, mn_hi;
      scale_min(2 * c, sc_lo, mn_lo);
      scale_min(2 * c + 1, sc_hi, mn_hi);
      for (size_t t = 0; t < kT; ++t) {
        const size_t b32 = (t0 + t) * (K / 32) + 8 * blk + 2 * c;
        const __m512 il = _mm512_cvtepi32_ps(_mm512_add_epi32(lo[t][0], lo[t][1]));
        __m512i h = _mm512_add_epi32(hi[t][0], hi[t][1]);
        if constexpr (!kFive) h = _mm512_srai_epi32(h, 4);  // exact: 16 times the high nibbles' sum
        const __m512 ih = _mm512_cvtepi32_ps(h);
        acc[t] = _mm512_fmadd_ps(il, _mm512_mul_ps(sc_lo, _mm512_set1_ps(a.d[b32])), acc[t]);
        acc[t] = _mm512_fmadd_ps(ih, _mm512_mul_ps(sc_hi, _mm512_set1_ps(a.d[b32 + 1])), acc[t]);
        acc[t] = _mm512_fnmadd_ps(mn_lo, _mm512_set1_ps(a.dsum32[b32]), acc[t]);
        acc[t] = _mm512_fnmadd_ps(mn_hi, _mm512_set1_ps(a.dsum32[b32 + 1]), acc[t]);
      }
    };
    if constexpr (kFive) {
      chunk(std::integral_constant<size_t, 0>());
      chunk(std::integral_constant<size_t, 1>());
      chunk(std::integral_constant<size_t, 2>());
      chunk(std::integral_constant<size_t, 3>());
    } else {  // Q4_K's loop as it was: unrolled it read its L2 rows a few per cent slower
      for (size_t c = 0; c < 4; ++c) chunk(c);
    }
  }
  for (size_t t = 0; t < kT; ++t) _mm512_storeu_ps(out + t * ldo, acc[t]);
}


// 16 regrouped IQ4_XS rows against kT tokens from t0. Each sub-block of 32 is an IQ4_NL block of the 16 rows (4
// slices, both nibbles through the grid + 128, the chain starting at -128 sum(x)) whose scale d (ls - 32) comes out
// of the unit's head 16 rows at a time: scales_h widened to 16 i32 lanes, scales_l one u32 lane per row, field j
// of each shifted down by a vector shift (the reference's product d * float(ls - 32), then times d_x).
template <size_t kT>
void dot_group_iq4_xs(const uint8_t* group, size_t K, const QuantActivations& a, size_t ld8, size_t t0, float* out,
                      size_t ldo) {
  constexpr size_t kUnit = 16 * 136;
  const __m512i grid = iq4_grid_u8(), low4 = _mm512_set1_epi8(0x0F);
  __m512 acc[kT];
  for (size_t t = 0; t < kT; ++t) acc[t] = _mm512_setzero_ps();
  for (size_t blk = 0; blk < K / 256; ++blk) {
    const uint8_t* u = group + blk * kUnit;
    for (size_t l = 0; l < kIq4XsValuesAt; l += 64) group_prefetch(u + l);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(u)));
    const __m512i sh = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(u + 32)));
    const __m512i sl = _mm512_loadu_si512(u + 64);
    for (size_t j = 0; j < 8; ++j) {
      const __m512i ls = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(sl, unsigned(4 * j)), _mm512_set1_epi32(0xF)),
                                         _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(sh, unsigned(2 * j)),
                                                                            _mm512_set1_epi32(3)),
                                                           4));
      const __m512 sc = _mm512_mul_ps(dw, _mm512_cvtepi32_ps(_mm512_sub_epi32(ls, _mm512_set1_epi32(32))));
      __m512i w[8];  // elements 4c .. 4c + 3 (low nibbles) in w[c], 16 + 4c .. (high) in w[4 + c]
      for (size_t c = 0; c < 4; ++c) {
        const uint8_t* v = u + kIq4XsValuesAt + 64 * (4 * j + c);
        group_prefetch(v);
        const __m512i q = _mm512_loadu_si512(v);
        w[c] = _mm512_shuffle_epi8(grid, _mm512_and_si512(q, low4));
        w[4 + c] = _mm512_shuffle_epi8(grid, _mm512_and_si512(_mm512_srli_epi16(q, 4), low4));
      }
      for (size_t t = 0; t < kT; ++t) {
        const uint8_t* x = reinterpret_cast<const uint8_t*>(a.xs8 + (t0 + t) * ld8 + 256 * blk + 32 * j);
        const size_t b16 = (t0 + t) * (K / 16) + 16 * blk + 2 * j;
        __m512i s0 = _mm512_set1_epi32(-128 * (a.xsum16[b16] + a.xsum16[b16 + 1])), s1 = _mm512_setzero_si512();
        for (size_t c = 0; c < 4; ++c) {
          s0 = _mm512_dpbusd_epi32(s0, w[c], _mm512_set1_epi32(int(load_u32(x + 4 * c))));
          s1 = _mm512_dpbusd_epi32(s1, w[4 + c], _mm512_set1_epi32(int(load_u32(x + 16 + 4 * c))));
        }
        const float dx = a.d[(t0 + t) * (K / 32) + 8 * blk + j];
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), _mm512_mul_ps(sc, _mm512_set1_ps(dx)),
                                 acc[t]);
      }
    }
  }
  for (size_t t = 0; t < kT; ++t) _mm512_storeu_ps(out + t * ldo, acc[t]);
}
}  // namespace

void quant_gemv_groups_vnni(const QuantGemvTask& g) {
  const size_t K = size_t(g.w.cols), ld8 = g.act.ld8;
  auto blocks32 = [&](auto fmt) {
    for_row_groups(g, [&](auto kT, const uint8_t* group, size_t t0, float* out) {
      dot_group<decltype(kT)::value, decltype(fmt)::value>(group, K, g.act, ld8, t0, out, 16);
    });
  };
  switch (g.w.type) {
    case QuantType::Q4_0: blocks32(std::integral_constant<Fmt32, Fmt32::Q4_0>()); break;
    case QuantType::Q4_1: blocks32(std::integral_constant<Fmt32, Fmt32::Q4_1>()); break;
    case QuantType::Q8_0: blocks32(std::integral_constant<Fmt32, Fmt32::Q8_0>()); break;
    case QuantType::IQ4_NL: blocks32(std::integral_constant<Fmt32, Fmt32::IQ4_NL>()); break;
    case QuantType::IQ4_XS:
      for_row_groups(g, [&](auto kT, const uint8_t* group, size_t t0, float* out) {
        dot_group_iq4_xs<decltype(kT)::value>(group, K, g.act, ld8, t0, out, 16);
      });
      break;
    case QuantType::Q4_K:
      for_row_groups(g, [&](auto kT, const uint8_t* group, size_t t0, float* out) {
        dot_group_q4_k<decltype(kT)::value, false>(group, K, g.act, ld8, t0, out, 16);
      });
      break;
    case QuantType::Q5_K:
      for_row_groups(g, [&](auto kT, const uint8_t* group, size_t t0, float* out) {
        dot_group_q4_k<decltype(kT)::value, true>(group, K, g.act, ld8, t0, out, 16);
      });
      break;
    default:
      for_row_groups(g, [&](auto kT, const uint8_t* group, size_t t0, float* out) {
        dot_group_q6_k<decltype(kT)::value>(group, K, g.act, ld8, t0, out, 16);
      });
  }
}

}  // namespace attnzoo
