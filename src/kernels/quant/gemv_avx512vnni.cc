// quant_gemv rows on AVX-512 VNNI for the most used formats (Q4_0, Q8_0, Q4_K, Q6_K): vpdpbusd sums 64 u8 x s8 products
// by fours into i32 lanes, straight from the packed blocks (no unpacked copy of the row). Compiled with
// -mavx512vnni (see CMakeLists.txt) and reached only after a CPUID check (quant_gemv_vnni_enabled).
//  - 4- and 6-bit formats: the unsigned values are one side, the 8-bit activations the signed side; Q4_0's -8,
//    Q6_K's -32 and Q4_K's minimum become per-sub-block offsets, dotted once per row with d_x * sum(x) of each
//    sub-block.
//  - Q8_0: the weights are signed, so the activations are held as x + 128 (u8); each sum then carries
//    128 * sum(w), removed with a vpdpbusd of the weights against ones (once per block, for every token).
// Two sub-blocks of 32 share a register; their scales fill its two 256-bit halves.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>
#include <vector>

#include "kernels/quant/gemv_kernels.h"
#include "kernels/quant/quant_blocks.h"

namespace attnzoo {
namespace {

inline float hsum(__m256 v) {
  const __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s = _mm_add_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}

// 16 packed bytes -> 32 u8 lanes: low nibbles (elements 0-15), then high nibbles (16-31).
inline __m256i nibbles16(const uint8_t* p) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0F));
}

// F16C's scalar conversion (exact): cheaper than the portable bit manipulation, once per block.
inline float half(const uint8_t* p) { return _cvtsh_ss(load_u16(p)); }

inline __m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }
inline __m512 join(float lo, float hi) { return _mm512_insertf32x8(_mm512_set1_ps(lo), _mm256_set1_ps(hi), 1); }

// One row, 64 weights at a time: pair(p, w, scale) gives weights [64p, 64p + 64) (u8 or s8 as the format needs)
// and the scale of each of the 16 i32 lanes (lane i sums weights 4i..4i+3), and records the group's offsets.
// kSigned: weights are s8, multiplied against x + 128.
template <size_t kT, bool kSigned, class Pair>
void dot_row(size_t K, const QuantActivations& a, size_t t0, Pair pair, float* out) {
  const size_t pairs = K / 64, ld = (K + 63) / 64 * 64;
  const __m512i zero = _mm512_setzero_si512(), ones = _mm512_set1_epi8(1);
  __m512 acc[kT][2];
  for (size_t t = 0; t < kT; ++t) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
  for (size_t p = 0; p < pairs; ++p) {
    __m512i w;
    __m512 s;
    pair(p, w, s);
    __m512i bias = zero;
    if (kSigned) bias = _mm512_slli_epi32(_mm512_dpbusd_epi32(zero, ones, w), 7);
    for (size_t t = 0; t < kT; ++t) {
      const uint8_t* xp = (kSigned ? a.xu8 : reinterpret_cast<const uint8_t*>(a.xs8)) + (t0 + t) * ld + 64 * p;
      const __m512i x = _mm512_loadu_si512(xp);
      __m512i dot = kSigned ? _mm512_dpbusd_epi32(zero, x, w) : _mm512_dpbusd_epi32(zero, w, x);
      if (kSigned) dot = _mm512_sub_epi32(dot, bias);
      const __m512 scale = _mm512_mul_ps(s, _mm512_loadu_ps(a.dx8 + (t0 + t) * (K / 4) + 16 * p));
      acc[t][p & 1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, acc[t][p & 1]);
    }
  }
  for (size_t t = 0; t < kT; ++t) out[t] = _mm512_reduce_add_ps(_mm512_add_ps(acc[t][0], acc[t][1]));
}

