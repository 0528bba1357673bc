// The quantizers against definitions written here: f16 / bf16 rounding (round to nearest, ties to even, checked
// on every half), and each format's round trip through the reference dequantizer within one step of its block.
// Byte-for-byte agreement with gguf-py is python/tests/test_quantize.py's job.
#include "kernels/quant/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "core/convert.h"
#include "core/error.h"
#include "kernels/quant/quant.h"
#include "kernels/quant/quant_blocks.h"

namespace attnzoo {
namespace {

float bits_to_f32(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

TEST(Quantize, HalfRoundsToNearestEvenOnEveryHalf) {
  for (uint32_t h = 0; h < 0x7C00; ++h) {  // every finite non-negative half
    const float v = half_to_f32(uint16_t(h));
    ASSERT_EQ(f32_to_half(v), h) << h;
    ASSERT_EQ(f32_to_half(-v), h | 0x8000) << h;
    if (h + 1 == 0x7C00) break;
    const double next = half_to_f32(uint16_t(h + 1));
    const float mid = float((double(v) + next) / 2);  // exact in f32
    ASSERT_EQ(f32_to_half(mid), (h & 1) ? h + 1 : h) << "tie above " << h;
    ASSERT_EQ(f32_to_half(std::nextafter(mid, 1e9f)), h + 1) << h;
    ASSERT_EQ(f32_to_half(std::nextafter(mid, 0.f)), h) << h;
  }
  EXPECT_EQ(f32_to_half(65519.99f), 0x7BFF);
  EXPECT_EQ(f32_to_half(65520.f), 0x7C00);  // the tie above the largest half rounds to infinity
  EXPECT_EQ(f32_to_half(1e-8f), 0);
  EXPECT_EQ(f32_to_half(bits_to_f32(0x33000001)), 1);  // just above half the smallest subnormal
  EXPECT_EQ(f32_to_half(INFINITY), 0x7C00);
  EXPECT_EQ(f32_to_half(NAN) & 0x7C00, 0x7C00);
}

TEST(Quantize, Bf16MatchesTheVectorisedConversion) {
  std::mt19937 rng(5);
  std::vector<float> x(4096);
  for (float& v : x) v = bits_to_f32(uint32_t(rng()) & 0x7F7FFFFFu | (rng() & 1 ? 0x80000000u : 0u));
  std::vector<uint16_t> want(x.size());
  convert_from_f32(x.data(), want.data(), DType::bf16, x.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(f32_to_bf16(x[i]), want[i]) << x[i];
}

// Levels per format: the largest error of a round trip is one step of 2 * max|x| / levels over its (super-)block.
struct Case {
  QuantType type;
  int levels;
};
constexpr Case kCases[] = {{QuantType::Q8_0, 255}, {QuantType::Q4_0, 15}, {QuantType::Q4_1, 15},
                           {QuantType::Q5_0, 31},  {QuantType::Q5_1, 31}, {QuantType::Q2_K, 3},
                           {QuantType::Q3_K, 7},   {QuantType::Q4_K, 15}, {QuantType::Q5_K, 31},
                           {QuantType::Q6_K, 63}};

TEST(Quantize, RoundTripStaysWithinOneStepOfItsBlock) {
  std::mt19937 rng(9);
  std::student_t_distribution<float> heavy(3.f);
  const int64_t rows = 8, cols = 512;
  std::vector<float> x(size_t(rows * cols));
  for (float& v : x) v = heavy(rng);
  for (int64_t c = 0; c < 256; ++c) x[size_t(c)] = 0;  // an all-zero super-block
  for (const Case& k : kCases) {
    const std::vector<uint8_t> q = quantize_matrix(k.type, x.data(), rows, cols, nullptr, "w");
    ASSERT_EQ(q.size(), size_t(rows * *quant_row_bytes(k.type, cols)));
    const int64_t block = quant_type_info(uint32_t(k.type))->block_elems;
    std::vector<float> back(x.size());
    for (int64_t r = 0; r < rows; ++r)
      dequantize_row_reference(k.type, q.data() + r * *quant_row_bytes(k.type, cols), back.data() + r * cols, cols);
    double sq = 0, sq_x = 0;
    for (size_t b = 0; b < x.size(); b += size_t(block)) {
      float amax = 0;
      for (int64_t i = 0; i < block; ++i) amax = std::max(amax, std::fabs(x[b + size_t(i)]));
      for (int64_t i = 0; i < block; ++i) {
        const float err = std::fabs(back[b + size_t(i)] - x[b + size_t(i)]);
        ASSERT_LE(err, 2 * amax / float(k.levels) * 1.01f) << quant_type_name(k.type) << " at " << b + size_t(i);
        sq += double(err) * err;
        sq_x += double(x[b + size_t(i)]) * x[b + size_t(i)];
      }
    }
    // And on average far better than that worst case: RMS error under a third of a step of the RMS value.
    EXPECT_LT(std::sqrt(sq / sq_x), 2.0 / k.levels * 3) << quant_type_name(k.type);
    for (int64_t c = 0; c < 256; ++c) EXPECT_EQ(back[size_t(c)], 0.f) << quant_type_name(k.type);
  }
}

TEST(Quantize, RefusalsNameTheTensor) {
  auto message = [](const std::function<void()>& fn) -> std::string {
    try {
      fn();
    } catch (const ArgumentError& e) {
      return e.what();
    }
    return "";
  };
  std::vector<float> x(64, 1.f);
  x[40] = NAN;
  EXPECT_EQ(message([&] { quantize_matrix(QuantType::Q8_0, x.data(), 2, 32, nullptr, "blk.0.ffn_up.weight"); }),
            "blk.0.ffn_up.weight: value at row 1, column 8 is nan; only finite weights can be quantized");
  x[40] = 1.f;
  EXPECT_NE(message([&] { quantize_matrix(QuantType::Q4_K, x.data(), 1, 64, nullptr, "w"); })
                .find("w: rows of 64 values are not a whole number of Q4_K blocks of 256"),
            std::string::npos);
  EXPECT_NE(message([&] { quantize_matrix(QuantType::IQ2_XXS, x.data(), 1, 64, nullptr, "w"); })
                .find("cannot quantize to IQ2_XXS"),
            std::string::npos);
  std::vector<float> imp(32, 1.f);
  imp[3] = -1;
  EXPECT_NE(message([&] { quantize_matrix(QuantType::Q4_0, x.data(), 2, 32, imp.data(), "w"); })
                .find("w: importance: input channel 3 is -1"),
            std::string::npos);
}

}  // namespace
}  // namespace attnzoo
