// quant_gemv_f32 rows on AVX-512 for Q4_K, Q5_K and Q6_K (the projections of Q4_K_M / Q5_K_M files, and the Q6_K
// output head of every 4- and 5-bit model): each weight is dequantized in a register to exactly the f32 value
// dequantize_row gives (same operations, same order), then FMA'd with the f32 activations. Written for instructions
// per byte, since a decode GEMV must keep up with memory on one core (two SMT threads share it), and a 512-bit op
// issues at about 2 per cycle:
//  - Q4_K looks values up instead of converting them: each sub-block's 16 possible weights d_j q - m_j form one
//    register, and vpermps indexes it with the packed bytes widened to 32-bit lanes (it reads only the low 4
//    bits, so the low nibbles need no mask and the high ones one shift).
//  - Q5_K likewise from 32 values in two registers (vpermi2ps), the fifth bit merged into each index: on the
//    Zen 5 (one thread, N = K = 1024, Quant.DISABLED_BenchGemv) one token's row went from 1.56x Q4_K's time
//    (the Highway row) to 0.98x.
//  - Q6_K assembles its 6-bit values 64 at a time in bytes (nibbles, top bits and the -32 bias), stores the
//    block's 256 int8 values in L1, and widens them 16 at a time as loads.
//  - Several accumulators per token: one FMA chain per token would wait 4 cycles per 16 weights.
// Measured against the Highway rows (gemv_f32.cc) by Quant.DISABLED_BenchGemvStream: the same lookup for Q4_0
// (one scale per 32 weights) and a hand-written Q8_0 were no faster than the Highway rows, so those formats, and
// Q6_K from 3 tokens up, stay there.
// Compiled with -ffp-contract=off (CMakeLists.txt) so that the table's product and difference stay two roundings.
// GCC 12 warns inside its own intrinsic headers (their undefined-value placeholders).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

#include "core/dispatch.h"
#include "kernels/quant/gemv_kernels.h"
#include "kernels/quant/quant_blocks.h"

namespace attnzoo {
namespace {

// The block's f16 scale in all 16 lanes (vpbroadcastw + vcvtph2ps: exact).
inline __m512 half16(const uint8_t* p) { return _mm512_cvtph_ps(_mm256_set1_epi16(short(load_u16(p)))); }

inline __m512i widen_u8(const uint8_t* p) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m512i widen_s8(const int8_t* p) {
  return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// 0, 1, ..., 15 as f32.
inline __m512 iota16() {
  return _mm512_set_ps(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
}

// Accumulators for kT tokens: several per token so that consecutive weight vectors do not wait on each other.
template <size_t kT>
struct Acc {
  static constexpr size_t kN = kT <= 2 ? 4 : 2;
  __m512 a[kT][kN];
  const float* x;
  size_t K;
  Acc(const float* x_, size_t K_) : x(x_), K(K_) {
    for (size_t t = 0; t < kT; ++t)
      for (size_t i = 0; i < kN; ++i) a[t][i] = _mm512_setzero_ps();
  }
  // w: weights [k, k + 16); v: which accumulator (any counter).
  inline void add(__m512 w, size_t k, size_t v) {
    for (size_t t = 0; t < kT; ++t) a[t][v % kN] = _mm512_fmadd_ps(w, _mm512_loadu_ps(x + t * K + k), a[t][v % kN]);
  }
  void sums(float* out) const {
    for (size_t t = 0; t < kT; ++t) {
      __m512 s = a[t][0];
      for (size_t i = 1; i < kN; ++i) s = _mm512_add_ps(s, a[t][i]);
      out[t] = _mm512_reduce_add_ps(s);
    }
  }
};

// The eight (d * scale_j) and (dmin * min_j) of a Q4_K block.
inline void q4_k_scales(const uint8_t* b, float* dl, float* ml) {
  uint32_t u[4];
  k_scales_mins(b + 4, u);
  const __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(u))));
  const __m256 mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(u + 2))));
  const __m256 d = _mm256_set1_ps(_cvtsh_ss(load_u16(b))), dmin = _mm256_set1_ps(_cvtsh_ss(load_u16(b + 2)));
  _mm256_storeu_ps(dl, _mm256_mul_ps(d, sc));
  _mm256_storeu_ps(ml, _mm256_mul_ps(dmin, mn));
}

