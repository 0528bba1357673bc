// quant_gemv rows on AVX-512 VNNI for the most used formats (Q4_0, Q4_1, Q8_0, Q4_K, Q6_K, IQ4_NL, IQ4_XS; Q5_K
// regrouped only):
// vpdpbusd sums 64 u8 x s8 products by fours into i32 lanes, straight from the packed blocks (no unpacked copy of
// the row), against the 8-bit activations (s8). Compiled with -mavx512vnni (see CMakeLists.txt) and reached only
// after a CPUID check (quant_gemv_vnni_enabled).
//  - Blocks of 32 (Q4_0, Q4_1, Q8_0): two blocks fill a 512-bit register in the activations' order, and the f16
//    scales of both become one f32 vector by a single conversion, so that each pair costs one vpdpbusd, one
//    conversion and one FMA per token. The weight side must be unsigned: Q4_0's q - 8 and Q8_0's w are dotted as
//    q and w + 128 (xor 0x80), and the excess 8 / 128 times the lane's activation sum (prepared with the
//    activations) is the dot's starting value, so the integer sum is llama.cpp's, exactly. Q4_1's minimum takes
//    d_x times the lane sums, one FMA per pair (llama.cpp's Q8_1 block sums). IQ4_NL, and IQ4_XS's sub-blocks of
//    32, are Q4_0's nibbles looked up by one vpshufb in the grid + 128, then dotted as Q8_0's w + 128.
//  - Q6_K's -32 becomes per-sub-block offsets, dotted once per row with d_x * sum(x) of each sub-block; Q4_K's
//    minimum is dotted with those sums block by block in a register of its own (no per-row pass, which took
//    about 15% of a 4-block row: K = 1024).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/quant/gemv_kernels.h"
#include "kernels/quant/gemv_vnni_pieces.h"
#include "kernels/quant/k_scales_x86.h"
#include "kernels/quant/quant_blocks.h"
#include "kernels/quant/row_groups.h"

namespace attnzoo {
namespace {

inline __m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

constexpr long long kShift4 = 0x0004000400040004;  // four 16-bit shift counts of 4, for vpsrlvw

// The f16 at p0 in lanes 0-7 and the one at p1 in lanes 8-15, as f32 (exact).
inline __m512 halves(const uint8_t* p0, const uint8_t* p1) {
  const __m256i h = _mm256_mask_set1_epi16(_mm256_set1_epi16(short(load_u16(p0))), 0xFF00, short(load_u16(p1)));
  return _mm512_cvtph_ps(h);
}

// The 16 packed bytes of two blocks' nibbles -> 64 u8 in element order: q0's low nibbles (elements 0-15), its high
// nibbles (16-31), then q1's.
inline __m512i nibble_pair(const uint8_t* q0, const uint8_t* q1) {
  __m512i v = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q0)));
  v = _mm512_mask_broadcast_i32x4(v, 0xFF00, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q1)));
  // 16-bit shift counts: 0 in 128-bit lanes 0 and 2, 4 in lanes 1 and 3
  const __m512i shift = _mm512_set_epi64(kShift4, kShift4, 0, 0, kShift4, kShift4, 0, 0);
  return _mm512_and_si512(_mm512_srlv_epi16(v, shift), _mm512_set1_epi8(0x0F));
}

// The 8 sub-block scales d (ls - 32) of the IQ4_XS super-block at sb in lanes 0-7, the reference's products:
// nibble j of the 32-bit scales_l and 2-bit field j of scales_h shifted into lane j at once (sub-block by sub-block
// in scalar code they cost as much as the pair's dot).
inline __m512 iq4_xs_scales(const uint8_t* sb) {
  const __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(int(load_u32(sb + 4))),
                                                        _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                                      _mm256_set1_epi32(0xF));
  const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(load_u16(sb + 2)),
                                                        _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                                      _mm256_set1_epi32(3));
  const __m256i ls = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
  return _mm512_castps256_ps512(_mm256_mul_ps(_mm256_set1_ps(half(sb)), _mm256_cvtepi32_ps(ls)));
}

