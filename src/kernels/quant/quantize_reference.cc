// Round-to-nearest block formats, written to give gguf-py's numpy quantizers' bytes: the same f32 operations in
// the same order (compiled with -ffp-contract=off, so no product and sum are fused), the same tie rules (Q8_0
// rounds half away from zero, the 4/5-bit formats truncate x/d + offset + 0.5), f16 scales rounded to nearest
// even. The entry points quantize_row / quantize_matrix live here too.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/denormals.h"
#include "core/error.h"
#include "core/threads.h"
#include "kernels/quant/quantize.h"

namespace attnzoo {
namespace {

constexpr int kBlock = 32;

// trunc(v) clamped to [0, hi], as numpy's trunc(...).astype(uint8).clip(0, hi) for the values that occur
// (v >= 0 up to rounding); an inf or NaN (only where 1/d overflowed: d below 2^-128, stored as f16 zero) becomes 0,
// as numpy's cast gives it on x86.
uint8_t trunc_level(float v, int hi) {
  if (!(v > 0) || v == INFINITY) return 0;
  const float t = std::trunc(v);
  return t >= float(hi) ? uint8_t(hi) : uint8_t(t);
}

// The signed value of largest magnitude (the first one on ties), as numpy's argmax of abs: x[0] for a block of
// zeros, so a -0.0 there gives the scale gguf-py gives (+0.0 after the division by -half).
float signed_absmax(const float* x) {
  float amax = std::fabs(x[0]), max = x[0];
  for (int j = 1; j < kBlock; ++j)
    if (amax < std::fabs(x[j])) amax = std::fabs(x[j]), max = x[j];
  return max;
}

void min_max(const float* x, float* lo, float* hi) {
  *lo = *hi = x[0];
  for (int j = 1; j < kBlock; ++j) *lo = std::min(*lo, x[j]), *hi = std::max(*hi, x[j]);
}

// Nibbles: value j in the low half of byte j, value j + 16 in the high half; the fifth bits, if any, in qh.
void pack_nibbles(const uint8_t* q, uint8_t* qs, uint8_t* qh) {
  uint32_t high = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = uint8_t((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
    high |= uint32_t(q[j] >> 4) << j;
    high |= uint32_t(q[j + 16] >> 4) << (j + 16);
  }
  if (qh) std::memcpy(qh, &high, 4);
}

// Q4_0 / Q5_0: d = max / -2^(bits-1) from the signed extreme; level = trunc(x / d + 2^(bits-1) + 0.5).
void symmetric_rtn(const float* x, uint8_t* y, int64_t n, int half, bool five_bit, const float* w) {
  const int64_t bytes = five_bit ? 22 : 18;
  for (int64_t b = 0; b < n / kBlock; ++b, x += kBlock, y += bytes) {
    uint8_t q[kBlock];
    if (w) {
      int8_t L[kBlock];
      store_half(y, quant_detail::search_symmetric(kBlock, half, x, w + b * kBlock, L));
      for (int j = 0; j < kBlock; ++j) q[j] = uint8_t(L[j]);
    } else {
      const float d = signed_absmax(x) / float(-half);
      const float id = d != 0 ? 1.0f / d : 0.0f;
      const float offset = float(half) + 0.5f;
      for (int j = 0; j < kBlock; ++j) q[j] = trunc_level(x[j] * id + offset, 2 * half - 1);
      store_half(y, d);
    }
    pack_nibbles(q, y + (five_bit ? 6 : 2), five_bit ? y + 2 : nullptr);
  }
}

// Q4_1 / Q5_1: d = (max - min) / nmax, m = min; level = trunc((x - min) / d + 0.5).
void affine_rtn(const float* x, uint8_t* y, int64_t n, int nmax, bool five_bit, const float* w) {
  const int64_t bytes = five_bit ? 24 : 20;
  for (int64_t b = 0; b < n / kBlock; ++b, x += kBlock, y += bytes) {
    uint8_t q[kBlock];
    if (w) {
      float neg_min = 0;
      const float d = quant_detail::search_with_min(kBlock, nmax, x, w + b * kBlock, q, &neg_min, -0.9f, 0.05f, 36);
      store_half(y, d);
      store_half(y + 2, -neg_min);
    } else {
      float lo, hi;
      min_max(x, &lo, &hi);
      const float d = (hi - lo) / float(nmax);
      const float id = d != 0 ? 1.0f / d : 0.0f;
      for (int j = 0; j < kBlock; ++j) q[j] = trunc_level((x[j] - lo) * id + 0.5f, nmax);
      store_half(y, d);
      store_half(y + 2, lo);
    }
    pack_nibbles(q, y + (five_bit ? 8 : 4), five_bit ? y + 4 : nullptr);
  }
}

// The importance-weighted 4/5-bit searches weigh each value by importance * sqrt(sigma2 + x^2), sigma2 being the
// row's mean square (llama.cpp's rule): values that are both large and on important channels count most.
std::vector<float> row_weights(const float* x, int64_t n, const float* importance) {
  float sum_x2 = 0;
  for (int64_t j = 0; j < n; ++j) sum_x2 += x[j] * x[j];
  const float sigma2 = sum_x2 / float(n);
  std::vector<float> w(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) w[size_t(j)] = importance[j] * std::sqrt(sigma2 + x[j] * x[j]);
  return w;
}

}  // namespace

uint16_t f32_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000);
  const uint32_t a = x & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return uint16_t(sign | 0x7E00);  // NaN
  if (a >= 0x38800000u) {                                // normal half range (or overflow to inf)
    const uint32_t r = a + 0xFFFu + ((a >> 13) & 1u);    // round to nearest even at bit 13
    if (r >= 0x47800000u) return uint16_t(sign | 0x7C00);
    return uint16_t(sign | ((r - 0x38000000u) >> 13));
  }
  if (a <= 0x33000000u) return sign;  // at most half the smallest subnormal: ties go to even (zero)
  // Subnormal half: f * 2^24 is exact in f32; nearbyint rounds to nearest even (0x400 is the smallest normal).
  return uint16_t(sign | uint16_t(std::nearbyint(std::fabs(f) * 16777216.0f)));
}

