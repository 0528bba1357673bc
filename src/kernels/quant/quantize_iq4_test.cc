// IQ4_NL / IQ4_XS quantization against the plain double reference beside it, and its edge cases. Decoding by gguf-py,
// the error against Q4_0 / Q4_K and the Python quantizer of scripts/make_bench_gguf.py: test_quantize_iq4.py.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "core/error.h"
#include "kernels/quant/quant.h"
#include "kernels/quant/quant_blocks.h"
#include "kernels/quant/quantize.h"

namespace attnzoo {
namespace {

constexpr QuantType kIq4[] = {QuantType::IQ4_NL, QuantType::IQ4_XS};

int64_t row_bytes(QuantType t, int64_t cols) { return *quant_row_bytes(t, cols); }

std::vector<float> decode(QuantType t, const std::vector<uint8_t>& q, int64_t rows, int64_t cols) {
  std::vector<float> out(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    dequantize_row_reference(t, q.data() + r * row_bytes(t, cols), out.data() + r * cols, cols);
  return out;
}

// The x^2-weighted squared error the search minimises (no importance).
double weighted_error(const std::vector<float>& x, const std::vector<float>& y) {
  double e = 0;
  for (size_t i = 0; i < x.size(); ++i) e += double(x[i]) * x[i] * (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
  return e;
}

std::vector<float> rows_of(const char* kind, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::student_t_distribution<float> heavy(2.f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = std::strcmp(kind, "normal") == 0 ? normal(rng) : heavy(rng);
  return x;
}

TEST(QuantizeIq4, AgreesWithTheDoubleReference) {
  const int64_t rows = 64, cols = 1024;
  for (const char* kind : {"normal", "heavy"}) {
    const std::vector<float> x = rows_of(kind, rows * cols, 3);
    std::vector<float> importance(static_cast<size_t>(cols));
    std::mt19937 rng(4);
    std::lognormal_distribution<float> spread(0.f, 1.5f);
    for (float& v : importance) v = spread(rng);
    for (const float* imp : {static_cast<const float*>(nullptr), static_cast<const float*>(importance.data())}) {
      for (QuantType t : kIq4) {
        const std::vector<uint8_t> got = quantize_matrix(t, x.data(), rows, cols, imp, "x");
        std::vector<uint8_t> want(got.size());
        for (int64_t r = 0; r < rows; ++r)
          quant_detail::quantize_iq4_reference(t, x.data() + r * cols, want.data() + r * row_bytes(t, cols), cols, imp);
        const int64_t block = t == QuantType::IQ4_XS ? 136 : 18;
        int64_t same = 0;
        for (size_t b = 0; b < got.size(); b += size_t(block))
          same += std::memcmp(got.data() + b, want.data() + b, size_t(block)) == 0;
        const double blocks = double(got.size()) / double(block);
        // Blocks differ only where two candidate scales explain the block equally well to within f32 rounding.
        EXPECT_GE(double(same) / blocks, 0.99) << quant_type_name(t) << " " << kind << (imp ? " importance" : "");
        const double e_got = weighted_error(x, decode(t, got, rows, cols));
        const double e_want = weighted_error(x, decode(t, want, rows, cols));
        EXPECT_NEAR(e_got / e_want, 1.0, 5e-4) << quant_type_name(t) << " " << kind << (imp ? " importance" : "");
      }
    }
  }
}

TEST(QuantizeIq4, AllZeroBlocksGiveLlamaCppsBytes) {
  std::vector<float> x(512, 0.f);
  // IQ4_NL: d = 0, every code 8 (the grid value nearest to 0 is +1, times d = 0).
  std::vector<uint8_t> nl = quantize_matrix(QuantType::IQ4_NL, x.data(), 1, 512, nullptr, "x");
  for (size_t b = 0; b < nl.size(); b += 18) {
    EXPECT_EQ(load_u16(&nl[b]), 0);
    for (int j = 2; j < 18; ++j) ASSERT_EQ(nl[b + size_t(j)], 0x88);
  }
  // IQ4_XS: d = -0 / 32 = -0 (f16 0x8000), every sub-block scale 0 (stored 32: scales_h 0b10 each), codes 8.
  std::vector<uint8_t> xs = quantize_matrix(QuantType::IQ4_XS, x.data(), 1, 512, nullptr, "x");
  for (size_t b = 0; b < xs.size(); b += 136) {
    EXPECT_EQ(load_u16(&xs[b]), 0x8000);
    EXPECT_EQ(load_u16(&xs[b + 2]), 0xAAAA);
    for (int j = 4; j < 8; ++j) EXPECT_EQ(xs[b + size_t(j)], 0);
    for (int j = 8; j < 136; ++j) ASSERT_EQ(xs[b + size_t(j)], 0x88);
  }
  // A zero sub-block inside a non-zero super-block decodes to exact zeros.
  for (int j = 64; j < 256; ++j) x[size_t(j)] = std::sin(float(j));
  for (QuantType t : kIq4) {
    const std::vector<float> y = decode(t, quantize_matrix(t, x.data(), 1, 512, nullptr, "x"), 1, 512);
    for (int j = 0; j < 64; ++j) ASSERT_EQ(y[size_t(j)], 0.f) << quant_type_name(t);
    for (int j = 256; j < 512; ++j) ASSERT_EQ(y[size_t(j)], 0.f) << quant_type_name(t);
  }
}

// Scaling a row by a power of two scales every block scale by it and changes no code (while the f16 scales stay
// normal): the search's own power-of-two normalisation is exact.
TEST(QuantizeIq4, PowersOfTwoChangeOnlyTheScale) {
  const int64_t cols = 2048;
  const std::vector<float> x = rows_of("heavy", cols, 8);
  for (QuantType t : kIq4) {
    const std::vector<uint8_t> base = quantize_matrix(t, x.data(), 1, cols, nullptr, "x");
    for (int k : {-2, 7}) {
      std::vector<float> xk(x);
      for (float& v : xk) v = std::ldexp(v, k);
      const std::vector<uint8_t> q = quantize_matrix(t, xk.data(), 1, cols, nullptr, "x");
      const size_t block = t == QuantType::IQ4_XS ? 136 : 18;
      for (size_t b = 0; b < q.size(); b += block) {
        ASSERT_EQ(load_half(&q[b]), std::ldexp(load_half(&base[b]), k)) << quant_type_name(t) << " block " << b;
        ASSERT_EQ(std::memcmp(&q[b + 2], &base[b + 2], block - 2), 0) << quant_type_name(t) << " block " << b;
      }
    }
  }
}

// Importance weights only matter relative to each other: any power of two times them gives the same blocks, also
// where their squared sums would leave f32's range.
TEST(QuantizeIq4, ImportanceOfAnyMagnitudeGivesTheSameBlocks) {
  const int64_t cols = 1024;
  const std::vector<float> x = rows_of("normal", 4 * cols, 10);
  std::vector<float> importance(static_cast<size_t>(cols));
  std::mt19937 rng(11);
  std::lognormal_distribution<float> spread(0.f, 1.f);
  for (float& v : importance) v = spread(rng);
  for (QuantType t : kIq4) {
    const std::vector<uint8_t> base = quantize_matrix(t, x.data(), 4, cols, importance.data(), "x");
    for (int k : {-90, 90}) {
      std::vector<float> scaled(importance);
      for (float& v : scaled) v = std::ldexp(v, k);
      EXPECT_EQ(quantize_matrix(t, x.data(), 4, cols, scaled.data(), "x"), base) << quant_type_name(t) << " 2^" << k;
    }
  }
}

TEST(QuantizeIq4, OneHugeOutlierKeepsItsValue) {
  std::vector<float> x = rows_of("normal", 256, 5);
  for (float& v : x) v *= 0.01f;
  x[37] = -3000.f;  // in the second block of 32, five orders of magnitude above its neighbours
  for (QuantType t : kIq4) {
    const std::vector<float> y = decode(t, quantize_matrix(t, x.data(), 1, 256, nullptr, "x"), 1, 256);
    EXPECT_NEAR(y[37], -3000.f, 3000.f * 0.002f) << quant_type_name(t);  // on the grid's end, f16 d
    for (int j = 32; j < 64; ++j) ASSERT_LE(std::fabs(y[size_t(j)] - x[size_t(j)]), 30.f) << quant_type_name(t);
    // The other blocks keep their own scale under IQ4_NL; under IQ4_XS the outlier's sub-block sets d and the
    // 6-bit scales of the others round to zero (their values become exactly 0, never garbage).
    for (int j = 64; j < 256; ++j)
      ASSERT_LE(std::fabs(y[size_t(j)] - x[size_t(j)]), t == QuantType::IQ4_NL ? 0.01f : 0.05f) << quant_type_name(t);
  }
}

TEST(QuantizeIq4, ImportanceOfZeroOnABlockFallsBackToPlainWeights) {
  const std::vector<float> x = rows_of("normal", 512, 6);
  std::vector<float> importance(512, 1.f);
  for (int j = 32; j < 64; ++j) importance[size_t(j)] = 0.f;  // 0 / 0 in llama.cpp's refit
  for (QuantType t : kIq4) {
    const std::vector<float> y = decode(t, quantize_matrix(t, x.data(), 1, 512, importance.data(), "x"), 1, 512);
    double sq = 0, sq_x = 0;
    for (int j = 32; j < 64; ++j) {
      ASSERT_TRUE(std::isfinite(y[size_t(j)])) << quant_type_name(t);
      sq += double(y[size_t(j)] - x[size_t(j)]) * (y[size_t(j)] - x[size_t(j)]);
      sq_x += double(x[size_t(j)]) * x[size_t(j)];
    }
    EXPECT_LT(std::sqrt(sq / sq_x), 0.15) << quant_type_name(t);
  }
}

TEST(QuantizeIq4, RefusalsNameTheTensor) {
  auto message = [](const std::function<void()>& fn) -> std::string {
    try {
      fn();
    } catch (const ArgumentError& e) {
      return e.what();
    }
    return "";
  };
  std::vector<float> x(512, 1.f);
  EXPECT_EQ(message([&] { quantize_matrix(QuantType::IQ4_XS, x.data(), 4, 128, nullptr, "blk.0.attn_output.weight"); }),
            "blk.0.attn_output.weight: rows of 128 values are not a whole number of IQ4_XS blocks of 256");
  EXPECT_EQ(message([&] { quantize_matrix(QuantType::IQ4_NL, x.data(), 1, 48, nullptr, "w"); }),
            "w: rows of 48 values are not a whole number of IQ4_NL blocks of 32");
  x[300] = INFINITY;
  EXPECT_EQ(message([&] { quantize_matrix(QuantType::IQ4_XS, x.data(), 2, 256, nullptr, "w"); }),
            "w: value at row 1, column 44 is inf; only finite weights can be quantized");
  x[300] = NAN;
  EXPECT_EQ(message([&] { quantize_matrix(QuantType::IQ4_NL, x.data(), 16, 32, nullptr, "w"); }),
            "w: value at row 9, column 12 is nan; only finite weights can be quantized");
}

}  // namespace
}  // namespace attnzoo