// Scales of sub-blocks 2c (lanes 0-7) and 2c + 1 (lanes 8-15) from iq4_xs_scales' 8.
template <size_t c>
inline __m512 iq4_xs_pair_scale(__m512 scales) {
  return _mm512_permutexvar_ps(_mm512_mask_set1_epi32(_mm512_set1_epi32(2 * c), 0xFF00, 2 * c + 1), scales);
}

// One row of blocks of 32 against kT tokens from t0. A row with an odd block count ends with a pair whose second
// block is the first again with scale 0 (its activations are the zero padding, so its integer sum is 0 anyway).
template <size_t kT, Fmt32 kFmt>
void dot_row32(const uint8_t* row, size_t K, const QuantActivations& a, size_t t0, float* out) {
  constexpr bool kIq4 = kFmt == Fmt32::IQ4_NL || kFmt == Fmt32::IQ4_XS;
  // IQ4_XS: a "block" is 16 bytes of codes (its scale comes from the super-block's head, 8 bytes)
  constexpr size_t kBytes = kFmt == Fmt32::Q4_1 ? 20 : kFmt == Fmt32::Q8_0 ? 34 : kFmt == Fmt32::IQ4_XS ? 16 : 18;
  constexpr size_t kHead = kFmt == Fmt32::Q4_1 ? 4 : kFmt == Fmt32::IQ4_XS ? 0 : 2;  // f16 d (and m) first
  [[maybe_unused]] const __m512i grid = kIq4 ? iq4_grid_u8() : _mm512_setzero_si512();
  const size_t nb = K / 32, ld = a.ld8;
  // Two accumulators per token (alternate pairs), so that consecutive FMAs do not wait on each other.
  __m512 acc[kT][2], accm[kT];
  for (size_t t = 0; t < kT; ++t) acc[t][0] = acc[t][1] = accm[t] = _mm512_setzero_ps();
  // u is a constant after inlining: a run-time index would keep the accumulators in memory.
  // IQ4_XS: pair p is sub-blocks 2p % 8 and the next of super-block 2p / 8, whose scales come as xs_scale
  auto step = [&](size_t p, size_t u, bool whole, __m512 xs_scale = __m512{}) __attribute__((always_inline)) {
    const uint8_t* b0 = kFmt == Fmt32::IQ4_XS ? row + (2 * p / 8) * 136 + 8 + 16 * (2 * p % 8) : row + 2 * p * kBytes;
    const uint8_t* b1 = whole ? b0 + kBytes : b0;
    __m512 s = kFmt == Fmt32::IQ4_XS ? xs_scale : halves(b0, b1), m = _mm512_setzero_ps();
    if (kFmt == Fmt32::Q4_1) m = halves(b0 + 2, b1 + 2);
    if (!whole) {
      s = _mm512_maskz_mov_ps(0x00FF, s);
      m = _mm512_maskz_mov_ps(0x00FF, m);
    }
    __m512i w;
    if (kFmt == Fmt32::Q8_0)
      w = _mm512_xor_si512(join(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0 + kHead)),
                                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b1 + kHead))),
                           _mm512_set1_epi8(char(0x80)));
    else if (kIq4)  // the codes looked up in the grid + 128: one vpshufb
      w = _mm512_shuffle_epi8(grid, nibble_pair(b0 + kHead, b1 + kHead));
    else
      w = nibble_pair(b0 + kHead, b1 + kHead);
    for (size_t t = 0; t < kT; ++t) {
      const size_t lane = (t0 + t) * (ld / 4) + 16 * p;
      __m512i init = _mm512_setzero_si512();
      if (kFmt == Fmt32::Q4_0) init = _mm512_loadu_si512(a.xsum4_neg8 + lane);
      if (kFmt == Fmt32::Q8_0 || kIq4) init = _mm512_loadu_si512(a.xsum4_neg128 + lane);
      const __m512i dot = _mm512_dpbusd_epi32(init, w, _mm512_loadu_si512(a.xs8 + (t0 + t) * ld + 64 * p));
      const __m512 scale = _mm512_mul_ps(s, _mm512_loadu_ps(a.dx8 + lane));
      acc[t][u] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, acc[t][u]);
      if (kFmt == Fmt32::Q4_1) accm[t] = _mm512_fmadd_ps(m, _mm512_loadu_ps(a.dxsum4 + lane), accm[t]);
    }
  };
  if constexpr (kFmt == Fmt32::IQ4_XS) {  // whole super-blocks: 4 pairs each, no odd tail
    for (size_t sb = 0; sb < K / 256; ++sb) {
      const __m512 scales = iq4_xs_scales(row + 136 * sb);
      step(4 * sb, 0, true, iq4_xs_pair_scale<0>(scales));
      step(4 * sb + 1, 1, true, iq4_xs_pair_scale<1>(scales));
      step(4 * sb + 2, 0, true, iq4_xs_pair_scale<2>(scales));
      step(4 * sb + 3, 1, true, iq4_xs_pair_scale<3>(scales));
    }
    for (size_t t = 0; t < kT; ++t) out[t] = _mm512_reduce_add_ps(_mm512_add_ps(acc[t][0], acc[t][1]));
    return;
  }
  const size_t pairs = nb / 2;
  size_t p = 0;
  for (; p + 2 <= pairs; p += 2) {
    step(p, 0, true);
    step(p + 1, 1, true);
  }
  if (p < pairs) step(p++, 0, true);
  if (nb % 2) step(p, 1, false);
  for (size_t t = 0; t < kT; ++t)
    out[t] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[t][0], acc[t][1]), accm[t]));
}