// Q4_K (d, dmin, 12 bytes of scales / mins, 128 bytes: chunk c's 32 bytes hold sub-block 2c in the low nibbles
// and 2c + 1 in the high ones): w = (d sc_j) q - dmin m_j.
template <size_t kT>
void row_q4_k(const uint8_t* row, size_t K, const float* x, float* out) {
  const __m512 iota = iota16();
  Acc<kT> acc(x, K);
  alignas(32) float dl[8], ml[8];
  for (size_t ib = 0; ib < K / 256; ++ib) {
    const uint8_t* b = row + ib * 144;
    q4_k_scales(b, dl, ml);
#pragma GCC unroll 4
    for (size_t c = 0; c < 4; ++c) {
      const __m512 lo = _mm512_sub_ps(_mm512_mul_ps(_mm512_set1_ps(dl[2 * c]), iota), _mm512_set1_ps(ml[2 * c]));
      const __m512 hi = _mm512_sub_ps(_mm512_mul_ps(_mm512_set1_ps(dl[2 * c + 1]), iota), _mm512_set1_ps(ml[2 * c + 1]));
      const size_t k = 256 * ib + 64 * c;
      const __m512i q0 = widen_u8(b + 16 + 32 * c), q1 = widen_u8(b + 32 + 32 * c);
      acc.add(_mm512_permutexvar_ps(q0, lo), k, 0);
      acc.add(_mm512_permutexvar_ps(q1, lo), k + 16, 1);
      acc.add(_mm512_permutexvar_ps(_mm512_srli_epi32(q0, 4), hi), k + 32, 2);
      acc.add(_mm512_permutexvar_ps(_mm512_srli_epi32(q1, 4), hi), k + 48, 3);
    }
  }
  acc.sums(out);
}

// Q5_K (d, dmin, 12 bytes of scales / mins, qh[32], qs[128] laid out as Q4_K's): element l of sub-block j has
// bit j of qh[l] as its fifth bit. Its 32 possible weights (d sc_j) q - dmin m_j fill two registers, and
// vpermi2ps reads the 5-bit index from the lane's low bits: the nibble in bits 0-3 and the qh bit moved to bit 4
// (one shift and one vpternlogd merging the two, whatever else the lane holds above bit 4).
template <size_t kT>
void row_q5_k(const uint8_t* row, size_t K, const float* x, float* out) {
  const __m512 iota = iota16(), iota16_31 = _mm512_add_ps(iota16(), _mm512_set1_ps(16.f));
  const __m512i low4 = _mm512_set1_epi32(0x0F);
  // bit `bit` of each lane at bit 4
  auto at_bit4 = [](__m512i h, unsigned bit) {
    return bit <= 4 ? _mm512_slli_epi32(h, 4 - bit) : _mm512_srli_epi32(h, bit - 4);
  };
  // (nibble & 0x0F) | (fifth & ~0x0F): vpternlogd with A = nibble, B = fifth, C = 0x0F
  auto merge = [&](__m512i nibble, __m512i fifth) { return _mm512_ternarylogic_epi32(nibble, fifth, low4, 0xE4); };
  Acc<kT> acc(x, K);
  alignas(32) float dl[8], ml[8];
  for (size_t ib = 0; ib < K / 256; ++ib) {
    const uint8_t* b = row + ib * 176;
    q4_k_scales(b, dl, ml);
    const __m512i h0 = widen_u8(b + 16), h1 = widen_u8(b + 32);  // qh[0, 16) and qh[16, 32)
#pragma GCC unroll 4
    for (unsigned c = 0; c < 4; ++c) {
      const __m512 s0 = _mm512_set1_ps(dl[2 * c]), m0 = _mm512_set1_ps(ml[2 * c]);
      const __m512 s1 = _mm512_set1_ps(dl[2 * c + 1]), m1 = _mm512_set1_ps(ml[2 * c + 1]);
      const __m512 lo_a = _mm512_sub_ps(_mm512_mul_ps(s0, iota), m0);
      const __m512 lo_b = _mm512_sub_ps(_mm512_mul_ps(s0, iota16_31), m0);
      const __m512 hi_a = _mm512_sub_ps(_mm512_mul_ps(s1, iota), m1);
      const __m512 hi_b = _mm512_sub_ps(_mm512_mul_ps(s1, iota16_31), m1);
      const size_t k = 256 * ib + 64 * c;
      const __m512i q0 = widen_u8(b + 48 + 32 * c), q1 = widen_u8(b + 64 + 32 * c);
      acc.add(_mm512_permutex2var_ps(lo_a, merge(q0, at_bit4(h0, 2 * c)), lo_b), k, 0);
      acc.add(_mm512_permutex2var_ps(lo_a, merge(q1, at_bit4(h1, 2 * c)), lo_b), k + 16, 1);
      acc.add(_mm512_permutex2var_ps(hi_a, merge(_mm512_srli_epi32(q0, 4), at_bit4(h0, 2 * c + 1)), hi_b), k + 32, 2);
      acc.add(_mm512_permutex2var_ps(hi_a, merge(_mm512_srli_epi32(q1, 4), at_bit4(h1, 2 * c + 1)), hi_b), k + 48, 3);
    }
  }
  acc.sums(out);
}

