// The regrouped rows (row_groups.h) on AVX2 CPUs without AVX-512 VNNI: the layout the VNNI rows read, a 64-byte
// slice of 16 rows taken as two 256-bit halves of 8 rows (lane i of a half is row 8 h + i), so that, as there,
// one instruction serves 8 rows and no row needs a horizontal sum. Without vpdpbusd each slice is dotted with
// the token's 4 broadcast activations by vpmaddubsw (u8 x s8 pairs into i16), and the i16 pair sums of several
// slices are added before one vpmaddwd against ones makes the 8 rows' i32 sums: the GGUF-row AVX2 rows
// (gemv_avx2.cc) pay a vpmaddwd per 32 values, a scale conversion per block and a horizontal sum per row, which
// kept them compute-bound (~40% of a plain read from memory on the Emerald Rapids with AVX2 forced). The i16
// sums stay exact: a nibble pair is at most 2 * 15 * 127 = 3810, so a block's 8 slices sum to at most 30480
// (Q5_K's 5-bit pairs, 7874, 4 slices at a time);
// Q6_K's chains start from their share of the -32 offset, so that a sub-block's 4 slices end within i16
// (q6_k_starts); Q8_0's weights, dotted as |w| against the activations with w's sign (vpsignb, at most 32512 a
// pair), go through vpmaddwd slice by slice, as IQ4_NL / IQ4_XS's grid values do (add_iq4). So every
// integer sum is the VNNI rows' and so are the f32 FMAs (one per block and row, in block order): both give the
// same bits (gemv_groups_test.cc). Where the CPU has AVX-VNNI (core/avx_vnni.h) the same kernels form each
// slice's lane sums with its vpdpbusd instead (Dpbusd below): i32 from the first product, no bound to respect,
// the same exact sums. Compiled with -mavx2 -mfma -mf16c (CMakeLists.txt), reached through quant_gemv_rows_avx2.
#include <immintrin.h>

#include <atomic>
#include <cstring>
#include <type_traits>

#include "core/aligned_buffer.h"
#include "core/avx_vnni.h"
#include "kernels/quant/gemv_kernels.h"
#include "kernels/quant/k_scales_x86.h"
#include "kernels/quant/quant_blocks.h"
#include "kernels/quant/row_groups.h"

