// quant_gemv rows on AVX2 CPUs without AVX-512 VNNI (Zen 1-3, Haswell to Skylake, and Skylake-X / Ice Lake servers
// whose AVX-512 has no VNNI) for the most used formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K), straight
// from the packed blocks against the 8-bit activations, the same data as gemv_avx512vnni.cc reads. Without
// vpdpbusd, 32 u8 x s8 products are summed by fours into 8 i32 lanes with vpmaddubsw (pairs into i16) and vpmaddwd
// against ones: the i16 pair sums saturate above 32767, so the unsigned side must stay small. Nibble formats
// (<= 15), the Q5 formats (<= 31) and Q6_K (<= 63) give at most 2 * 63 * 127 per pair. Q8_0's weights span
// [-128, 127]: they are dotted as |w| against the activations with w's sign (vpsignb), at most 2 * 128 * 127 =
// 32512 per pair, and its integer sums equal llama.cpp's. The row's unpacked int16 copy of the portable integer path
// (gemv_kernels.cc) is skipped: measured on a Zen 3 EPYC (AVX2, one thread, N = K = 1024, the weights in L2 / L3),
// Q4_0 went from 10 to 3-4 cycles per block of 32, still compute-bound (~40% of a plain read from memory on the
// Emerald Rapids with AVX2 forced): so the matrices a model loads in those formats (rows a multiple of 16) are
// regrouped (row_groups.h) and run on gemv_groups_avx2.cc, and these rows take the rest. On VNNI CPUs
// gemv_avx512vnni.cc takes the formats it has and these rows the Q5 ones. Compiled with -mavx2 -mfma -mf16c (see
// CMakeLists.txt), reached only through quant_gemv_avx2_enabled().
#include <immintrin.h>

#include <cstring>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "kernels/quant/gemv_kernels.h"
#include "kernels/quant/row_groups.h"
#include "kernels/quant/quant_blocks.h"

namespace attnzoo {
namespace {

inline float half(const uint8_t* p) { return _cvtsh_ss(load_u16(p)); }

// 8 i32 lanes, lane i = sum of the 4 products w[4i..4i+3] * x[4i..4i+3] (w u8 small enough not to saturate).
inline __m256i dot4(__m256i w, __m256i x) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1));
}

// A block's 16 packed bytes -> its 32 nibbles in element order (low nibbles are elements 0-15).
inline __m256i nibbles32(const uint8_t* q) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
  const __m128i m = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

// Bit e of the 32-bit qh as 16 (the fifth bit of element e of a Q5_0 / Q5_1 block) in byte e: every byte takes
// qh's byte e / 8, keeps bit e % 8 and compares.
inline __m256i fifth_bits32(uint32_t qh) {
  const __m256i which = _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(int(qh)), which);
  const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit), _mm256_set1_epi8(16));
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

enum class Fmt32 { Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 };

