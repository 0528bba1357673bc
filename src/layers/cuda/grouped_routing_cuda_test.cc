// DeepSeek's grouped routing on CUDA against route_grouped_top_k (deepseek_moe.h): expert ids exactly, weights to
// the last f32 bit or two; DeepSeek-V3's, V2's and GLM-4.5's configurations, strided bf16 logits, no bias, and
// logits on a coarse grid so that ties (to the lower group and expert index) decide many slots. Refusals are
// host-only and run without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "layers/cuda/routing_cuda.h"
#include "layers/cuda/step_test_util.h"
#include "layers/deepseek_moe.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

using testing::DeviceOperand;
using testing::expect_error;
using testing::fake_cuda_view;

DeepseekMoeConfig v3_config() {
  DeepseekMoeConfig c;
  c.top_k = 8;
  c.n_group = 8;
  c.topk_group = 4;
  c.routed_scaling_factor = 2.5f;
  return c;
}

TEST(RouteGroupedTopKCuda, RefusesNamingTheArgument) {
  const TensorView logits = fake_cuda_view(DType::bf16, {5, 256}), bias = fake_cuda_view(DType::f32, {256});
  const TensorView ids = fake_cuda_view(DType::i32, {5, 8}), w = fake_cuda_view(DType::f32, {5, 8});
  const GroupedRouteCudaOptions v3 = grouped_route_options(v3_config());
  EXPECT_EQ(v3.n_group, 8);
  EXPECT_FALSE(v3.softmax);
  EXPECT_EQ(v3.routed_scaling_factor, 2.5f);
  EXPECT_NO_THROW(check_route_grouped_top_k_cuda(logits, bias, ids, w, v3));
  EXPECT_NO_THROW(check_route_grouped_top_k_cuda(logits, {}, ids, w, v3));

  TensorView host = logits;
  host.device = Device::cpu();
  expect_error<ArgumentError>([&] { route_grouped_top_k_cuda(host, bias, ids, w, v3); }, "logits: lives on cpu");
  GroupedRouteCudaOptions bad = v3;
  bad.n_group = 7;
  expect_error<ArgumentError>([&] { check_route_grouped_top_k_cuda(logits, bias, ids, w, bad); },
                              "n_group: must divide n_routed_experts (256), got 7");
  bad = v3;
  bad.topk_group = 9;
  expect_error<ArgumentError>([&] { check_route_grouped_top_k_cuda(logits, bias, ids, w, bad); }, "topk_group: must be in [1, n_group = 8]");
  bad = v3;
  bad.topk_group = 1;
  bad.top_k = 33;
  expect_error<ArgumentError>([&] { check_route_grouped_top_k_cuda(logits, bias, ids, w, bad); },
                              "num_experts_per_tok: exceeds the experts of the topk_group kept groups");
  bad = v3;
  bad.n_group = 64;
  bad.topk_group = 8;
  expect_error<ArgumentError>([&] { check_route_grouped_top_k_cuda(logits, bias, ids, w, bad); },
                              "n_group: CUDA grouped routing keeps at most 32 groups");
  bad = v3;
  bad.topk_group = 8;
  bad.top_k = 40;
  expect_error<ArgumentError>(
      [&] {
        check_route_grouped_top_k_cuda(logits, bias, fake_cuda_view(DType::i32, {5, 40}), fake_cuda_view(DType::f32, {5, 40}), bad);
      },
      "num_experts_per_tok: CUDA routing chooses at most 32");
  bad = v3;
  bad.routed_scaling_factor = INFINITY;
  expect_error<ArgumentError>([&] { check_route_grouped_top_k_cuda(logits, bias, ids, w, bad); }, "routed_scaling_factor: must be finite");
  expect_error<DTypeError>(
      [&] { check_route_grouped_top_k_cuda(logits, fake_cuda_view(DType::bf16, {256}), ids, w, v3); },
      "correction_bias: must be float32");
  expect_error<ArgumentError>(
      [&] { check_route_grouped_top_k_cuda(logits, fake_cuda_view(DType::f32, {128}), ids, w, v3); },
      "correction_bias: expected a contiguous [256]");
  TensorView host_bias = bias;
  host_bias.device = Device::cpu();
  expect_error<ArgumentError>([&] { check_route_grouped_top_k_cuda(logits, host_bias, ids, w, v3); }, "correction_bias: lives on cpu");
  expect_error<ArgumentError>(
      [&] { check_route_grouped_top_k_cuda(fake_cuda_view(DType::f32, {5, 2048}), {}, ids, w, v3); },
      "logits: CUDA routing takes 1 to 1024 experts");
  expect_error<DTypeError>([&] { check_route_grouped_top_k_cuda(logits, bias, fake_cuda_view(DType::i64, {5, 8}), w, v3); },
                           "experts: must be int32");
  expect_error<ArgumentError>([&] { check_route_grouped_top_k_cuda(logits, bias, ids, fake_cuda_view(DType::f32, {5, 6}), v3); },
                              "weights: expected a contiguous [5, 8]");
}