namespace attnzoo {
namespace {

enum class Fmt32 { Q4_0, Q4_1, Q8_0, IQ4_NL };

inline __m256i bcast4(const int8_t* x) { return _mm256_set1_epi32(int(load_u32(reinterpret_cast<const uint8_t*>(x)))); }
inline __m256i load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
// 8 f16 at p as f32 (exact).
inline __m256 halves8(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
// v kept in a register as it is: GCC reassociated the integer add chains below into trees, computing every
// product of a block before adding them, and spilled those to the stack (four tokens read at 36-42% of a plain
// read from memory before this barrier).
inline __m256i chained(__m256i v) {
  asm("" : "+x"(v));
  return v;
}
// i16 pair sums -> the 8 rows' i32 sums (each lane's two pairs).
inline __m256i lanes(__m256i pairs) { return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)); }

// How a slice's lane sums are formed, the kernels' one parameter: add(acc, u, s) adds the products of the slice's
// unsigned bytes u and the broadcast activations s to acc in the accumulator's width, widen(acc) turns a chain of
// add into the 8 rows' i32 sums, add32(sums, u, s) adds one slice to i32 sums (Q8_0: its pairs leave no room in
// i16 for a second slice). kWide: add already accumulates in i32, so no chain needs cutting for i16's bound.
// Pairs: vpmaddubsw into i16 pairs, widened by vpmaddwd against ones.
struct Pairs {
  static constexpr bool kWide = false;
  static __m256i add(__m256i acc, __m256i u, __m256i s) {
    return chained(_mm256_add_epi16(acc, _mm256_maddubs_epi16(u, s)));
  }
  static __m256i widen(__m256i acc) { return lanes(acc); }
  static __m256i add32(__m256i sums, __m256i u, __m256i s) {
    return chained(_mm256_add_epi32(sums, lanes(_mm256_maddubs_epi16(u, s))));
  }
};
// Dpbusd: AVX-VNNI's VEX vpdpbusd, the four products of a lane summed into its i32 in one instruction. Written as
// asm, not _mm256_dpbusd_avx_epi32: the intrinsic needs the avxvnni target on every function it is inlined
// through, and the kernels below are shared with Pairs, which must run on AVX2 CPUs without it. The asm also keeps
// each chain in order and in a register, as chained does.
struct Dpbusd {
  static constexpr bool kWide = true;
  static __m256i add(__m256i acc, __m256i u, __m256i s) {
    asm("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "x"(s));
    return acc;
  }
  static __m256i widen(__m256i acc) { return acc; }
  static __m256i add32(__m256i sums, __m256i u, __m256i s) { return add(sums, u, s); }
};

// IQ4's signed grid in both 128-bit lanes, for vpshufb on the codes.
inline __m256i iq4_grid() {
  __m128i g;
  std::memcpy(&g, kIq4Values, 16);
  return _mm256_broadcastsi128_si256(g);
}
// One IQ4 slice (8 rows' 4 codes per byte nibble) of grid values w against the activations at x into i32 sums, in
// Q8_0's form: |w| against x with w's sign (vpsignb; the grid has no 0). A pair reaches 2 x 127 x 127 = 32258,
// so each slice is widened on its own (add32). The VNNI rows' grid + 128 with a -128 sum(x) start would saturate
// vpmaddubsw's pairs (2 x 241 x 127); Dpbusd takes the same |w| form, i32 from the first product.
template <class L>
__attribute__((always_inline)) inline __m256i add_iq4(__m256i sums, __m256i wabs, __m256i w, const int8_t* x) {
  return L::add32(sums, wabs, _mm256_sign_epi8(bcast4(x), w));
}

// Each block function below adds one block column of one half (rows 8 kH .. 8 kH + 7) of a group for kT tokens
// from t0 into acc (two_halves runs them); the half kH = 0 asks for the lines ahead (group_prefetch).

// Blocks of 32: the slices' nibbles (low: elements 4c .., high: 16 + 4c ..) are dotted against the broadcast
// activations and summed in i16, the block's integer sum starts from Q4_0's -8 sum(x), and one FMA per token
// scales it by d_w d_x (Q4_1: a second FMA adds m_w d_x sum(x)).
template <class L, size_t kT, Fmt32 kFmt, size_t kH>
__attribute__((always_inline)) inline void block32(const uint8_t* group, size_t b, size_t K, const QuantActivations& a,
                                                   size_t ld8, size_t t0, __m256 (&acc)[kT]) {
  constexpr size_t kHead = kFmt == Fmt32::Q4_1 ? 4 : 2, kValues = kFmt == Fmt32::Q8_0 ? 32 : 16;
  constexpr size_t kUnit = 16 * (kHead + kValues), kSlices = kValues / 4;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  [[maybe_unused]] const __m256i grid = kFmt == Fmt32::IQ4_NL ? iq4_grid() : _mm256_setzero_si256();
  const uint8_t* u = group + b * kUnit;
  if (kH == 0)
    for (size_t l = 0; l < kUnit; l += 64) group_prefetch(u + l);
  __m256i sum[kT];  // Q4: add's chain (Pairs: i16 pair sums); Q8_0, IQ4_NL: i32 lane sums
  for (size_t t = 0; t < kT; ++t) sum[t] = _mm256_setzero_si256();
  for (size_t c = 0; c < kSlices; ++c) {
    const __m256i v = load256(u + 16 * kHead + 64 * c + 32 * kH);
    if constexpr (kFmt == Fmt32::Q8_0) {
      const __m256i wabs = _mm256_abs_epi8(v);
      for (size_t t = 0; t < kT; ++t) {
        const int8_t* x = a.xs8 + (t0 + t) * ld8 + 32 * b + 4 * c;
        sum[t] = L::add32(sum[t], wabs, _mm256_sign_epi8(bcast4(x), v));
      }
    } else if constexpr (kFmt == Fmt32::IQ4_NL) {
      const __m256i wl = _mm256_shuffle_epi8(grid, _mm256_and_si256(v, low4));
      const __m256i wh = _mm256_shuffle_epi8(grid, _mm256_and_si256(_mm256_srli_epi16(v, 4), low4));
      const __m256i al = _mm256_abs_epi8(wl), ah = _mm256_abs_epi8(wh);
      for (size_t t = 0; t < kT; ++t) {
        const int8_t* x = a.xs8 + (t0 + t) * ld8 + 32 * b + 4 * c;
        sum[t] = add_iq4<L>(sum[t], al, wl, x);
        sum[t] = add_iq4<L>(sum[t], ah, wh, x + 16);
      }
    } else {
      // the low nibbles are elements 4c .. 4c + 3, the high ones 16 + 4c ..
      const __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
      for (size_t t = 0; t < kT; ++t) {
        const int8_t* x = a.xs8 + (t0 + t) * ld8 + 32 * b + 4 * c;
        sum[t] = L::add(sum[t], lo, bcast4(x));
        sum[t] = L::add(sum[t], hi, bcast4(x + 16));
      }
    }
  }
  const __m256 dw = halves8(u + 16 * kH);
  for (size_t t = 0; t < kT; ++t) {
    __m256i dot = kFmt == Fmt32::Q8_0 || kFmt == Fmt32::IQ4_NL ? sum[t] : L::widen(sum[t]);
    if constexpr (kFmt == Fmt32::Q4_0) {
      const int32_t xsum = a.xsum16[(t0 + t) * (K / 16) + 2 * b] + a.xsum16[(t0 + t) * (K / 16) + 2 * b + 1];
      dot = _mm256_add_epi32(_mm256_set1_epi32(-8 * xsum), dot);
    }
    const float dx = a.d[(t0 + t) * (K / 32) + b];
    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(dw, _mm256_set1_ps(dx)), acc[t]);
    if constexpr (kFmt == Fmt32::Q4_1)
      acc[t] = _mm256_fmadd_ps(halves8(u + 32 + 16 * kH), _mm256_set1_ps(a.dsum32[(t0 + t) * (K / 32) + b]), acc[t]);
  }
}

// kT tokens of a group's two halves, out[t * ldo + i] for row i: block(b, kH tag, acc) adds block column b of half
// kH into acc. From 2 tokens on the group's whole K is run once per half, so that one half's accumulators are
// live, not both (with both and a block's unpacked slices four tokens needed more than AVX2's 16 registers); the
// first pass brings the lines in (each half reads 32 bytes of every 64-byte slice), the second finds them in L1 /
// L2. One token takes the halves block by block, each line read once: Q4_0 / Q8_0 from memory 86-105% of a plain
// read against two passes' 79-92% (two alternated runs each).
template <size_t kT, class Block>
void two_halves(size_t blocks, float* out, size_t ldo, Block block) {
  __m256 acc0[kT], acc1[kT];
  for (size_t t = 0; t < kT; ++t) acc0[t] = acc1[t] = _mm256_setzero_ps();
  if constexpr (kT == 1) {
    for (size_t b = 0; b < blocks; ++b) {
      block(b, std::integral_constant<size_t, 0>(), acc0);
      block(b, std::integral_constant<size_t, 1>(), acc1);
    }
  } else {
    for (size_t b = 0; b < blocks; ++b) block(b, std::integral_constant<size_t, 0>(), acc0);
    for (size_t b = 0; b < blocks; ++b) block(b, std::integral_constant<size_t, 1>(), acc1);
  }
  for (size_t t = 0; t < kT; ++t) {
    _mm256_storeu_ps(out + t * ldo, acc0[t]);
    _mm256_storeu_ps(out + t * ldo + 8, acc1[t]);
  }
}

// Q4_K (or, kFive, Q5_K), in the VNNI rows' order: per chunk c of 64 values the 8 slices' low nibbles (sub-block
// 2c) and high ones (2c + 1) are dotted and summed in i16, the rows' 6-bit scales and minima come out of their
// packed bytes 8 rows at a time, and w = d sc q - dmin m takes one FMA for d sc d_x and one for dmin m d_x sum(x)
// per sub-block. Q5_K: bits 2c and 2c + 1 of qh slice s's bytes are the fifth bits of qs slice s's nibbles, moved
// to bit 4 (16-bit shifts by at most 6 right then 4 left, which keep each byte's bits in it); its pairs reach
// 2 x 31 x 127 = 7874, so 4 slices fit i16 and vpmaddubsw's chains are widened to i32 after every 4.
template <class L, size_t kT, size_t kH, bool kFive = false>
__attribute__((always_inline)) inline void block_q4_k(const uint8_t* group, size_t blk, size_t K,
                                                      const QuantActivations& a, size_t ld8, size_t t0,
                                                      __m256 (&acc)[kT]) {
  constexpr size_t kUnit = 16 * (kFive ? 176 : 144), kValuesAt = kFive ? kQ5KValuesAt : kQ4KValuesAt;
  const __m256i low4 = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10);
  const uint8_t* u = group + blk * kUnit;
  // byte j of the half's 8 rows' packed scales
  auto sbytes = [&](size_t j) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(u + 64 + 16 * j + 8 * kH)); };
  auto scale_min = [&](size_t j, __m256& sc, __m256& mn) __attribute__((always_inline)) {
    __m128i s, m;
    q4_k_rows_scale_min(sbytes, j, s, m);
    sc = _mm256_mul_ps(halves8(u + 16 * kH), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(s)));
    mn = _mm256_mul_ps(halves8(u + 32 + 16 * kH), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(m)));
  };
  // the head's lines here (Q5_K: and qh's), the values' slice by slice below: a unit's 36 lines asked for in one
  // burst at its start stalled the rows, as Q6_K's 53 did (block_q6_k)
  if (kH == 0)
    for (size_t l = 0; l < kValuesAt; l += 64) group_prefetch(u + l);
  constexpr bool kSplit = kFive && !L::kWide;  // i16 chains cut after 4 slices
  for (size_t c = 0; c < 4; ++c) {
    __m256i lo[kT], hi[kT], lo32[kT], hi32[kT];
    for (size_t t = 0; t < kT; ++t) lo[t] = hi[t] = lo32[t] = hi32[t] = _mm256_setzero_si256();
    const __m128i down = _mm_cvtsi32_si128(int(2 * c));
    for (size_t s = 0; s < 8; ++s) {
      if (kH == 0) group_prefetch(u + kValuesAt + 64 * (8 * c + s));
      const __m256i q = load256(u + kValuesAt + 64 * (8 * c + s) + 32 * kH);
      __m256i wl = _mm256_and_si256(q, low4), wh = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
      if constexpr (kFive) {
        const __m256i h = _mm256_srl_epi16(load256(u + kQ5KHighAt + 64 * s + 32 * kH), down);  // bit 2c at bit 0
        wl = _mm256_or_si256(wl, _mm256_and_si256(_mm256_slli_epi16(h, 4), bit4));
        wh = _mm256_or_si256(wh, _mm256_and_si256(_mm256_slli_epi16(h, 3), bit4));
      }
      for (size_t t = 0; t < kT; ++t) {
        const int8_t* x = a.xs8 + (t0 + t) * ld8 + 256 * blk + 64 * c + 4 * s;
        lo[t] = L::add(lo[t], wl, bcast4(x));
        hi[t] = L::add(hi[t], wh, bcast4(x + 32));
      }
      if (kSplit && s % 4 == 3)
        for (size_t t = 0; t < kT; ++t) {
          lo32[t] = _mm256_add_epi32(lo32[t], L::widen(lo[t]));
          hi32[t] = _mm256_add_epi32(hi32[t], L::widen(hi[t]));
          lo[t] = hi[t] = _mm256_setzero_si256();
        }
    }
    __m256 sc_lo, mn_lo, sc_hi, mn_hi;
    scale_min(2 * c, sc_lo, mn_lo);
    scale_min(2 * c + 1, sc_hi, mn_hi);
    for (size_t t = 0; t < kT; ++t) {
      const size_t b32 = (t0 + t) * (K / 32) + 8 * blk + 2 * c;
      const __m256i sl = kSplit ? lo32[t] : L::widen(lo[t]), sh = kSplit ? hi32[t] : L::widen(hi[t]);
      const __m256 il = _mm256_cvtepi32_ps(sl), ih = _mm256_cvtepi32_ps(sh);
      acc[t] = _mm256_fmadd_ps(il, _mm256_mul_ps(sc_lo, _mm256_set1_ps(a.d[b32])), acc[t]);
      acc[t] = _mm256_fmadd_ps(ih, _mm256_mul_ps(sc_hi, _mm256_set1_ps(a.d[b32 + 1])), acc[t]);
      acc[t] = _mm256_fnmadd_ps(mn_lo, _mm256_set1_ps(a.dsum32[b32]), acc[t]);
      acc[t] = _mm256_fnmadd_ps(mn_hi, _mm256_set1_ps(a.dsum32[b32 + 1]), acc[t]);
    }
  }
}

