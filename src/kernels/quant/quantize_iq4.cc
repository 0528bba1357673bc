// IQ4_NL (blocks of 32: f16 d, 16 bytes of codes) and IQ4_XS (super-blocks of 256: f16 d, eight 6-bit sub-block
// scales as scales_h / scales_l, 128 bytes of codes): every code indexes kIq4Values, a fixed non-uniform grid that
// is denser near zero, times its (sub-)block scale. The search is llama.cpp's quantize_row_iq4_nl_impl (written here
// from its description, in the same f32 operations and order): per block of 32, scales that put the largest |x| on
// the grid's ends (-127 + k for k = -7..7, and +127) are each tried with every value on its nearest grid point, the
// scale refitted by weighted least squares sum(w x q) / sum(w q q), the candidate explaining the most weighted energy
// sum(w x q)^2 / sum(w q q) kept. IQ4_XS then rounds the eight block scales to 6-bit multiples of one f16 d and picks
// every code again against the scale it will be decoded with. Weights: x^2 (large values matter most) or, with an
// importance matrix, importance * sqrt(sigma2 + x^2). quantize_iq4_reference.cc is the same search in double.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "kernels/quant/quant_blocks.h"
#include "kernels/quant/quantize.h"

namespace attnzoo::quant_detail {
namespace {

constexpr int kBlock = 32;
constexpr int kTries = 7;                // llama.cpp's ntry for both formats
constexpr float kGroupMaxEps = 1e-15f;   // a block whose largest |x| is below this is all zero

// The grid index nearest to v, a tie going to the larger value (llama.cpp's best_index_int8). The grid values are
// integers, so the midpoint m between two neighbours is a multiple of 1/2 and v >= m exactly when floor(2v) >= 2m:
// a table over floor(2v) in [-256, 256) gives the index in one load, with no distance computed.
constexpr std::array<uint8_t, 512> kNearestByTwice = [] {
  std::array<uint8_t, 512> t{};
  for (int k = -256; k < 256; ++k) {
    int index = 0;
    for (int j = 0; j < 15; ++j) index += k >= kIq4Values[j] + kIq4Values[j + 1];
    t[size_t(k + 256)] = uint8_t(index);
  }
  return t;
}();

inline int nearest_code(float v) {
  const float t = 2 * v;
  if (!(t > -256.f)) return 0;  // also a NaN (only from a zero scale's 0 * inf, which no caller forms)
  if (t >= 256.f) return 15;
  int i = int(t);
  i -= float(i) > t;  // floor
  return kNearestByTwice[size_t(i + 256)];
}

// Weighted least-squares fit of x ~ d q with q the grid values nearest to id * x: sums sum(w q x), sum(w q q).
inline void fit_codes(const float* x, const float* w, float id, float* sumqx, float* sumq2) {
  float sx = 0, s2 = 0;
  for (int j = 0; j < kBlock; ++j) {
    const float q = float(kIq4Values[nearest_code(id * x[j])]);
    sx += w[j] * q * x[j];
    s2 += w[j] * q * q;
  }
  *sumqx = sx;
  *sumq2 = s2;
}

// The searched scale of one block of 32 (0 for an all-zero block).
float search_block(const float* x, const float* w) {
  float amax = 0, max = 0;
  for (int j = 0; j < kBlock; ++j)
    if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), max = x[j];
  float sumqx, sumq2;
  fit_codes(x, w, 1 / (max / 127.f), &sumqx, &sumq2);  // +127: the grid's positive end is 113, so this clips
  if (!(sumq2 > 0)) return 0.f;  // weights that underflowed: a block ~1e-30 of its super-block's largest value
  float d = sumqx / sumq2;
  float best = d * sumqx;
  for (int itry = -kTries; itry <= kTries; ++itry) {
    fit_codes(x, w, float(itry + kIq4Values[0]) / max, &sumqx, &sumq2);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// One super-block of n values (32: IQ4_NL, 256: IQ4_XS) to its f32 scale d (before f16 rounding), the 6-bit
// sub-block scales ls (biased by 32; IQ4_XS only) and codes L.
//
// The block is first multiplied by a power of two that brings its largest |x| near 1. That is exact, so every
// comparison and rounding below is the one made on x itself (the bytes do not change), but squares and sums can
// neither overflow nor underflow whatever the tensor's magnitude (x^2 of 1e20 is inf in f32).
float quantize_super_block(const float* x, const float* importance, int n, uint8_t* ls, uint8_t* L) {
  float amax = 0;
  for (int j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x[j]));
  const int e = amax > 0 ? std::clamp(std::ilogb(amax), -64, 100) : 0;
  const float down = std::ldexp(1.0f, -e), up = std::ldexp(1.0f, e);
  float xs[256], w[256], scales[8];
  for (int j = 0; j < n; ++j) xs[j] = x[j] * down;
  float sigma2 = 0;
  for (int j = 0; j < n; ++j) sigma2 += xs[j] * xs[j];
  sigma2 *= 2.f / float(n);
  const int blocks = n / kBlock;
  float max_scale = 0, amax_scale = 0;
  for (int ib = 0; ib < blocks; ++ib) {
    const float* xb = xs + kBlock * ib;
    float* wb = w + kBlock * ib;
    float block_amax = 0, wsum = 0;
    for (int j = 0; j < kBlock; ++j) block_amax = std::max(block_amax, std::fabs(xb[j]));
    if (block_amax * up < kGroupMaxEps) {
      scales[ib] = 0;
      continue;
    }
    if (importance) {
      float wmax = 0;
      for (int j = 0; j < kBlock; ++j) {
        wb[j] = importance[kBlock * ib + j] * std::sqrt(sigma2 + xb[j] * xb[j]);
        wsum += wb[j];
        wmax = std::max(wmax, wb[j]);
      }
      // Importance of any magnitude: sum(w q x)^2 overflows f32 from w ~ 1e15 and underflows below ~1e-20, which
      // would stop the search at its first candidate. A power of two brings such weights near 1, exactly; applied
      // by ldexp, since the factor itself is past f32's range when wmax is subnormal.
      if (wmax > 0 && (wmax > 0x1p40f || wmax < 0x1p-40f)) {
        const int shift = -std::ilogb(wmax);
        for (int j = 0; j < kBlock; ++j) wb[j] = std::ldexp(wb[j], shift);
      }
    }
    // No importance, or none on any of this block's channels (0 / 0 would make the scale NaN): x^2.
    if (!(wsum > 0))
      for (int j = 0; j < kBlock; ++j) wb[j] = xb[j] * xb[j];
    scales[ib] = search_block(xb, wb);
    if (std::fabs(scales[ib]) > amax_scale) amax_scale = std::fabs(scales[ib]), max_scale = scales[ib];
  }
  if (blocks == 1) {
    const float id = scales[0] != 0 ? 1 / scales[0] : 0.f;
    for (int j = 0; j < kBlock; ++j) L[j] = uint8_t(nearest_code(id * xs[j]));
    return scales[0] * up;
  }
  // IQ4_XS: the block scales as l * d, l in [-32, 31], d putting the largest on -32; codes against d * l.
  const float d = -max_scale / 32;
  const float id = d != 0 ? 1 / d : 0.f;
  for (int ib = 0; ib < blocks; ++ib) {
    const int l = std::clamp(nearest_int(id * scales[ib]), -32, 31);
    const float dl = d * float(l);
    const float idl = dl != 0 ? 1 / dl : 0.f;
    for (int j = 0; j < kBlock; ++j) L[kBlock * ib + j] = uint8_t(nearest_code(idl * xs[kBlock * ib + j]));
    ls[ib] = uint8_t(l + 32);
  }
  return d * up;
}

}  // namespace

// Codes j and j + 16 of each block of 32 share byte j (low nibble first), as Q4_0.
void pack_iq4_codes(const uint8_t* L, int n, uint8_t* qs) {
  for (int b = 0; b < n / 32; ++b)
    for (int j = 0; j < 16; ++j) qs[16 * b + j] = uint8_t(L[32 * b + j] | (L[32 * b + 16 + j] << 4));
}

// IQ4_XS's eight 6-bit scales: low nibbles two to a byte in scales_l, high 2 bits in the little-endian scales_h.
void pack_iq4_xs_scales(const uint8_t* ls, uint8_t* y) {
  uint16_t h = 0;
  for (int j = 0; j < 8; ++j) h = uint16_t(h | ((ls[j] >> 4) << (2 * j)));
  std::memcpy(y + 2, &h, 2);
  for (int j = 0; j < 4; ++j) y[4 + j] = uint8_t((ls[2 * j] & 0xF) | ((ls[2 * j + 1] & 0xF) << 4));
}

void quantize_iq4_nl(const float* x, uint8_t* y, int64_t n, const float* w) {
  for (int64_t b = 0; b < n / kBlock; ++b, x += kBlock, y += 18) {
    uint8_t L[kBlock];
    store_half(y, quantize_super_block(x, w ? w + b * kBlock : nullptr, kBlock, nullptr, L));
    pack_iq4_codes(L, kBlock, y + 2);
  }
}

void quantize_iq4_xs(const float* x, uint8_t* y, int64_t n, const float* w) {
  for (int64_t b = 0; b < n / 256; ++b, x += 256, y += 136) {
    uint8_t L[256], ls[8];
    store_half(y, quantize_super_block(x, w ? w + b * 256 : nullptr, 256, ls, L));
    pack_iq4_xs_scales(ls, y);
    pack_iq4_codes(L, 256, y + 8);
  }
}

}  // namespace attnzoo::quant_detail
