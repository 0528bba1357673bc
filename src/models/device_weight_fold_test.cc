// Multipliers folded into a projection's device weights at load (models/cuda/device_weight_fold.h), on every
// machine: scaled in f32 before the one rounding to the device dtype, per row on top of the output multiplier, the
// input multiplier on the weights only, and refused where the weights stay GGUF blocks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/convert.h"
#include "core/dtype.h"
#include "core/error.h"
#include "kernels/quant/quant.h"
#include "models/cuda/device_weight_fold.h"
#include "models/cuda/device_weights.h"
#include "testing/random_blocks.h"

namespace attnzoo {
namespace {

TEST(WeightFold, ScalesInF32BeforeTheOneRounding) {
  // 1 + 3 * 2^-9 rounds to 1 + 2^-7 in bf16; times 1.5 it is 1.5087890625, whose bf16 is 1.5078125. Rounding
  // first would give 1.51171875, a tie that goes to 1.515625: one bf16 step off.
  const std::vector<float> w = {1.005859375f, -2.f, 0.25f, 3.f};
  const QuantMatrix m{w.data(), QuantType::F32, 2, 2, 8};
  const std::vector<uint16_t> got = device_folded_rows(m, {0.5f, 3.f, {1.f, -0.25f}}, "w");
  EXPECT_EQ(got[0], f32_to_bf16(1.5078125f));
  EXPECT_EQ(got[1], f32_to_bf16(-3.f));
  EXPECT_EQ(got[2], f32_to_bf16(-0.09375f));
  EXPECT_EQ(got[3], f32_to_bf16(-1.125f));
  EXPECT_EQ(device_folded_rows(m, {}, "w"), device_dense_rows(m)) << "the identity fold is the plain upload";
}

TEST(WeightFold, SixteenBitWeightsStayTheirDtype) {
  const std::vector<float> values = {0.1f, -7.5f, 1e-3f, 42.f, -0.3f, 2.f};
  for (QuantType t : {QuantType::BF16, QuantType::F16}) {
    const DType d = t == QuantType::F16 ? DType::f16 : DType::bf16;
    std::vector<uint16_t> stored(values.size());
    convert_from_f32(values.data(), stored.data(), d, values.size());
    const QuantMatrix m{stored.data(), t, 3, 2, 4};
    const WeightFold fold{2.f, 0.7f, {1.f, 3.f, 0.5f}};
    const std::vector<uint16_t> got = device_folded_rows(m, fold, "w");
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t c = 0; c < 2; ++c) {
        float widened = 0.f, want = 0.f;
        convert_to_f32(&stored[size_t(r * 2 + c)], d, &widened, 1);
        const float product = widened * (2.f * 0.7f * fold.rows[size_t(r)]);
        uint16_t rounded = 0;
        convert_from_f32(&product, &rounded, d, 1);
        convert_to_f32(&rounded, d, &want, 1);
        EXPECT_EQ(got[size_t(r * 2 + c)], rounded) << quant_type_name(t) << " " << r << ", " << c << ": " << want;
      }
  }
}

TEST(WeightFold, ExpandedGgufRowsFoldTheirDequantizedValues) {
  const int64_t rows = 3, cols = 64;
  const std::vector<uint8_t> raw = testing::random_quant_rows(QuantType::Q5_0, rows, cols, 5);
  const QuantMatrix m = make_quant_matrix(raw.data(), raw.size(), QuantType::Q5_0, rows, cols, "w");
  ASSERT_TRUE(foldable(QuantType::Q5_0));
  const std::vector<uint16_t> got = device_folded_rows(m, WeightFold::output(0.25f), "w");
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row_reference(QuantType::Q5_0, m.row(r), row.data(), cols);
    for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(got[size_t(r * cols + c)], f32_to_bf16(row[size_t(c)] * 0.25f));
  }
}

TEST(WeightFold, TheBiasTakesTheOutputMultipliersOnly) {
  const std::vector<float> bias = {1.f, -2.f, 4.f};
  EXPECT_EQ(folded_bias(bias, {10.f, 0.5f, {1.f, 2.f, 0.25f}}),
            (std::vector<float>{0.5f, -2.f, 0.5f}));
  EXPECT_EQ(folded_bias(bias, {}), bias);
}

TEST(WeightFold, RefusesBlocksKeptAsStoredAndRowsOfTheWrongCount) {
  EXPECT_FALSE(foldable(QuantType::Q8_0)) << "its blocks go up as stored";
  EXPECT_TRUE(foldable(QuantType::BF16));
  const std::vector<uint8_t> raw = testing::random_quant_rows(QuantType::Q8_0, 2, 32, 3);
  const QuantMatrix q8 = make_quant_matrix(raw.data(), raw.size(), QuantType::Q8_0, 2, 32, "w");
  try {
    device_folded_rows(q8, WeightFold::output(2.f), "model.lm_head");
    FAIL() << "Q8_0 blocks took a multiplier";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("model.lm_head"), std::string::npos) << e.what();
  }
  const std::vector<float> w(6, 1.f);
  const QuantMatrix m{w.data(), QuantType::F32, 2, 3, 12};
  EXPECT_THROW(device_folded_rows(m, {1.f, 1.f, {1.f, 2.f, 3.f}}, "w"), ArgumentError);
  EXPECT_TRUE((WeightFold{1.f, 1.f, {1.f, 1.f}}.identity()));
  EXPECT_FALSE(WeightFold::input(2.f).identity());
}

}  // namespace
}  // namespace attnzoo