// Q6_K (ql[128], qh[64], 16 int8 scales, d): element 128 h + m (m < 64) is the low nibble of ql[64 h + m] and
// 128 h + 64 + m its high nibble; their top two bits are bits 2 (m / 32) (+ 4 for the high nibble) of
// qh[32 h + m % 32]. w = (d sc_s) (q - 32), s = element / 16.
template <size_t kT>
void row_q6_k(const uint8_t* row, size_t K, const float* x, float* out) {
  Acc<kT> acc(x, K);
  alignas(64) int8_t q[256];
  alignas(64) float dl[16];
  const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x30), bias = _mm512_set1_epi8(32);
  for (size_t ib = 0; ib < K / 256; ++ib) {
    const uint8_t* b = row + ib * 210;
    const __m512 d = half16(b + 208);
    _mm512_store_ps(dl, _mm512_mul_ps(d, _mm512_cvtepi32_ps(widen_s8(reinterpret_cast<const int8_t*>(b + 192)))));
    for (size_t h = 0; h < 2; ++h) {
      const __m512i l = _mm512_loadu_si512(b + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * h)));
      // top bits at bit 4: bytes 0-31 take qh << 4 (bits 0-1) and qh (bits 4-5 for the high nibble) ...
      // bytes 32-63 take qh << 2 and qh >> 2.
      const __m512i top_lo = _mm512_mask_blend_epi64(0xF0, _mm512_slli_epi16(qh, 4), _mm512_slli_epi16(qh, 2));
      const __m512i top_hi = _mm512_mask_blend_epi64(0xF0, qh, _mm512_srli_epi16(qh, 2));
      const __m512i v_lo = _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_and_si512(top_lo, m2));
      const __m512i v_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4), _mm512_and_si512(top_hi, m2));
      _mm512_store_si512(q + 128 * h, _mm512_sub_epi8(v_lo, bias));
      _mm512_store_si512(q + 128 * h + 64, _mm512_sub_epi8(v_hi, bias));
    }
#pragma GCC unroll 16
    for (size_t s = 0; s < 16; ++s)
      acc.add(_mm512_mul_ps(_mm512_set1_ps(dl[s]), _mm512_cvtepi32_ps(widen_s8(q + 16 * s))), 256 * ib + 16 * s, s);
  }
  acc.sums(out);
}

using RowFn = void (*)(const uint8_t*, size_t, const float*, float*);

void run_rows(const QuantGemvTask& g, RowFn f1, RowFn f2, RowFn f3, RowFn f4) {
  const size_t K = size_t(g.w.cols);
  for_rows_by_4_tokens(g, [&](size_t n, size_t t0, size_t tokens, float* out) {
    const RowFn f[4] = {f1, f2, f3, f4};
    f[tokens - 1](g.w.row(int64_t(n)), K, g.x + t0 * K, out);
  });
}

}  // namespace

bool quant_gemv_f32_avx512_enabled() {
  const Target t = active_target();
  return t == Target::avx512 || t == Target::avx512_bf16;
}

bool quant_gemv_rows_f32_avx512(const QuantGemvTask& g) {
  switch (g.w.type) {
    case QuantType::Q4_K: run_rows(g, row_q4_k<1>, row_q4_k<2>, row_q4_k<3>, row_q4_k<4>); return true;
    case QuantType::Q5_K: run_rows(g, row_q5_k<1>, row_q5_k<2>, row_q5_k<3>, row_q5_k<4>); return true;
    case QuantType::Q6_K:  // from 3 tokens up the Highway rows streamed Q6_K faster from memory (BenchGemvStream)
      if (g.T > 2) return false;
      run_rows(g, row_q6_k<1>, row_q6_k<2>, nullptr, nullptr);
      return true;
    default: return false;
  }
}

}  // namespace attnzoo
