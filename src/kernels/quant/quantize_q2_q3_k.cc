// Q2_K (super-blocks of 256: sixteen sub-blocks of 16, each a 4-bit scale and 4-bit minimum of f16 d / dmin, 2-bit
// levels) and Q3_K (sixteen 6-bit signed scales of one f16 d, 3-bit signed levels split into 2 low bits and a high-bit
// mask). The searches are llama.cpp's (quantize_row_q2_K_ref / quantize_row_q3_K_ref without importance, its
// quantize_row_q2_K_impl / quantize_row_q3_K_impl with it), written from their description in the same f32
// operations and order, so the bytes are llama-quantize's: python/tests/test_quantize_q2_q3_k.py transcribes them
// to numpy and runs llama-quantize where it is built. Layouts as dequant_reference.cc reads them.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/quant/quant_blocks.h"
#include "kernels/quant/quantize.h"

namespace attnzoo::quant_detail {
namespace {

constexpr int kSuper = 256;
constexpr int kSub = 16;

// qs of both formats: byte l of each 32-byte half holds the 2-bit levels of elements l, l + 32, l + 64, l + 96.
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kSuper; j += 128)
    for (int l = 0; l < 32; ++l)
      qs[j / 4 + l] = uint8_t(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

// The per-value weights of the importance paths: importance * sqrt(sigma2 + x^2), sigma2 = spread * mean(x^2)
// over the super-block (llama.cpp uses spread 1 for Q2_K, 2 for Q3_K); sw[j] = each sub-block's weight sum.
void importance_weights(const float* x, const float* importance, float spread, float* weights, float* sw) {
  float sum_x2 = 0;
  for (int l = 0; l < kSuper; ++l) sum_x2 += x[l] * x[l];
  const float sigma2 = spread == 1 ? sum_x2 / kSuper : spread * sum_x2 / kSuper;
  for (int j = 0; j < kSuper / kSub; ++j) {
    sw[j] = 0;
    for (int l = 0; l < kSub; ++l) {
      const int i = kSub * j + l;
      weights[i] = importance[i] * std::sqrt(sigma2 + x[i] * x[i]);
      sw[j] += weights[i];
    }
  }
}

// Q2_K: d, dmin and the 4-bit scale / min pairs at y, the levels in L (requantized against the stored scales).
void q2_k_super_block(const float* x, const float* importance, uint8_t* y, uint8_t* L) {
  float scales[16], mins[16], weights[kSuper], sw[16];
  uint8_t* packed = y;  // scales[16]: scale in the low nibble, min in the high one
  if (importance) {
    importance_weights(x, importance, 1, weights, sw);
    for (int j = 0; j < 16; ++j)
      scales[j] = search_with_min(kSub, 3, x + kSub * j, weights + kSub * j, L + kSub * j, &mins[j], -0.9f, 0.05f, 36);
    uint8_t ls[16], lm[16];
    const float d = search_positive(16, 15, scales, sw, ls);
    const float dmin = search_positive(16, 15, mins, sw, lm);
    store_half(y + 80, d);
    store_half(y + 82, dmin);
    for (int j = 0; j < 16; ++j) packed[j] = uint8_t(ls[j] | (lm[j] << 4));
  } else {
    // Weights |x| and the absolute error: a plain search that lets the rare large value cost linearly.
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < kSub; ++l) weights[l] = std::fabs(x[kSub * j + l]);
      scales[j] = search_with_min(kSub, 3, x + kSub * j, weights, L + kSub * j, &mins[j], -0.5f, 0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    // The scale and min levels are not clamped (the largest rounds to 15 exactly); a byte keeps their low bits,
    // as llama.cpp's does.
    if (max_scale > 0) {
      const float iscale = 15.f / max_scale;
      for (int j = 0; j < 16; ++j) packed[j] = uint8_t(nearest_int(iscale * scales[j]));
      store_half(y + 80, max_scale / 15.f);
    } else {
      std::memset(packed, 0, 16);
      store_half(y + 80, 0.f);
    }
    if (max_min > 0) {
      const float iscale = 15.f / max_min;
      for (int j = 0; j < 16; ++j) packed[j] = uint8_t(packed[j] | (nearest_int(iscale * mins[j]) << 4));
      store_half(y + 82, max_min / 15.f);
    } else {
      store_half(y + 82, 0.f);
    }
  }
  const float d16 = load_half(y + 80), dmin16 = load_half(y + 82);
  for (int j = 0; j < 16; ++j) {
    const float d = d16 * float(packed[j] & 0xF);
    if (d == 0) continue;  // the search's levels stay (they decode to the minimum alone)
    const float dm = dmin16 * float(packed[j] >> 4);
    for (int l = 0; l < kSub; ++l) L[kSub * j + l] = uint8_t(std::clamp(nearest_int((x[kSub * j + l] + dm) / d), 0, 3));
  }
}

// Q3_K's sixteen 6-bit scales (biased by 32): low nibbles two to a byte in bytes 0-7 (scale j and j + 8 share byte
// j), the high 2 bits of scale j at bits 2 (j / 4) of byte 8 + j % 4.
void pack_q3_scales(const uint8_t* ls, uint8_t* s) {
  std::memset(s, 0, 12);
  for (int j = 0; j < 16; ++j) {
    const int l = ls[j];
    if (j < 8) {
      s[j] = uint8_t(l & 0xF);
    } else {
      s[j - 8] = uint8_t(s[j - 8] | ((l & 0xF) << 4));
    }
    s[j % 4 + 8] = uint8_t(s[j % 4 + 8] | ((l >> 4) << (2 * (j / 4))));
  }
}

int q3_scale(const uint8_t* s, int j) {
  const int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
  return (lo | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
}

void q3_k_super_block(const float* x, const float* importance, uint8_t* y, int8_t* L) {
  float scales[16];
  uint8_t ls[16];
  float d_block = 0;
  if (importance) {
    float weights[kSuper], sw[16];
    importance_weights(x, importance, 2, weights, sw);
    for (int j = 0; j < 16; ++j) scales[j] = search_symmetric(kSub, 4, x + kSub * j, weights + kSub * j, L + kSub * j);
    int8_t lsigned[16];
    d_block = search_symmetric(16, 32, scales, sw, lsigned);  // levels already biased by 32
    for (int j = 0; j < 16; ++j) ls[j] = uint8_t(lsigned[j]);
  } else {
    float max_scale = 0, amax = 0;
    for (int j = 0; j < 16; ++j) {
      scales[j] = search_symmetric_refined(kSub, 4, x + kSub * j, L + kSub * j);
      if (std::fabs(scales[j]) > amax) amax = std::fabs(scales[j]), max_scale = scales[j];
    }
    std::fill(ls, ls + 16, uint8_t(0));
    if (max_scale != 0) {
      const float iscale = -32.f / max_scale;  // the largest scale on -32: the 6-bit range's longer side
      for (int j = 0; j < 16; ++j)
        ls[j] = uint8_t(std::clamp(int(int8_t(nearest_int(iscale * scales[j]))), -32, 31) + 32);
      d_block = 1 / iscale;
    }
  }
  pack_q3_scales(ls, y + 96);
  store_half(y + 108, d_block);
  const float d16 = load_half(y + 108);
  for (int j = 0; j < 16; ++j) {
    const float d = d16 * float(q3_scale(y + 96, j));
    if (d == 0) continue;
    for (int l = 0; l < kSub; ++l) L[kSub * j + l] = int8_t(std::clamp(nearest_int(x[kSub * j + l] / d), -4, 3) + 4);
  }
}

}  // namespace

void quantize_q2_k(const float* x, uint8_t* y, int64_t n, const float* w) {
  for (int64_t b = 0; b < n / kSuper; ++b, x += kSuper, y += 84) {
    uint8_t L[kSuper];
    q2_k_super_block(x, w ? w + b * kSuper : nullptr, y, L);
    pack_2bit(L, y + 16);
  }
}

void quantize_q3_k(const float* x, uint8_t* y, int64_t n, const float* w) {
  for (int64_t b = 0; b < n / kSuper; ++b, x += kSuper, y += 110) {
    int8_t L[kSuper];
    q3_k_super_block(x, w ? w + b * kSuper : nullptr, y, L);
    // Levels 0-7 stand for -4..3: the high bit (set for 4-7) in hmask, bit j / 32 of byte j % 32.
    uint8_t low[kSuper];
    uint8_t* hmask = y;
    std::memset(hmask, 0, 32);
    for (int j = 0; j < kSuper; ++j) {
      int l = L[j];
      if (l > 3) hmask[j % 32] = uint8_t(hmask[j % 32] | (1 << (j / 32))), l -= 4;
      low[j] = uint8_t(l);
    }
    pack_2bit(low, y + 32);
  }
}

}  // namespace attnzoo::quant_detail
