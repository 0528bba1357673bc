// gpt-oss's expert kernels on a GPU (gpt_oss_moe_cuda.h) against their CPU twins: the grouped bias exactly against
// the host's sums over ragged offsets with idle experts and a row stride past the width, the router's form without
// offsets, and the clamped SwiGLU against gpt_oss_clamped_swiglu in place in the gate half of [n, 2I] rows. The
// whole routed half is testing/cuda_emulation/gpt_oss_moe_cases.cc's and the runner's (decoder_cuda_runner_test.cc).
// Refusals are host-only and run without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <tuple>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "layers/cuda/gpt_oss_moe_cuda.h"
#include "layers/cuda/step_test_util.h"
#include "layers/gpt_oss_moe.h"
#include "testing/device_test_util.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

using testing::DeviceOperand;
using testing::expect_error;
using testing::fake_cuda_view;

TEST(GptOssMoeCuda, RefusesNamingTheArgument) {
  const TensorView y = fake_cuda_view(DType::f32, {10, 16}), offsets = fake_cuda_view(DType::i32, {5});
  EXPECT_NO_THROW(check_grouped_bias_cuda(y, fake_cuda_view(DType::f32, {4, 16}), &offsets));
  EXPECT_NO_THROW(check_grouped_bias_cuda(y, fake_cuda_view(DType::f32, {1, 16}), nullptr));
  expect_error<ArgumentError>([&] { check_grouped_bias_cuda(y, fake_cuda_view(DType::f32, {2, 16}), nullptr); },
                              "bias: without offsets takes one row");
  expect_error<ArgumentError>([&] { check_grouped_bias_cuda(y, fake_cuda_view(DType::f32, {4, 8}), &offsets); },
                              "bias: has 8 columns, y 16");
  expect_error<ArgumentError>([&] { check_grouped_bias_cuda(y, fake_cuda_view(DType::f32, {3, 16}), &offsets); },
                              "offsets: expected a contiguous [4]");
  const TensorView wide = fake_cuda_view(DType::i32, {1026});
  expect_error<ArgumentError>([&] { check_grouped_bias_cuda(y, fake_cuda_view(DType::f32, {1025, 16}), &wide); },
                              "bias: expected 1 to 1024 experts' rows");
  const TensorView i64 = fake_cuda_view(DType::i64, {5});
  expect_error<DTypeError>([&] { check_grouped_bias_cuda(y, fake_cuda_view(DType::f32, {4, 16}), &i64); },
                           "offsets: dtype int64");
  expect_error<DTypeError>(
      [&] { check_grouped_bias_cuda(fake_cuda_view(DType::bf16, {10, 16}), fake_cuda_view(DType::f32, {4, 16}), &offsets); },
      "y: expected float32");

  const TensorView g = fake_cuda_view(DType::f32, {10, 16});
  EXPECT_NO_THROW(check_gpt_oss_swiglu_cuda(g, g, 1.702f, 7.f, g));
  expect_error<ArgumentError>([&] { check_gpt_oss_swiglu_cuda(g, fake_cuda_view(DType::f32, {10, 8}), 1.f, 7.f, g); },
                              "up: shape [10, 8] differs from gate's");
  expect_error<ArgumentError>([&] { check_gpt_oss_swiglu_cuda(g, g, 1.f, -1.f, g); }, "limit: must be finite and positive");
  expect_error<ArgumentError>([&] { check_gpt_oss_swiglu_cuda(g, g, NAN, 7.f, g); }, "alpha: must be finite");
  TensorView host = g;
  host.device = Device::cpu();
  expect_error<ArgumentError>([&] { check_gpt_oss_swiglu_cuda(g, g, 1.f, 7.f, host); }, "out: lives on cpu");
}

TEST(GptOssMoeCuda, GroupedBiasAddsEachRowsExpertsBias) {
  REQUIRE_GPU();
  const std::vector<int32_t> loads = {0, 5, 0, 0, 130, 1, 0, 64, 0};  // idle experts first, between and last
  const int64_t E = int64_t(loads.size()), N = 72, ld = N + 8;
  std::vector<int32_t> offsets(1, 0);
  for (int32_t l : loads) offsets.push_back(offsets.back() + l);
  const int64_t n = offsets.back();
  DeviceOperand y(DType::f32, {n, N}, 1, {ld, 1}), bias(DType::f32, {E, N}, 2), off(DType::i32, {E + 1}, 3);
  for (int64_t e = 0; e <= E; ++e) reinterpret_cast<int32_t*>(off.host.data())[e] = offsets[size_t(e)];
  off.upload();
  const std::vector<uint8_t> before = y.host;
  auto was = [&](int64_t at) { return load_as_f32(before.data(), DType::f32, at); };
  const TensorView ov = off.device_view();
  grouped_bias_cuda(y.device_view(), bias.device_view(), &ov);
  synchronize(current_stream());
  y.download();
  for (int64_t e = 0; e < E; ++e)
    for (int64_t r = offsets[size_t(e)]; r < offsets[size_t(e) + 1]; ++r)
      for (int64_t c = 0; c < N; ++c)
        ASSERT_EQ(y.at(r * ld + c), was(r * ld + c) + bias.at(e * N + c)) << "expert " << e << " row " << r;
  EXPECT_TRUE(y.outside_untouched());

  // The router's bias: every row, no offsets.
  DeviceOperand logits(DType::f32, {7, 32}, 4), rb(DType::f32, {1, 32}, 5);
  const std::vector<uint8_t> logits0 = logits.host;
  grouped_bias_cuda(logits.device_view(), rb.device_view(), nullptr);
  synchronize(current_stream());
  logits.download();
  for (int64_t q = 0; q < 7 * 32; ++q) ASSERT_EQ(logits.at(q), load_as_f32(logits0.data(), DType::f32, q) + rb.at(q % 32)) << q;
}

TEST(GptOssMoeCuda, ClampedSwigluMatchesTheCpu) {
  REQUIRE_GPU();
  for (auto [n, I, limit] : {std::tuple<int64_t, int64_t, float>{1, 64, 7.f}, {300, 96, 7.f}, {33, 40, 0.3f}}) {
    SCOPED_TRACE("n " + std::to_string(n) + " I " + std::to_string(I));
    DeviceOperand gu(DType::f32, {n, 2 * I}, uint64_t(n), {}, 6.f);  // well past the limit on both sides
    const std::vector<uint8_t> before = gu.host;
    TensorView gate = gu.device_view(), up = gate;
    gate.shape[1] = up.shape[1] = I;
    up.data = static_cast<float*>(up.data) + I;
    gpt_oss_swiglu_cuda(gate, up, 1.702f, limit, gate);
    synchronize(current_stream());
    gu.download();
    std::vector<float> want(static_cast<size_t>(I));
    for (int64_t r = 0; r < n; ++r) {
      const float* row = reinterpret_cast<const float*>(before.data()) + r * 2 * I;
      gpt_oss_clamped_swiglu(row, row + I, 1.702f, limit, want.data(), I);
      for (int64_t i = 0; i < I; ++i) {
        // expf on the device is within 2 ulp of the host's.
        ASSERT_NEAR(gu.at(r * 2 * I + i), want[size_t(i)], 1e-6f * std::abs(want[size_t(i)]) + 1e-30f)
            << "row " << r << " feature " << i;
        ASSERT_EQ(gu.at(r * 2 * I + I + i), row[I + i]) << "up written at row " << r;
      }
    }
  }
}

}  // namespace
}  // namespace attnzoo