// Q6_K, in the VNNI rows' order: per half h of the superblock and part p, the 6-bit values of quarter j (ql's low
// nibbles for j < 2, high above, joined with qh's bits 2j, 2j + 1) of 4 slices are dotted as unsigned q into
// sub-block 8h + 2j + p's chain, which starts from that sub-block's share of -32 sum(x) (q6_k_starts), so that it
// ends at the exact sum of (q - 32) x; then the chain is scaled by d sc d_x, one FMA. Up to 2 tokens the four
// quarters' chains run together (each slice loaded once); from 3 tokens two quarters at a time (each pair reloads
// the slices from L1), so that fewer chains are live than AVX2's 16 registers hold beside T accumulators. A
// part's 4 slices are unrolled at constant offsets from one address: as a loop over slice pairs a fifth of the
// part's instructions were scalar address work and reloads from the stack frame.
template <class L, size_t kT, size_t kH>
__attribute__((always_inline)) inline void block_q6_k(const uint8_t* group, size_t blk, size_t K,
                                                      const QuantActivations& a, const int32_t* starts, size_t ld8,
                                                      size_t t0, __m256 (&acc)[kT]) {
  constexpr size_t kUnit = 16 * 210, kQuarters = kT <= 2 ? 4 : 2;
  const __m256i low4 = _mm256_set1_epi8(0x0F), bits45 = _mm256_set1_epi8(0x30);
  const uint8_t* u = group + blk * kUnit;
  // the head's lines here, the values' slice by slice below, not the unit's 53 lines in one burst: perf put a third
  // of these rows' samples on that burst's prefetches (what they waited for, likely fill buffers, is not counted here)
  if (kH == 0)
    for (size_t l = 0; l < kQ6ValuesAt; l += 64) group_prefetch(u + l);
  const __m256 dw = halves8(u + 16 * kH);
  for (size_t h = 0; h < 2; ++h)
    for (size_t p = 0; p < 2; ++p)
      for (size_t j0 = 0; j0 < 4; j0 += kQuarters) {
        // this part's 4 slices (runs 8h + 4p ..), their activations, and its sub-blocks' entries 8h + 2j + p
        const uint8_t* v0 = u + kQ6ValuesAt + 192 * (8 * h + 4 * p) + 32 * kH;
        const int8_t* x0 = a.xs8 + t0 * ld8 + 256 * blk + 128 * h + 16 * p;
        const size_t sb0 = 8 * h + p;
        __m256i d[kT][kQuarters];
        for (size_t t = 0; t < kT; ++t)
          for (size_t q = 0; q < kQuarters; ++q)
            d[t][q] = _mm256_set1_epi32(starts[(t0 + t) * (K / 16) + 16 * blk + sb0 + 2 * (j0 + q)]);
#pragma GCC unroll 4
        for (size_t i = 0; i < 4; ++i) {
          const uint8_t* v = v0 + 192 * i;
          if (kH == 0 && j0 == 0)
            for (size_t l = 0; l < 192; l += 64) {
              group_prefetch(v + l);
              // up to 2 tokens also into L1, 2 KiB ahead: their loads then find the line there, not in L2 (from
              // memory they read a few points nearer the plain read in most alternated pairs; 3 and 4 tokens, whose
              // compute hides the L2 hit, gained nothing)
              if (kT <= 2) __builtin_prefetch(v + l + 2048, 0, 3);
            }
          const __m256i qh = load256(v + 128);
          for (size_t q = 0; q < kQuarters; ++q) {
            const size_t j = j0 + q;
            const __m256i ql = load256(v + 64 * (j % 2));
            const __m256i nib = _mm256_and_si256(j < 2 ? ql : _mm256_srli_epi16(ql, 4), low4);
            // qh's bits 2j, 2j + 1 to bits 4, 5
            const __m256i top = j == 0   ? _mm256_slli_epi16(qh, 4)
                                : j == 1 ? _mm256_slli_epi16(qh, 2)
                                : j == 2 ? qh
                                         : _mm256_srli_epi16(qh, 2);
            const __m256i w = _mm256_or_si256(nib, _mm256_and_si256(top, bits45));
            for (size_t t = 0; t < kT; ++t) d[t][q] = L::add(d[t][q], w, bcast4(x0 + t * ld8 + 32 * j + 4 * i));
          }
        }
        for (size_t q = 0; q < kQuarters; ++q) {
          const size_t j = j0 + q;
          const __m128i sc8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(u + 32 + 16 * (sb0 + 2 * j) + 8 * kH));
          const __m256 sc = _mm256_mul_ps(dw, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc8)));
          for (size_t t = 0; t < kT; ++t) {
            const float dx = a.d[(t0 + t) * (K / 32) + 8 * blk + 4 * h + j];
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(L::widen(d[t][q])), _mm256_mul_ps(sc, _mm256_set1_ps(dx)),
                                     acc[t]);
          }
        }
      }
}