// One row of blocks of 32 against kT tokens from t0; activation rows are ld apart (K rounded up to 64).
template <size_t kT, Fmt32 kFmt>
void dot_row32(const uint8_t* row, size_t K, const QuantActivations& a, size_t t0, float* out) {
  constexpr bool kMin = kFmt == Fmt32::Q4_1 || kFmt == Fmt32::Q5_1;
  constexpr bool kFive = kFmt == Fmt32::Q5_0 || kFmt == Fmt32::Q5_1;
  constexpr size_t kBytes = kFmt == Fmt32::Q4_0   ? 18
                            : kFmt == Fmt32::Q4_1 ? 20
                            : kFmt == Fmt32::Q5_0 ? 22
                            : kFmt == Fmt32::Q5_1 ? 24
                                                  : 34;
  constexpr size_t kHead = (kMin ? 4 : 2) + (kFive ? 4 : 0);  // f16 d (and m), Q5's 32 fifth bits, then the values
  const size_t nb = K / 32, ld = a.ld8;
  // Two accumulators per token (alternate blocks), so that consecutive FMAs do not wait on each other.
  __m256 acc[kT][2], accm[kT];
  for (size_t t = 0; t < kT; ++t) acc[t][0] = acc[t][1] = accm[t] = _mm256_setzero_ps();
  // u is a constant after inlining: a run-time index would keep the accumulators in memory.
  auto step = [&](size_t b, size_t u) __attribute__((always_inline)) {
    const uint8_t* blk = row + b * kBytes;
    const __m256 d = _mm256_set1_ps(half(blk));
    __m256i w;
    if constexpr (kFmt == Fmt32::Q8_0)
      w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kHead));
    else if constexpr (kFive)
      w = _mm256_or_si256(nibbles32(blk + kHead), fifth_bits32(load_u32(blk + kHead - 4)));
    else
      w = nibbles32(blk + kHead);
    const __m256i wabs = kFmt == Fmt32::Q8_0 ? _mm256_abs_epi8(w) : w;
    for (size_t t = 0; t < kT; ++t) {
      const size_t lane = (t0 + t) * (ld / 4) + 8 * b;
      __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.xs8 + (t0 + t) * ld + 32 * b));
      if constexpr (kFmt == Fmt32::Q8_0) x = _mm256_sign_epi8(x, w);
      __m256i dot = dot4(wabs, x);
      // Q4_0's q - 8 and Q5_0's q - 16: the dot of q, less 8 / 16 times the lane's activation sum (exact).
      if constexpr (kFmt == Fmt32::Q4_0 || kFmt == Fmt32::Q5_0) {
        __m256i neg = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.xsum4_neg8 + lane));
        if constexpr (kFmt == Fmt32::Q5_0) neg = _mm256_add_epi32(neg, neg);
        dot = _mm256_add_epi32(dot, neg);
      }
      const __m256 scale = _mm256_mul_ps(d, _mm256_loadu_ps(a.dx8 + lane));
      acc[t][u] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc[t][u]);
      if constexpr (kMin)
        accm[t] = _mm256_fmadd_ps(_mm256_set1_ps(half(blk + 2)), _mm256_loadu_ps(a.dxsum4 + lane), accm[t]);
    }
  };
  size_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    step(b, 0);
    step(b + 1, 1);
  }
  if (b < nb) step(b, 0);
  for (size_t t = 0; t < kT; ++t) out[t] = hsum(_mm256_add_ps(_mm256_add_ps(acc[t][0], acc[t][1]), accm[t]));
}

// sum_j off[j] * d_x sum(x) over the row's nsub sub-blocks of 16 (Q6_K's -32).
void add_offsets(const float* off, size_t nsub, const float* dsum, size_t T, float* out) {
  for (size_t t = 0; t < T; ++t) {
    const float* ds = dsum + t * nsub;
    __m256 acc = _mm256_setzero_ps();
    size_t j = 0;
    for (; j + 8 <= nsub; j += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(off + j), _mm256_loadu_ps(ds + j), acc);
    float s = hsum(acc);
    for (; j < nsub; ++j) s += off[j] * ds[j];
    out[t] += s;
  }
}

// One Q4_K row against kT tokens from t0. Sub-block j (32 weights: the low or high nibbles of 32 bytes) has the
// scale d sc_j and the minimum dmin m_j; per token d sc_j is multiplied once per block by the activation scale of
// sub-block j (they coincide: both are blocks of 32), and the minima are dotted with d_x sum(x) per sub-block.
template <size_t kT, bool kFive>
void dot_row_q4_k(const uint8_t* row, size_t K, const QuantActivations& a, size_t t0, float* out) {
  constexpr size_t kBytes = kFive ? 176 : 144, kQs = kFive ? 48 : 16;  // Q5_K: qh[32] before qs
  __m256 acc[kT][2], accm[kT];
  for (size_t t = 0; t < kT; ++t) acc[t][0] = acc[t][1] = accm[t] = _mm256_setzero_ps();
  for (size_t blk = 0; blk < K / 256; ++blk) {
    const uint8_t* b = row + blk * kBytes;
    uint32_t u[4];
    k_scales_mins(b + 4, u);
    const __m256 sc = _mm256_mul_ps(_mm256_set1_ps(half(b)),
                                    _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(u)))));
    const __m256 mins = _mm256_mul_ps(_mm256_set1_ps(-half(b + 2)),
                                      _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(u + 2)))));
    __m256 sx[kT];
    for (size_t t = 0; t < kT; ++t) {
      sx[t] = _mm256_mul_ps(sc, _mm256_loadu_ps(a.d + (t0 + t) * (K / 32) + 8 * blk));
      accm[t] = _mm256_fmadd_ps(mins, _mm256_loadu_ps(a.dsum32 + (t0 + t) * (K / 32) + 8 * blk), accm[t]);
    }
    // Chunk c: 32 bytes whose low nibbles are sub-block 2c and high nibbles 2c + 1. c is a constant after
    // inlining: static accumulator indices and broadcast indices.
    auto step = [&](auto c) __attribute__((always_inline)) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + kQs + 32 * c));
      const __m256i m = _mm256_set1_epi8(0x0F);
      __m256i w0 = _mm256_and_si256(v, m), w1 = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
      if constexpr (kFive) {  // bit j of qh[l] is the fifth bit of sub-block j's element l
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16)), one = _mm256_set1_epi8(1);
        w0 = _mm256_or_si256(w0, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2 * c), one), 4));
        w1 = _mm256_or_si256(w1, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2 * c + 1), one), 4));
      }
      for (size_t t = 0; t < kT; ++t) {
        const int8_t* x = a.xs8 + (t0 + t) * a.ld8 + 256 * blk + 64 * c;
        const __m256i d0 = dot4(w0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
        const __m256i d1 = dot4(w1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32)));
        const __m256 s0 = _mm256_permutevar8x32_ps(sx[t], _mm256_set1_epi32(2 * c));
        const __m256 s1 = _mm256_permutevar8x32_ps(sx[t], _mm256_set1_epi32(2 * c + 1));
        acc[t][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d0), s0, acc[t][0]);
        acc[t][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d1), s1, acc[t][1]);
      }
    };
    step(std::integral_constant<int, 0>());
    step(std::integral_constant<int, 1>());
    step(std::integral_constant<int, 2>());
    step(std::integral_constant<int, 3>());
  }
  for (size_t t = 0; t < kT; ++t) out[t] = hsum(_mm256_add_ps(_mm256_add_ps(acc[t][0], acc[t][1]), accm[t]));
}