// The last sub-block of a row with an odd count (Q4_0 / Q8_0 rows of 32 * odd elements), 256 bits wide.
template <bool kSigned>
void dot_last(size_t K, const QuantActivations& a, size_t T, __m256i w, float sc, float* out) {
  const size_t j = K / 32 - 1, ld = (K + 63) / 64 * 64;
  const __m256i zero = _mm256_setzero_si256();
  __m256i bias = zero;
  if (kSigned) bias = _mm256_slli_epi32(_mm256_dpbusd_epi32(zero, _mm256_set1_epi8(1), w), 7);
  for (size_t t = 0; t < T; ++t) {
    const uint8_t* xp = (kSigned ? a.xu8 : reinterpret_cast<const uint8_t*>(a.xs8)) + t * ld + 32 * j;
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xp));
    __m256i dot = kSigned ? _mm256_dpbusd_epi32(zero, x, w) : _mm256_dpbusd_epi32(zero, w, x);
    if (kSigned) dot = _mm256_sub_epi32(dot, bias);
    out[t] += hsum(_mm256_cvtepi32_ps(dot)) * (sc * a.d[t * (K / 32) + j]);
  }
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

template <bool kSigned, class Pair>
void dot_tokens(size_t K, const QuantActivations& a, size_t T, Pair pair, float* out) {
  for (size_t t0 = 0; t0 < T; t0 += 4) {
    switch (T - t0 < 4 ? T - t0 : 4) {
      case 1: dot_row<1, kSigned>(K, a, t0, pair, out + t0); break;
      case 2: dot_row<2, kSigned>(K, a, t0, pair, out + t0); break;
      case 3: dot_row<3, kSigned>(K, a, t0, pair, out + t0); break;
      default: dot_row<4, kSigned>(K, a, t0, pair, out + t0); break;
    }
  }
}

void row_q4_0(const uint8_t* row, size_t K, const QuantActivations& a, size_t T, float* off, float* out) {
  // Q4_0: w = d (q - 8): scale d on the nibbles, offset -8 d.
  auto pair = [&](size_t p, __m512i& w, __m512& s) {
    const uint8_t* b = row + 2 * p * 18;
    const float d0 = half(b), d1 = half(b + 18);
    off[2 * p] = -8.f * d0;
    off[2 * p + 1] = -8.f * d1;
    s = join(d0, d1);
    w = join(nibbles16(b + 2), nibbles16(b + 20));
  };
  dot_tokens<false>(K, a, T, pair, out);
  if (K % 64) {
    const uint8_t* b = row + (K / 32 - 1) * 18;
    const float d = half(b);
    off[K / 32 - 1] = -8.f * d;
    dot_last<false>(K, a, T, nibbles16(b + 2), d, out);
  }
  add_offsets(off, K / 32, a.dsum32, T, out);
}

void row_q8_0(const uint8_t* row, size_t K, const QuantActivations& a, size_t T, float* out) {
  auto pair = [&](size_t p, __m512i& w, __m512& s) {
    const uint8_t* b = row + 2 * p * 34;
    s = join(half(b), half(b + 34));
    w = join(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2)),
             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 36)));
  };
  dot_tokens<true>(K, a, T, pair, out);
  if (K % 64) {
    const uint8_t* b = row + (K / 32 - 1) * 34;
    dot_last<true>(K, a, T, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2)), half(b), out);
  }
}

void row_q4_k(const uint8_t* row, size_t K, const QuantActivations& a, size_t T, float* off, float* out) {
  // Pair p is chunk p % 4 of block p / 4: 32 bytes whose low nibbles are sub-block 2c and high nibbles 2c + 1.
  float sc_block[8];
  auto pair = [&](size_t p, __m512i& w, __m512& s) {
    const uint8_t* b = row + (p / 4) * 144;
    const size_t c = p % 4;
    if (c == 0) {  // the 8 scales and 8 mins of k_scale_min, unpacked 4 at a time in 32-bit words
      uint32_t u[4];
      k_scales_mins(b + 4, u);
      const __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(u))));
      const __m256 mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(u + 2))));
      _mm256_storeu_ps(sc_block, _mm256_mul_ps(_mm256_set1_ps(half(b)), sc));
      _mm256_storeu_ps(off + 2 * p, _mm256_mul_ps(_mm256_set1_ps(-half(b + 2)), mn));
    }
    s = join(sc_block[2 * c], sc_block[2 * c + 1]);
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16 + 32 * c));
    const __m256i mask = _mm256_set1_epi8(0x0F);
    w = join(_mm256_and_si256(v, mask), _mm256_and_si256(_mm256_srli_epi16(v, 4), mask));
  };
  dot_tokens<false>(K, a, T, pair, out);
  add_offsets(off, K / 32, a.dsum32, T, out);
}

