// K-quants (super-blocks of 256): Q4_K / Q5_K (eight sub-blocks of 32, each with a 6-bit scale and minimum) and
// Q6_K (sixteen sub-blocks of 16 with 8-bit signed scales). Each sub-block's scale comes from the searches in
// quantize_search.cc; the sub-block scales are then quantized against one f16 super-block scale, and every value
// is rounded again against the scale it will actually be decoded with. Layouts as dequant_reference.cc reads them.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/quant/quant_blocks.h"
#include "kernels/quant/quantize.h"

namespace attnzoo::quant_detail {
namespace {

constexpr int kSuper = 256;

// The 12 bytes of eight 6-bit scales and mins (the inverse of k_scale_min).
void pack_scale_min(const uint8_t* ls, const uint8_t* lm, uint8_t* s) {
  std::memset(s, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      s[j] = ls[j];
      s[j + 4] = lm[j];
    } else {
      s[j + 4] = uint8_t((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      s[j - 4] |= uint8_t((ls[j] >> 4) << 6);
      s[j] |= uint8_t((lm[j] >> 4) << 6);
    }
  }
}

// Q4_K / Q5_K: one super-block of 256 into its 6-bit scales / mins, f16 d / dmin and levels L in [0, nmax].
// Without importance: per-value weights av_x + |x| (av_x the sub-block's rms) and llama.cpp's reference grid;
// the sub-block scales are rounded plainly against the largest. With importance: weights importance *
// sqrt(sigma2 + x^2) and a finer grid, the sub-block scales searched too (weighted by each sub-block's weight).
void k_scales_and_levels(const float* x, const float* importance, int nmax, uint8_t* y, uint8_t* L) {
  float scales[8], mins[8], sw[8], weights[32];
  uint8_t ls[8], lm[8];
  float sigma2 = 0;
  if (importance) {
    for (int l = 0; l < kSuper; ++l) sigma2 += x[l] * x[l];
    sigma2 = 2 * sigma2 / kSuper;
  }
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    if (importance) {
      for (int l = 0; l < 32; ++l) weights[l] = importance[32 * j + l] * std::sqrt(sigma2 + xs[l] * xs[l]);
    } else {
      float sum_x2 = 0;
      for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
      const float av_x = std::sqrt(sum_x2 / 32);
      for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
    }
    sw[j] = 0;
    for (int l = 0; l < 32; ++l) sw[j] += weights[l];
    const bool q4 = nmax == 15;
    scales[j] = importance ? search_with_min(32, nmax, xs, weights, L + 32 * j, &mins[j], -0.9f, 0.05f, 36)
                           : search_with_min(32, nmax, xs, weights, L + 32 * j, &mins[j], q4 ? -1.0f : -0.5f, 0.1f,
                                             q4 ? 20 : 15);
  }
  float d, dmin;
  if (importance) {
    d = search_positive(8, 63, scales, sw, ls);
    dmin = search_positive(8, 63, mins, sw, lm);
  } else {
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) max_scale = std::max(max_scale, scales[j]), max_min = std::max(max_min, mins[j]);
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < 8; ++j) {
      ls[j] = uint8_t(std::min(63, nearest_int(inv_scale * scales[j])));
      lm[j] = uint8_t(std::min(63, nearest_int(inv_min * mins[j])));
    }
    d = max_scale / 63.f;
    dmin = max_min / 63.f;
  }
  store_half(y, d);
  store_half(y + 2, dmin);
  pack_scale_min(ls, lm, y + 4);
  const float d16 = load_half(y), dmin16 = load_half(y + 2);
  for (int j = 0; j < 8; ++j) {
    const KScaleMin sm = k_scale_min(y + 4, j);
    const float dj = d16 * float(sm.scale);
    if (dj == 0) continue;  // the search's levels stay (they decode to the minimum alone)
    const float mj = dmin16 * float(sm.min);
    for (int l = 0; l < 32; ++l)
      L[32 * j + l] = uint8_t(std::clamp(nearest_int((x[32 * j + l] + mj) / dj), 0, nmax));
  }
}

}  // namespace

void quantize_q4_k(const float* x, uint8_t* y, int64_t n, const float* w) {
  for (int64_t b = 0; b < n / kSuper; ++b, x += kSuper, y += 144) {
    uint8_t L[kSuper];
    k_scales_and_levels(x, w ? w + b * kSuper : nullptr, 15, y, L);
    uint8_t* q = y + 16;
    for (int j = 0; j < kSuper; j += 64, q += 32)
      for (int l = 0; l < 32; ++l) q[l] = uint8_t(L[j + l] | (L[j + l + 32] << 4));
  }
}

void quantize_q5_k(const float* x, uint8_t* y, int64_t n, const float* w) {
  for (int64_t b = 0; b < n / kSuper; ++b, x += kSuper, y += 176) {
    uint8_t L[kSuper];
    k_scales_and_levels(x, w ? w + b * kSuper : nullptr, 31, y, L);
    uint8_t* qh = y + 16;
    uint8_t* ql = y + 48;
    std::memset(qh, 0, 32);
    uint8_t m1 = 1, m2 = 2;
    for (int j = 0; j < kSuper; j += 64, ql += 32, m1 = uint8_t(m1 << 2), m2 = uint8_t(m2 << 2)) {
      for (int l = 0; l < 32; ++l) {
        int l1 = L[j + l], l2 = L[j + l + 32];
        if (l1 > 15) l1 -= 16, qh[l] |= m1;
        if (l2 > 15) l2 -= 16, qh[l] |= m2;
        ql[l] = uint8_t(l1 | (l2 << 4));
      }
    }
  }
}

void quantize_q6_k(const float* x, uint8_t* y, int64_t n, const float* w) {
  for (int64_t b = 0; b < n / kSuper; ++b, x += kSuper, y += 210) {
    int8_t L[kSuper];
    float scales[16];
    float max_scale = 0, max_abs = 0;
    for (int s = 0; s < 16; ++s) {
      // Without importance the weights are x^2 (search_symmetric's default): large values matter most.
      scales[s] = search_symmetric(16, 32, x + 16 * s, w ? w + b * kSuper + 16 * s : nullptr, L + 16 * s);
      if (std::fabs(scales[s]) > max_abs) max_abs = std::fabs(scales[s]), max_scale = scales[s];
    }
    std::memset(y, 0, 210);
    if (max_abs < 1e-15f) continue;  // all zero: zero levels, zero scales, d = 0
    uint8_t* ql = y;
    uint8_t* qh = y + 128;
    auto* sc = reinterpret_cast<int8_t*>(y + 192);
    const float iscale = -128.f / max_scale;
    store_half(y + 208, 1 / iscale);
    for (int s = 0; s < 16; ++s) sc[s] = int8_t(std::min(127, nearest_int(iscale * scales[s])));
    const float d16 = load_half(y + 208);
    for (int s = 0; s < 16; ++s) {
      const float d = d16 * float(sc[s]);
      if (d == 0) continue;
      for (int l = 0; l < 16; ++l) L[16 * s + l] = int8_t(std::clamp(nearest_int(x[16 * s + l] / d), -32, 31) + 32);
    }
    for (int j = 0; j < kSuper; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const int q1 = L[j + l], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
        ql[l] = uint8_t((q1 & 0xF) | ((q3 & 0xF) << 4));
        ql[l + 32] = uint8_t((q2 & 0xF) | ((q4 & 0xF) << 4));
        qh[l] = uint8_t((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
      }
    }
  }
}

}  // namespace attnzoo::quant_detail