#if ATTNZOO_WITH_CUDA

class RouteGroupedTopKCudaGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU: " << cuda_unavailable_reason();
  }
};

void check_grouped(int64_t T, int64_t E, const DeepseekMoeConfig& cfg, DType dtype, bool with_bias, bool ties,
                   int64_t pad) {
  SCOPED_TRACE("E " + std::to_string(E) + " top_k " + std::to_string(cfg.top_k) + " groups " +
               std::to_string(cfg.topk_group) + "/" + std::to_string(cfg.n_group) + " " + dtype_name(dtype) +
               (with_bias ? " bias" : "") + (ties ? " ties" : ""));
  DeviceOperand logits(dtype, {T, E}, 5, {E + pad, 1}, 2.f);
  if (ties) {
    logits.for_each([&](int64_t o) { logits.set(o, std::round(logits.at(o) * 2.f) / 4.f); });
    for (int64_t e = 0; e < E; ++e) logits.set(e, 0.25f);  // token 0: every expert and group equal
    logits.upload();
  }
  DeviceOperand bias(DType::f32, {E}, 6, {}, 0.05f);
  if (ties) {
    bias.for_each([&](int64_t o) { bias.set(o, std::round(bias.at(o) * 40.f) / 40.f); });
    bias.upload();
  }
  DeviceOperand ids(DType::i32, {T, cfg.top_k}, 0), weights(DType::f32, {T, cfg.top_k}, 0);
  route_grouped_top_k_cuda(logits.device_view(), with_bias ? bias.device_view() : TensorView{}, ids.device_view(),
                           weights.device_view(), grouped_route_options(cfg));
  ids.download();
  weights.download();
  synchronize(current_stream());

  std::vector<float> dense(size_t(T * E));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t e = 0; e < E; ++e) dense[size_t(t * E + e)] = logits.at(t * (E + pad) + e);
  MoeRouting want;
  route_grouped_top_k(dense.data(), with_bias ? bias.view.ptr<float>() : nullptr, T, E, cfg, want);
  for (int64_t i = 0; i < T * cfg.top_k; ++i) {
    ASSERT_EQ(ids.view.ptr<int32_t>()[i], want.experts[size_t(i)]) << "token " << i / cfg.top_k << " slot " << i % cfg.top_k;
    ASSERT_NEAR(weights.view.ptr<float>()[i], want.weights[size_t(i)], 4e-7 * std::fabs(want.weights[size_t(i)]) + 1e-12)
        << "token " << i / cfg.top_k << " slot " << i % cfg.top_k;
  }
}

TEST_F(RouteGroupedTopKCudaGpu, MatchesTheCpuRouting) {
  DeepseekMoeConfig v2 = v3_config();
  v2.scoring = DeepseekScoring::softmax;
  v2.group_score = DeepseekGroupScore::max;
  v2.top_k = 6;
  v2.topk_group = 3;
  v2.norm_topk_prob = false;
  v2.routed_scaling_factor = 16.f;
  DeepseekMoeConfig glm = v3_config();
  glm.n_group = glm.topk_group = 1;
  for (bool ties : {false, true}) {
    check_grouped(1, 256, v3_config(), DType::bf16, true, ties, 0);    // DeepSeek-V3, decode
    check_grouped(300, 256, v3_config(), DType::f32, true, ties, 3);   // a prefill chunk, strided
    check_grouped(77, 160, v2, DType::bf16, false, ties, 0);           // DeepSeek-V2
    check_grouped(40, 128, glm, DType::f16, true, ties, 1);            // GLM-4.5's single group
  }
}

#endif  // ATTNZOO_WITH_CUDA

}  // namespace
}  // namespace attnzoo