// gguf-py's rounding (its NaN keeps the top half and sets the quiet bit before rounding), unlike core's.
uint16_t f32_to_bf16_gguf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) x = (x & 0xFFFF0000u) | (64u << 16);  // NaN stays a quiet NaN
  return uint16_t((uint64_t(x) + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

namespace quant_detail {

void quantize_q8_0(const float* x, uint8_t* y, int64_t n) {
  for (int64_t b = 0; b < n / kBlock; ++b, x += kBlock, y += 34) {
    float amax = 0;
    for (int j = 0; j < kBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    store_half(y, d);
    for (int j = 0; j < kBlock; ++j) {
      // Half away from zero, as gguf-py's np_roundf; inf / NaN (1/d overflowed) cast to 0 as numpy does on x86.
      const float v = std::round(x[j] * id);
      y[2 + j] = uint8_t(int8_t(std::isfinite(v) ? std::clamp(v, -128.0f, 127.0f) : 0.0f));
    }
  }
}

void quantize_q4_0(const float* x, uint8_t* y, int64_t n, const float* w) { symmetric_rtn(x, y, n, 8, false, w); }
void quantize_q5_0(const float* x, uint8_t* y, int64_t n, const float* w) { symmetric_rtn(x, y, n, 16, true, w); }
void quantize_q4_1(const float* x, uint8_t* y, int64_t n, const float* w) { affine_rtn(x, y, n, 15, false, w); }
void quantize_q5_1(const float* x, uint8_t* y, int64_t n, const float* w) { affine_rtn(x, y, n, 31, true, w); }

}  // namespace quant_detail

bool quantize_supported(QuantType t) {
  switch (t) {
    case QuantType::F32: case QuantType::F16: case QuantType::BF16: case QuantType::Q8_0: case QuantType::Q4_0:
    case QuantType::Q4_1: case QuantType::Q5_0: case QuantType::Q5_1: case QuantType::Q2_K: case QuantType::Q3_K:
    case QuantType::Q4_K: case QuantType::Q5_K: case QuantType::Q6_K: case QuantType::IQ4_NL: case QuantType::IQ4_XS:
      return true;
    default:
      return false;
  }
}

void quantize_row(QuantType t, const float* x, void* dst, int64_t n, const float* importance) {
  using namespace quant_detail;
  auto* y = static_cast<uint8_t*>(dst);
  std::vector<float> w;
  const bool rtn_weighted = importance && (t == QuantType::Q4_0 || t == QuantType::Q4_1 || t == QuantType::Q5_0 ||
                                           t == QuantType::Q5_1);
  if (rtn_weighted) w = row_weights(x, n, importance);
  const float* wp = rtn_weighted ? w.data() : nullptr;
  switch (t) {
    case QuantType::F32: std::memcpy(y, x, size_t(n) * 4); return;
    case QuantType::F16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_half(x[i]);
        std::memcpy(y + 2 * i, &h, 2);
      }
      return;
    case QuantType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_bf16_gguf(x[i]);
        std::memcpy(y + 2 * i, &h, 2);
      }
      return;
    case QuantType::Q8_0: quantize_q8_0(x, y, n); return;
    case QuantType::Q4_0: quantize_q4_0(x, y, n, wp); return;
    case QuantType::Q4_1: quantize_q4_1(x, y, n, wp); return;
    case QuantType::Q5_0: quantize_q5_0(x, y, n, wp); return;
    case QuantType::Q5_1: quantize_q5_1(x, y, n, wp); return;
    case QuantType::Q2_K: quantize_q2_k(x, y, n, importance); return;
    case QuantType::Q3_K: quantize_q3_k(x, y, n, importance); return;
    case QuantType::Q4_K: quantize_q4_k(x, y, n, importance); return;
    case QuantType::Q5_K: quantize_q5_k(x, y, n, importance); return;
    case QuantType::Q6_K: quantize_q6_k(x, y, n, importance); return;
    case QuantType::IQ4_NL: quantize_iq4_nl(x, y, n, importance); return;
    case QuantType::IQ4_XS: quantize_iq4_xs(x, y, n, importance); return;
    default: throw ArgumentError(std::string("quantize: no quantizer for ") + quant_type_name(t));
  }
}

void require_importance(const float* importance, int64_t cols, const std::string& what) {
  for (int64_t i = 0; i < cols; ++i)
    if (!(importance[i] >= 0) || !std::isfinite(importance[i]))
      throw ArgumentError(what + ": input channel " + std::to_string(i) + " is " + std::to_string(importance[i]) +
                          " (expected finite and >= 0)");
}

std::vector<uint8_t> quantize_matrix(QuantType t, const float* x, int64_t rows, int64_t cols,
                                     const float* importance, const std::string& name) {
  if (!quantize_supported(t)) throw ArgumentError(name + ": cannot quantize to " + quant_type_name(t));
  const auto row_bytes = quant_row_bytes(t, cols);
  const int64_t block = quant_type_info(uint32_t(t))->block_elems;
  if (!row_bytes || rows < 0)
    throw ArgumentError(name + ": rows of " + std::to_string(cols) + " values are not a whole number of " +
                        quant_type_name(t) + " blocks of " + std::to_string(block));
  if (importance) require_importance(importance, cols, name + ": importance");
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      if (!std::isfinite(x[r * cols + c]))
        throw ArgumentError(name + ": value at row " + std::to_string(r) + ", column " + std::to_string(c) + " is " +
                            std::to_string(x[r * cols + c]) + "; only finite weights can be quantized");
  std::vector<uint8_t> out(size_t(rows) * size_t(*row_bytes));
  constexpr int64_t kRowsPerTask = 16;
  ThreadPool::global().parallel_for((rows + kRowsPerTask - 1) / kRowsPerTask, [&](int64_t task, int) {
    KeepDenormalsGuard exact;  // the pool flushes subnormals; the reference rounds them
    for (int64_t r = task * kRowsPerTask; r < std::min(rows, (task + 1) * kRowsPerTask); ++r)
      quantize_row(t, x + r * cols, out.data() + r * *row_bytes, cols, importance);
  });
  return out;
}

}  // namespace attnzoo