// IQ4_XS: each sub-block j of 32 is an IQ4_NL block of the half's 8 rows (slices 4j .. 4j + 3, both nibbles
// through the grid, i32 sums as block32's), scaled as the VNNI rows scale it: d (ls - 32) of the 8 rows, ls put
// together from scales_l's field j (one u32 per row, shifted by 4j) and scales_h's (u16 widened, shifted by 2j),
// then times d_x, one FMA per sub-block in block order.
template <class L, size_t kT, size_t kH>
__attribute__((always_inline)) inline void block_iq4_xs(const uint8_t* group, size_t blk, size_t K,
                                                        const QuantActivations& a, size_t ld8, size_t t0,
                                                        __m256 (&acc)[kT]) {
  constexpr size_t kUnit = 16 * 136;
  const __m256i low4 = _mm256_set1_epi8(0x0F), grid = iq4_grid();
  const uint8_t* u = group + blk * kUnit;
  if (kH == 0)
    for (size_t l = 0; l < kIq4XsValuesAt; l += 64) group_prefetch(u + l);
  const __m256 dw = halves8(u + 16 * kH);
  const __m256i sh = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(u + 32 + 16 * kH)));
  const __m256i sl = load256(u + 64 + 32 * kH);
  for (size_t j = 0; j < 8; ++j) {
    const __m256i ls = _mm256_or_si256(
        _mm256_and_si256(_mm256_srlv_epi32(sl, _mm256_set1_epi32(int(4 * j))), _mm256_set1_epi32(0xF)),
        _mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(sh, _mm256_set1_epi32(int(2 * j))), _mm256_set1_epi32(3)),
                          4));
    const __m256 sc = _mm256_mul_ps(dw, _mm256_cvtepi32_ps(_mm256_sub_epi32(ls, _mm256_set1_epi32(32))));
    __m256i sum[kT];
    for (size_t t = 0; t < kT; ++t) sum[t] = _mm256_setzero_si256();
    for (size_t c = 0; c < 4; ++c) {
      const uint8_t* v = u + kIq4XsValuesAt + 64 * (4 * j + c);
      if (kH == 0) group_prefetch(v);
      const __m256i q = load256(v + 32 * kH);
      const __m256i wl = _mm256_shuffle_epi8(grid, _mm256_and_si256(q, low4));
      const __m256i wh = _mm256_shuffle_epi8(grid, _mm256_and_si256(_mm256_srli_epi16(q, 4), low4));
      const __m256i al = _mm256_abs_epi8(wl), ah = _mm256_abs_epi8(wh);
      for (size_t t = 0; t < kT; ++t) {
        const int8_t* x = a.xs8 + (t0 + t) * ld8 + 256 * blk + 32 * j + 4 * c;
        sum[t] = add_iq4<L>(sum[t], al, wl, x);
        sum[t] = add_iq4<L>(sum[t], ah, wh, x + 16);
      }
    }
    for (size_t t = 0; t < kT; ++t) {
      const float dx = a.d[(t0 + t) * (K / 32) + 8 * blk + j];
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[t]), _mm256_mul_ps(sc, _mm256_set1_ps(dx)), acc[t]);
    }
  }
}