// One row of K-quant blocks (256 weights), 64 weights at a time: pair(block, c, w, scale), c an integral_constant
// 0..3, gives the block's weights [64c, 64c + 64) (u8) and the scale of each of the 16 i32 lanes (lane i sums
// weights 4i..4i+3), and records the block's offsets.
template <size_t kT, class Pair>
void dot_row(size_t K, const QuantActivations& a, size_t t0, Pair pair, float* out) {
  __m512 acc[kT][2];
  for (size_t t = 0; t < kT; ++t) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
  // c constant after inlining: static accumulator indices (a run-time index keeps them in memory), immediate
  // shifts and permutations in pair
  auto step = [&](size_t blk, auto c) __attribute__((always_inline)) {
    __m512i w;
    __m512 s;
    pair(blk, c, w, s);
    const size_t p = 4 * blk + c;
    for (size_t t = 0; t < kT; ++t) {
      const __m512i x = _mm512_loadu_si512(a.xs8 + (t0 + t) * a.ld8 + 64 * p);
      const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, x);
      const __m512 scale = _mm512_mul_ps(s, _mm512_loadu_ps(a.dx8 + (t0 + t) * (a.ld8 / 4) + 16 * p));
      acc[t][c % 2] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, acc[t][c % 2]);
    }
  };
  for (size_t blk = 0; blk < K / 256; ++blk) {
    step(blk, std::integral_constant<size_t, 0>());
    step(blk, std::integral_constant<size_t, 1>());
    step(blk, std::integral_constant<size_t, 2>());
    step(blk, std::integral_constant<size_t, 3>());
  }
  for (size_t t = 0; t < kT; ++t) out[t] = _mm512_reduce_add_ps(_mm512_add_ps(acc[t][0], acc[t][1]));
}

