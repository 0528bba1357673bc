// The bf16 prefill GEMM over block rows, regrouped (decoded straight into pairs) or in GGUF order, and converted a
// chunk of rows at a time on AMX for short prompts, gives bit for bit the products of the same weights held as
// bf16 rows, which it reads in place as whole panels; the regrouped rows of every such format go straight to pairs,
// unless that route is turned off (linear_bf16_allow_straight_pairs), when they take the f32 one to the same bits.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/bf16_dot.h"
#include "core/dtype.h"
#include "core/error.h"
#include "kernels/quant/quant.h"
#include "kernels/quant/row_groups.h"
#include "layers/linear.h"
#include "layers/linear_bf16_pairs_route.h"
#include "testing/random_blocks.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

TEST(LinearBf16Regrouped, BlockRowsGiveTheProductsOfTheirBf16Values) {
  if (!bf16_dot_available()) GTEST_SKIP() << "no bf16 GEMM runs here";
  // K = 4096: 8 KiB of pairs a row, so on AMX the 96-row panel is converted in chunks of 32 rows (40 tokens are one
  // block of activations there); K = 512 in one chunk.
  for (QuantType t : {QuantType::Q4_0, QuantType::Q4_1, QuantType::Q8_0, QuantType::Q4_K, QuantType::Q5_K,
                      QuantType::Q6_K, QuantType::IQ4_NL, QuantType::IQ4_XS})
    for (int64_t K : {int64_t(512), int64_t(4096)}) {
      const int64_t N = 96, T = 40;
      std::vector<uint8_t> raw = testing::random_quant_rows(t, N, K, 17);
      testing::set_extreme_scales(t, raw);
      const QuantMatrix w = make_quant_matrix(raw.data(), raw.size(), t, N, K, "w");
      std::vector<uint8_t> regrouped(raw.size());
      const QuantMatrix g = to_row_groups(w, regrouped.data());
      AlignedBuffer<uint16_t> bf16(size_t(N * K));  // on a cache line: read in place, never staged
      std::vector<float> row(static_cast<size_t>(K));
      for (int64_t r = 0; r < N; ++r) {
        dequantize_row_reference(t, w.row(r), row.data(), K);
        for (int64_t k = 0; k < K; ++k) bf16.data()[r * K + k] = f32_to_bf16(row[size_t(k)]);
      }
      const QuantMatrix dense{bf16.data(), QuantType::BF16, N, K, K * 2};
      testing::HostTensor x(DType::f32, {T, K}, 4);
      std::vector<float> bias(static_cast<size_t>(N));
      for (int64_t n = 0; n < N; ++n) bias[size_t(n)] = 0.01f * float(n);
      std::vector<float> want(size_t(T * N)), gguf(want.size()), grouped(want.size());
      linear_gemm_bf16(dense, bias.data(), x.view.ptr<float>(), T, want.data(), N, 96);
      linear_gemm_bf16(w, bias.data(), x.view.ptr<float>(), T, gguf.data(), N, 96);
      const uint64_t straight = linear_bf16_gemm_counts().straight_pairs;
      linear_gemm_bf16(g, bias.data(), x.view.ptr<float>(), T, grouped.data(), N, 96);
      EXPECT_GT(linear_bf16_gemm_counts().straight_pairs, straight) << quant_type_name(t) << " regrouped, K " << K;
      EXPECT_EQ(0, std::memcmp(want.data(), gguf.data(), want.size() * sizeof(float)))
          << quant_type_name(t) << " GGUF rows, K " << K;
      EXPECT_EQ(0, std::memcmp(want.data(), grouped.data(), want.size() * sizeof(float)))
          << quant_type_name(t) << " regrouped rows, K " << K;
    }
}

// Turns the straight route off for a test's stretch and back on however the test ends.
struct F32RouteOnly {
  F32RouteOnly() { linear_bf16_allow_straight_pairs(false); }
  ~F32RouteOnly() { linear_bf16_allow_straight_pairs(true); }
};

TEST(LinearBf16Regrouped, TurnedOffTheStraightRouteTakesTheF32OneToTheSameBits) {
  if (!bf16_dot_available()) GTEST_SKIP() << "no bf16 GEMM runs here";
  ASSERT_TRUE(linear_bf16_straight_pairs_allowed()) << "on unless turned off";
  for (QuantType t : {QuantType::Q4_0, QuantType::Q4_1, QuantType::Q8_0, QuantType::Q4_K, QuantType::Q6_K,
                      QuantType::IQ4_NL, QuantType::IQ4_XS}) {
    const int64_t N = 64, K = 1024, T = 16, K2 = K / 2;
    const std::vector<uint8_t> raw = testing::random_quant_rows(t, N, K, 23);
    const QuantMatrix w = make_quant_matrix(raw.data(), raw.size(), t, N, K, "w");
    std::vector<uint8_t> regrouped(raw.size());
    const QuantMatrix g = to_row_groups(w, regrouped.data());
    testing::HostTensor x(DType::f32, {T, K}, 5);
    std::vector<float> straight(size_t(T * N)), f32_route(straight.size());
    std::vector<uint32_t> straight_pairs(size_t(N * K2)), f32_pairs(straight_pairs.size());
    uint64_t before = linear_bf16_gemm_counts().straight_pairs;
    linear_gemm_bf16(g, nullptr, x.view.ptr<float>(), T, straight.data(), N, 32);
    linear_bf16_weight_pairs(g, 0, N, straight_pairs.data(), size_t(K2));
    EXPECT_GT(linear_bf16_gemm_counts().straight_pairs, before + 1) << quant_type_name(t);
    {
      F32RouteOnly off;
      EXPECT_FALSE(linear_bf16_straight_pairs_allowed());
      before = linear_bf16_gemm_counts().straight_pairs;
      linear_gemm_bf16(g, nullptr, x.view.ptr<float>(), T, f32_route.data(), N, 32);
      linear_bf16_weight_pairs(g, 0, N, f32_pairs.data(), size_t(K2));
      EXPECT_EQ(linear_bf16_gemm_counts().straight_pairs, before) << quant_type_name(t) << " went straight when off";
    }
    EXPECT_TRUE(linear_bf16_straight_pairs_allowed());
    EXPECT_EQ(straight_pairs, f32_pairs) << quant_type_name(t) << " pairs";
    EXPECT_EQ(0, std::memcmp(straight.data(), f32_route.data(), straight.size() * sizeof(float)))
        << quant_type_name(t) << " products";
  }
}

TEST(LinearBf16Regrouped, WeightPairsRefuseRowsOutsideTheMatrix) {
  if (!bf16_dot_available()) GTEST_SKIP() << "no bf16 GEMM runs here";
  const std::vector<uint8_t> raw = testing::random_quant_rows(QuantType::Q4_0, 8, 64, 3);
  const QuantMatrix w = make_quant_matrix(raw.data(), raw.size(), QuantType::Q4_0, 8, 64, "w");
  std::vector<uint32_t> pairs(8 * 32);
  const auto message = [&](int64_t n0, int64_t nb, size_t stride) -> std::string {
    try {
      linear_bf16_weight_pairs(w, n0, nb, pairs.data(), stride);
    } catch (const ArgumentError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(message(4, 8, 32), "rows: [4, 12) is not within the matrix's 8 rows");
  EXPECT_EQ(message(0, 8, 31), "stride: shorter than a row's pairs");
  EXPECT_EQ(message(0, 8, 32), "no error");
}

}  // namespace
}  // namespace attnzoo