// Where block_q6_k's chains start, [T, K / 16], one entry per token and sub-block of 16 values: -32 times their sum,
// which turns the unsigned q dotted into q - 32. Dpbusd's chains are i32: the sum itself. Pairs' chains are the i16
// pair sums of vpmaddubsw: the entry is two i16, -32 times the even lanes' 8 values (4c, 4c + 1 of each slice c)
// and -32 times the odd lanes' (4c + 2, 4c + 3), so that each lane ends at its own 8 values' sum of (q - 32) x, at
// most 8 x 32 x 127 = 32512 in magnitude: a sub-block's 4 slices sum in i16 (vpaddw wraps, so only the end needs
// to fit) and one vpmaddwd per sub-block and token makes the rows' i32 sums, where unsigned q's pairs (up to
// 16002) allowed two slices per vpmaddwd and an i32 add.
template <class L>
const int32_t* q6_k_starts(const QuantActivations& a, size_t T, size_t K, size_t ld8) {
  thread_local AlignedBuffer<int32_t> starts;
  starts.resize(T * K / 16);
  int32_t* out = starts.data();
  for (size_t t = 0; t < T; ++t) {
    if constexpr (L::kWide) {
      for (size_t i = 0; i < K / 16; ++i) out[t * (K / 16) + i] = -32 * a.xsum16[t * (K / 16) + i];
    } else {
      const __m256i ones = _mm256_set1_epi8(1);
      for (size_t k = 0; k < K; k += 32) {  // two sub-blocks, one per 128-bit lane
        __m256i s = _mm256_maddubs_epi16(ones, load256(reinterpret_cast<const uint8_t*>(a.xs8 + t * ld8 + k)));
        s = _mm256_add_epi16(s, _mm256_shuffle_epi32(s, 0x4E));  // the 4 slices' pairs, as 32-bit (even, odd)
        s = _mm256_add_epi16(s, _mm256_shuffle_epi32(s, 0xB1));
        s = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(s, 5));
        out[t * (K / 16) + k / 16] = _mm256_cvtsi256_si32(s);
        out[t * (K / 16) + k / 16 + 1] = _mm256_extract_epi32(s, 4);
      }
    }
  }
  return out;
}