// sum_j off[j] * d_x sum(x) over the row's nsub sub-blocks (of 32 or 16: dsum is a.dsum32 or a.dsum16).
void add_offsets(const float* off, size_t nsub, const float* dsum, size_t T, float* out) {
  for (size_t t = 0; t < T; ++t) {
    const float* ds = dsum + t * nsub;
    __m512 acc = _mm512_setzero_ps();
    size_t j = 0;
    for (; j + 16 <= nsub; j += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(off + j), _mm512_loadu_ps(ds + j), acc);
    float s = _mm512_reduce_add_ps(acc);
    for (; j < nsub; ++j) s += off[j] * ds[j];
    out[t] += s;
  }
}

template <class Pair>
void dot_tokens(size_t K, const QuantActivations& a, size_t T, Pair pair, float* out) {
  by_4_tokens(T, out, [&](auto kT, size_t t0, float* o) { dot_row<decltype(kT)::value>(K, a, t0, pair, o); });
}

template <Fmt32 kFmt>
void row32(const uint8_t* row, size_t K, const QuantActivations& a, size_t T, float* out) {
  by_4_tokens(T, out, [&](auto kT, size_t t0, float* o) { dot_row32<decltype(kT)::value, kFmt>(row, K, a, t0, o); });
}

// d times the 8 sub-block scales (lanes 0-7) and -dmin times the 8 mins (lanes 8-15) of a Q4_K block: the 12
// packed bytes (k_scales_mins' layout) unpacked by two byte shuffles instead of scalar work.
inline __m512 q4_k_scales_mins(const uint8_t* b) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 4));  // the 12 bytes (and 4 of qs)
  // low bits: scales 0-3 = s[0..3] & 63, scales 4-7 = s[8..11] & 15, mins 0-3 = s[4..7] & 63, mins 4-7 = s[8..11] >> 4
  __m128i lo = _mm_shuffle_epi8(v, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
  lo = _mm_mask_blend_epi32(0x8, lo, _mm_srli_epi32(lo, 4));
  lo = _mm_and_si128(lo, _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 15, 15, 15, 15));
  // bits 4-5 of scales 4-7 and mins 4-7: the top 2 bits of s[0..3] and s[4..7]
  const __m128i hi = _mm_shuffle_epi8(v, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
  const __m128i sm = _mm_or_si128(lo, _mm_srli_epi32(_mm_and_si128(hi, _mm_set1_epi8(char(0xC0))), 2));
  const __m128 dm = _mm_xor_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(int(load_u32(b)))), _mm_setr_ps(0.f, -0.f, 0.f, 0.f));
  const __m512 f = _mm512_permutexvar_ps(_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
                                         _mm512_castps128_ps512(dm));
  return _mm512_mul_ps(f, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(sm)));
}