// One Q6_K row against kT tokens from t0. Weights 32g .. 32g + 31 of a block (g = 4 hf + 2 part + sub, half hf,
// part = which nibble of ql, sub = which 32 of the half's ql bytes) are (ql[64 hf + 32 sub + l] >> 4 part) & 15
// joined with bits 4 part + 2 sub of qh[32 hf + l] as bits 4-5; w = d sc (q - 32) with a scale per 16 weights. The
// -32 becomes an offset per sub-block (off), dotted once per row with d_x sum(x).
template <size_t kT>
void dot_row_q6_k(const uint8_t* row, size_t K, const QuantActivations& a, size_t t0, float* off, float* out) {
  __m256 acc[kT][2];
  for (size_t t = 0; t < kT; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  for (size_t blk = 0; blk < K / 256; ++blk) {
    const uint8_t* b = row + blk * 210;
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192));
    const __m256 d = _mm256_set1_ps(half(b + 208));
    const __m256 sc[2] = {_mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc8))),
                          _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc8, 8))))};
    if (t0 == 0) {
      _mm256_storeu_ps(off + 16 * blk, _mm256_mul_ps(sc[0], _mm256_set1_ps(-32.f)));
      _mm256_storeu_ps(off + 16 * blk + 8, _mm256_mul_ps(sc[1], _mm256_set1_ps(-32.f)));
    }
    auto step = [&](auto g) __attribute__((always_inline)) {
      constexpr int hf = g / 4, part = (g / 2) % 2, sub = g % 2;
      const __m256i l = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 64 * hf + 32 * sub));
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * hf));
      const __m256i nib = _mm256_and_si256(part ? _mm256_srli_epi16(l, 4) : l, _mm256_set1_epi8(0x0F));
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(h, 4 * part + 2 * sub), _mm256_set1_epi8(0x03));
      const __m256i w = _mm256_or_si256(nib, _mm256_slli_epi16(hi, 4));
      // lanes 0-3 (weights 0-15) take sub-block 2g of the block's 16, lanes 4-7 sub-block 2g + 1
      const __m256i idx = _mm256_setr_epi32(2 * (g % 4), 2 * (g % 4), 2 * (g % 4), 2 * (g % 4), 2 * (g % 4) + 1,
                                            2 * (g % 4) + 1, 2 * (g % 4) + 1, 2 * (g % 4) + 1);
      const __m256 s = _mm256_permutevar8x32_ps(sc[g / 4], idx);
      for (size_t t = 0; t < kT; ++t) {
        const size_t e = 256 * blk + 32 * g;
        const __m256i dot = dot4(w, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.xs8 + (t0 + t) * a.ld8 + e)));
        const __m256 scale = _mm256_mul_ps(s, _mm256_loadu_ps(a.dx8 + (t0 + t) * (a.ld8 / 4) + e / 4));
        acc[t][g % 2] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc[t][g % 2]);
      }
    };
    step(std::integral_constant<int, 0>());
    step(std::integral_constant<int, 1>());
    step(std::integral_constant<int, 2>());
    step(std::integral_constant<int, 3>());
    step(std::integral_constant<int, 4>());
    step(std::integral_constant<int, 5>());
    step(std::integral_constant<int, 6>());
    step(std::integral_constant<int, 7>());
  }
  for (size_t t = 0; t < kT; ++t) out[t] = hsum(_mm256_add_ps(acc[t][0], acc[t][1]));
}

}  // namespace