// The kernels over one task with lane sums formed by L.
template <class L>
void groups(const QuantGemvTask& g) {
  const size_t K = size_t(g.w.cols), ld8 = g.act.ld8;
  const QuantActivations& a = g.act;
  auto blocks32 = [&](auto fmt) {
    for_row_groups(g, [&](auto kT, const uint8_t* group, size_t t0, float* out) {
      constexpr size_t T = decltype(kT)::value;
      two_halves<T>(K / 32, out, 16, [&](size_t b, auto h, __m256 (&acc)[T]) __attribute__((always_inline)) {
        block32<L, T, decltype(fmt)::value, decltype(h)::value>(group, b, K, a, ld8, t0, acc);
      });
    });
  };
  switch (g.w.type) {
    case QuantType::Q4_0: blocks32(std::integral_constant<Fmt32, Fmt32::Q4_0>()); break;
    case QuantType::Q4_1: blocks32(std::integral_constant<Fmt32, Fmt32::Q4_1>()); break;
    case QuantType::Q8_0: blocks32(std::integral_constant<Fmt32, Fmt32::Q8_0>()); break;
    case QuantType::IQ4_NL: blocks32(std::integral_constant<Fmt32, Fmt32::IQ4_NL>()); break;
    case QuantType::IQ4_XS:
      for_row_groups(g, [&](auto kT, const uint8_t* group, size_t t0, float* out) {
        constexpr size_t T = decltype(kT)::value;
        two_halves<T>(K / 256, out, 16, [&](size_t b, auto h, __m256 (&acc)[T]) __attribute__((always_inline)) {
          block_iq4_xs<L, T, decltype(h)::value>(group, b, K, a, ld8, t0, acc);
        });
      });
      break;
    case QuantType::Q4_K:
      for_row_groups(g, [&](auto kT, const uint8_t* group, size_t t0, float* out) {
        constexpr size_t T = decltype(kT)::value;
        two_halves<T>(K / 256, out, 16, [&](size_t b, auto h, __m256 (&acc)[T]) __attribute__((always_inline)) {
          block_q4_k<L, T, decltype(h)::value>(group, b, K, a, ld8, t0, acc);
        });
      });
      break;
    case QuantType::Q5_K:
      for_row_groups(g, [&](auto kT, const uint8_t* group, size_t t0, float* out) {
        constexpr size_t T = decltype(kT)::value;
        two_halves<T>(K / 256, out, 16, [&](size_t b, auto h, __m256 (&acc)[T]) __attribute__((always_inline)) {
          block_q4_k<L, T, decltype(h)::value, true>(group, b, K, a, ld8, t0, acc);
        });
      });
      break;
    default: {
      const int32_t* starts = q6_k_starts<L>(a, g.T, K, ld8);
      for_row_groups(g, [&](auto kT, const uint8_t* group, size_t t0, float* out) {
        constexpr size_t T = decltype(kT)::value;
        two_halves<T>(K / 256, out, 16, [&](size_t b, auto h, __m256 (&acc)[T]) __attribute__((always_inline)) {
          block_q6_k<L, T, decltype(h)::value>(group, b, K, a, starts, ld8, t0, acc);
        });
      });
    }
  }
}

std::atomic<uint64_t> avx_vnni_tasks{0};

}  // namespace

// Tests turn the AVX-VNNI rows off and on within one process; the switch and the CPU still bound them.
std::atomic<bool> avx_vnni_allowed{true};

bool quant_gemv_groups_avx_vnni_enabled() {
  return avx_vnni_support().use && avx_vnni_allowed.load(std::memory_order_relaxed);
}

void quant_gemv_groups_allow_avx_vnni(bool allow) { avx_vnni_allowed.store(allow, std::memory_order_relaxed); }

bool quant_gemv_groups_avx_vnni_allowed() { return avx_vnni_allowed.load(std::memory_order_relaxed); }

uint64_t quant_gemv_groups_avx_vnni_tasks() { return avx_vnni_tasks.load(std::memory_order_relaxed); }

void quant_gemv_groups_avx2(const QuantGemvTask& g) {
  if (!quant_gemv_groups_avx_vnni_enabled()) return groups<Pairs>(g);
  avx_vnni_tasks.fetch_add(1, std::memory_order_relaxed);
  groups<Dpbusd>(g);
}

}  // namespace attnzoo