// One Q4_K row against kT tokens from t0. Sub-blocks of 32 match the activations' blocks, so d sc_j times the
// activation scale of sub-block j is taken once per block and token (8 lanes) and spread over the 16 i32 lanes
// of each 64 weights by one permutation (the products are those of the per-lane form, bit for bit).
template <size_t kT>
void dot_row_q4_k(const uint8_t* row, size_t K, const QuantActivations& a, size_t t0, float* out) {
  __m512 acc[kT][2];
  __m256 accm[kT];  // the minimum: -dmin m_j times d_x sum(x) of sub-block j
  for (size_t t = 0; t < kT; ++t) {
    acc[t][0] = acc[t][1] = _mm512_setzero_ps();
    accm[t] = _mm256_setzero_ps();
  }
  for (size_t blk = 0; blk < K / 256; ++blk) {
    const uint8_t* b = row + blk * 144;
    const __m512 sm = q4_k_scales_mins(b);
    const __m256 mins = _mm512_extractf32x8_ps(sm, 1);
    __m512 sx[kT];
    for (size_t t = 0; t < kT; ++t) {
      sx[t] = _mm512_castps256_ps512(
          _mm256_mul_ps(_mm512_castps512_ps256(sm), _mm256_loadu_ps(a.d + (t0 + t) * (K / 32) + 8 * blk)));
      accm[t] = _mm256_fmadd_ps(mins, _mm256_loadu_ps(a.dsum32 + (t0 + t) * (K / 32) + 8 * blk), accm[t]);
    }
    // Chunk c (64 weights): 32 bytes whose low nibbles are sub-block 2c and high nibbles 2c + 1. c is a constant
    // after inlining: static accumulator indices (a run-time index keeps them in memory) and permutations.
    auto step = [&](auto c) __attribute__((always_inline)) {
      const __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16 + 32 * c)));
      const __m512i w = _mm512_and_si512(
          _mm512_srlv_epi16(v, _mm512_set_epi64(kShift4, kShift4, kShift4, kShift4, 0, 0, 0, 0)), _mm512_set1_epi8(0x0F));
      const __m512i idx = _mm512_set_epi32(2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1,
                                           2 * c + 1, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c);
      for (size_t t = 0; t < kT; ++t) {
        const __m512i x = _mm512_loadu_si512(a.xs8 + (t0 + t) * a.ld8 + 256 * blk + 64 * c);
        const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, x);
        acc[t][c % 2] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_permutexvar_ps(idx, sx[t]), acc[t][c % 2]);
      }
    };
    step(std::integral_constant<size_t, 0>());
    step(std::integral_constant<size_t, 1>());
    step(std::integral_constant<size_t, 2>());
    step(std::integral_constant<size_t, 3>());
  }
  for (size_t t = 0; t < kT; ++t)
    out[t] = _mm512_reduce_add_ps(
        _mm512_add_ps(_mm512_add_ps(acc[t][0], acc[t][1]), _mm512_zextps256_ps512(accm[t])));
}

void row_q4_k(const uint8_t* row, size_t K, const QuantActivations& a, size_t T, float* out) {
  by_4_tokens(T, out, [&](auto kT, size_t t0, float* o) { dot_row_q4_k<decltype(kT)::value>(row, K, a, t0, o); });
}

void row_q6_k(const uint8_t* row, size_t K, const QuantActivations& a, size_t T, float* off, float* out) {
  // Group c (64 weights) of a block is part c % 2 of half c / 2. Its values: the low (part 0) or high
  // (part 1) nibbles of the half's 64 ql bytes, joined with 2 bits of the half's 32 qh bytes (bits 4 part, then
  // 4 part + 2 for the upper 32). Sub-blocks of 16 (4 lanes) each have a scale; w = d sc (q - 32).
  __m512 scales = _mm512_setzero_ps();
  auto pair = [&](size_t blk, auto c, __m512i& w, __m512& s) __attribute__((always_inline)) {
    const uint8_t* b = row + blk * 210;
    constexpr size_t hf = c / 2, part = c % 2;
    if constexpr (c == 0) {
      const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192));
      scales = _mm512_mul_ps(_mm512_set1_ps(half(b + 208)), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc8)));
      _mm512_storeu_ps(off + 16 * blk, _mm512_mul_ps(scales, _mm512_set1_ps(-32.f)));
    }
    const __m512i mask4 = _mm512_set1_epi8(0x0F), mask2 = _mm512_set1_epi8(0x03);
    const __m512i l = _mm512_loadu_si512(b + 64 * hf);
    const __m512i nib = _mm512_and_si512(part ? _mm512_srli_epi16(l, 4) : l, mask4);
    const __m512i h = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * hf)));
    const __m512i hsel = _mm512_mask_blend_epi64(0xF0, _mm512_srli_epi16(h, 4 * part), _mm512_srli_epi16(h, 4 * part + 2));
    w = _mm512_or_si512(nib, _mm512_slli_epi16(_mm512_and_si512(hsel, mask2), 4));
    // lanes 4i..4i+3 take sub-block 4c + i of the block's 16
    s = _mm512_permutexvar_ps(_mm512_set_epi32(4 * c + 3, 4 * c + 3, 4 * c + 3, 4 * c + 3, 4 * c + 2, 4 * c + 2,
                                               4 * c + 2, 4 * c + 2, 4 * c + 1, 4 * c + 1, 4 * c + 1, 4 * c + 1, 4 * c,
                                               4 * c, 4 * c, 4 * c),
                              scales);
  };
  dot_tokens(K, a, T, pair, out);
  add_offsets(off, K / 16, a.dsum16, T, out);
}