bool quant_gemv_avx2_handles(QuantType type) {
  switch (type) {
    case QuantType::Q4_0: case QuantType::Q4_1: case QuantType::Q5_0: case QuantType::Q5_1: case QuantType::Q8_0:
    case QuantType::Q4_K: case QuantType::Q5_K: case QuantType::Q6_K: return true;
    default: return false;
  }
}

bool quant_gemv_avx2_enabled() { return active_target() != Target::scalar; }

// The lane sums the rows need, from xs8 and dx8: one vpmaddubsw against ones and one vpmaddwd per 32 values.
void quant_avx2_lane_sums(size_t T, const QuantActivationsOut& o) {
  const __m256i ones = _mm256_set1_epi8(1), zero = _mm256_setzero_si256();
  for (size_t t = 0; t < T; ++t)
    for (size_t k = 0; k < o.ld8; k += 32) {
      const size_t lane = t * (o.ld8 / 4) + k / 4;
      const __m256i s = dot4(ones, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(o.xs8 + t * o.ld8 + k)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.xsum4_neg8 + lane), _mm256_sub_epi32(zero, _mm256_slli_epi32(s, 3)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.xsum4_neg128 + lane), _mm256_sub_epi32(zero, _mm256_slli_epi32(s, 7)));
      _mm256_storeu_ps(o.dxsum4 + lane, _mm256_mul_ps(_mm256_cvtepi32_ps(s), _mm256_loadu_ps(o.dx8 + lane)));
    }
}

bool quant_gemv_rows_avx2(const QuantGemvTask& g) {
  if (g.w.row_group && row_groups_format(g.w.type)) {
    quant_gemv_groups_avx2(g);
    return true;
  }
  if (g.w.row_group) {
    bool done = false;
    on_gguf_rows(g, [&](const QuantGemvTask& t) { done = quant_gemv_rows_avx2(t); });
    return done;
  }
  const size_t K = size_t(g.w.cols);
  thread_local std::vector<float> off;
  off.resize(K / 16);
  for (size_t n = g.n0; n < g.n1; ++n) {
    const uint8_t* row = g.w.row(int64_t(n));
    float out[8] = {};
    auto rows = [&](auto fn) { by_4_tokens(g.T, out, fn); };
    switch (g.w.type) {
      case QuantType::Q4_0:
        rows([&](auto kT, size_t t0, float* o) { dot_row32<decltype(kT)::value, Fmt32::Q4_0>(row, K, g.act, t0, o); });
        break;
      case QuantType::Q4_1:
        rows([&](auto kT, size_t t0, float* o) { dot_row32<decltype(kT)::value, Fmt32::Q4_1>(row, K, g.act, t0, o); });
        break;
      case QuantType::Q5_0:
        rows([&](auto kT, size_t t0, float* o) { dot_row32<decltype(kT)::value, Fmt32::Q5_0>(row, K, g.act, t0, o); });
        break;
      case QuantType::Q5_1:
        rows([&](auto kT, size_t t0, float* o) { dot_row32<decltype(kT)::value, Fmt32::Q5_1>(row, K, g.act, t0, o); });
        break;
      case QuantType::Q8_0:
        rows([&](auto kT, size_t t0, float* o) { dot_row32<decltype(kT)::value, Fmt32::Q8_0>(row, K, g.act, t0, o); });
        break;
      case QuantType::Q4_K:
        rows([&](auto kT, size_t t0, float* o) { dot_row_q4_k<decltype(kT)::value, false>(row, K, g.act, t0, o); });
        break;
      case QuantType::Q5_K:
        rows([&](auto kT, size_t t0, float* o) { dot_row_q4_k<decltype(kT)::value, true>(row, K, g.act, t0, o); });
        break;
      case QuantType::Q6_K:
        rows([&](auto kT, size_t t0, float* o) { dot_row_q6_k<decltype(kT)::value>(row, K, g.act, t0, off.data(), o); });
        add_offsets(off.data(), K / 16, g.act.dsum16, g.T, out);
        break;
      default: return false;
    }
    for (size_t t = 0; t < g.T; ++t) g.y[t * g.ldy + n] = out[t] + (g.bias ? g.bias[n] : 0.f);
  }
  return true;
}

}  // namespace attnzoo