void row_q6_k(const uint8_t* row, size_t K, const QuantActivations& a, size_t T, float* off, float* out) {
  // Group p (64 weights) is part p % 2 of half (p / 2) % 2 of block p / 4. Its values: the low (part 0) or high
  // (part 1) nibbles of the half's 64 ql bytes, joined with 2 bits of the half's 32 qh bytes (bits 4 part, then
  // 4 part + 2 for the upper 32). Sub-blocks of 16 (4 lanes) each have a scale; w = d sc (q - 32).
  __m512 scales = _mm512_setzero_ps();
  auto pair = [&](size_t p, __m512i& w, __m512& s) {
    const uint8_t* b = row + (p / 4) * 210;
    const size_t hf = (p / 2) % 2, part = p % 2;
    if (p % 4 == 0) {
      const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192));
      scales = _mm512_mul_ps(_mm512_set1_ps(half(b + 208)), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc8)));
      _mm512_storeu_ps(off + 4 * p, _mm512_mul_ps(scales, _mm512_set1_ps(-32.f)));
    }
    const __m512i mask4 = _mm512_set1_epi8(0x0F), mask2 = _mm512_set1_epi8(0x03);
    const __m512i l = _mm512_loadu_si512(b + 64 * hf);
    const __m512i nib = _mm512_and_si512(part ? _mm512_srli_epi16(l, 4) : l, mask4);
    const __m512i h = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * hf)));
    const __m512i hsel = _mm512_mask_blend_epi64(0xF0, _mm512_srl_epi16(h, _mm_cvtsi32_si128(int(4 * part))),
                                                 _mm512_srl_epi16(h, _mm_cvtsi32_si128(int(4 * part + 2))));
    w = _mm512_or_si512(nib, _mm512_slli_epi16(_mm512_and_si512(hsel, mask2), 4));
    // lanes 4i..4i+3 take sub-block 4 (p % 4) + i of the block's 16
    const __m512i idx = _mm512_add_epi32(_mm512_set1_epi32(int(4 * (p % 4))),
                                         _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0));
    s = _mm512_permutexvar_ps(idx, scales);
  };
  dot_tokens<false>(K, a, T, pair, out);
  add_offsets(off, K / 16, a.dsum16, T, out);
}

}  // namespace

bool quant_gemv_rows_vnni(const QuantGemvTask& g) {
  const size_t K = size_t(g.w.cols);
  thread_local std::vector<float> off;
  off.resize(K / 16);
  for (size_t n = g.n0; n < g.n1; ++n) {
    const uint8_t* row = g.w.row(int64_t(n));
    float out[8] = {};
    switch (g.w.type) {
      case QuantType::Q4_0: row_q4_0(row, K, g.act, g.T, off.data(), out); break;
      case QuantType::Q8_0: row_q8_0(row, K, g.act, g.T, out); break;
      case QuantType::Q4_K: row_q4_k(row, K, g.act, g.T, off.data(), out); break;
      case QuantType::Q6_K: row_q6_k(row, K, g.act, g.T, off.data(), out); break;
      default: return false;
    }
    for (size_t t = 0; t < g.T; ++t) g.y[t * g.ldy + n] = out[t] + (g.bias ? g.bias[n] : 0.f);
  }
  return true;
}

}  // namespace attnzoo