// 16 regrouped rows (row_groups.h) against kT tokens from t0: lane i of every vector is row i. Per block
// column, each token's 4 activations of a slice are broadcast against the slice's 16 rows, two chains of
// vpdpbusd (low and high nibbles, or the two halves of Q8_0) so that they do not wait on each other; the
// block's integer sums start from its offset (Q4_0's -8 sum(x), Q8_0's and IQ4_NL's -128 sum(x)), one FMA per
// block and token scales them, Q4_1's minimum is a second FMA with d_x sum(x). IQ4_NL: both nibbles of a slice go
// through one vpshufb each into the grid + 128, so its units cost two shuffles per slice over Q4_0's.
}  // namespace

// One vpdpbusd against ones sums each lane's 4 values.
void quant_vnni_lane_sums(size_t T, const QuantActivationsOut& o) {
  const __m512i ones = _mm512_set1_epi8(1), zero = _mm512_setzero_si512();
  for (size_t t = 0; t < T; ++t)
    for (size_t k = 0; k < o.ld8; k += 64) {
      const size_t lane = t * (o.ld8 / 4) + k / 4;
      const __m512i s = _mm512_dpbusd_epi32(zero, ones, _mm512_loadu_si512(o.xs8 + t * o.ld8 + k));
      _mm512_storeu_si512(o.xsum4_neg8 + lane, _mm512_sub_epi32(zero, _mm512_slli_epi32(s, 3)));
      _mm512_storeu_si512(o.xsum4_neg128 + lane, _mm512_sub_epi32(zero, _mm512_slli_epi32(s, 7)));
      _mm512_storeu_ps(o.dxsum4 + lane, _mm512_mul_ps(_mm512_cvtepi32_ps(s), _mm512_loadu_ps(o.dx8 + lane)));
    }
}

bool quant_gemv_rows_vnni(const QuantGemvTask& g) {
  if (g.w.row_group) {
    quant_gemv_groups_vnni(g);
    return true;
  }
  // Q5_K is regrouped for these rows; its GGUF rows (counts off multiples of 16) are the AVX2 rows', which read
  // the same activation arrays (the lane sums are the same values)
  if (g.w.type == QuantType::Q5_K) return quant_gemv_rows_avx2(g);
  const size_t K = size_t(g.w.cols);
  thread_local std::vector<float> off;
  off.resize(K / 16);
  for (size_t n = g.n0; n < g.n1; ++n) {
    const uint8_t* row = g.w.row(int64_t(n));
    float out[8] = {};
    switch (g.w.type) {
      case QuantType::Q4_0: row32<Fmt32::Q4_0>(row, K, g.act, g.T, out); break;
      case QuantType::Q4_1: row32<Fmt32::Q4_1>(row, K, g.act, g.T, out); break;
      case QuantType::Q8_0: row32<Fmt32::Q8_0>(row, K, g.act, g.T, out); break;
      case QuantType::IQ4_NL: row32<Fmt32::IQ4_NL>(row, K, g.act, g.T, out); break;
      case QuantType::IQ4_XS: row32<Fmt32::IQ4_XS>(row, K, g.act, g.T, out); break;
      case QuantType::Q4_K: row_q4_k(row, K, g.act, g.T, out); break;
      case QuantType::Q6_K: row_q6_k(row, K, g.act, g.T, off.data(), out); break;
      default: return false;
    }
    for (size_t t = 0; t < g.T; ++t) g.y[t * g.ldy + n] = out[t] + (g.bias ? g.bias[n] : 0.f);
  }
  return true;
}

}  // namespace attnzoo
