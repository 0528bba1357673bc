// DeepSeek's grouped routing on CUDA (layers/cuda/grouped_routing_kernel.cuh) under the CTA emulator against its
// CPU twin, route_grouped_top_k (deepseek_moe.h): expert ids exactly, weights within the GPU test's few f32 ulp.
// DeepSeek-V3's shape (256 experts, 8 groups, 4 kept, top 8, sigmoid + bias, scaled), V2's softmax with max-scored
// groups, GLM-4.5's single group, LFM2's epsilon, groups of one expert, 32 groups of 32, odd sizes, and ties: logits
// on a coarse grid, rows of equal logits (equal groups, decided by the lower group index), no bias. The grid is
// capped at two blocks so that the token loop takes several rounds; spare output bytes must stay 0xFF.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "layers/cuda/grouped_routing_kernel.cuh"
#include "layers/deepseek_moe.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/strided_operand.h"

namespace attnzoo {
namespace {
using namespace cuda_step;
using cuda_emulation::DeviceMemory;
using cuda_emulation::StridedOperand;

template <class T>
void launch_grouped(const GroupedRouteParams<T>& p) {
  const unsigned grid = std::min(grid_for(p.tokens, kWarpsPerBlock), 2u);
  cuda_emulation::launch(dim3(grid), kRouteThreads, 0, [&](unsigned char*) {
    if (p.experts_per_token <= 128) route_grouped_tokens<T, 4>(p);
    else if (p.experts_per_token <= 256) route_grouped_tokens<T, 8>(p);
    else route_grouped_tokens<T, 32>(p);
  });
}

enum class Ties { none, grid, equal_rows };

struct GroupedCase {
  int64_t T, E;
  DeepseekMoeConfig config;
  DType dtype = DType::f32;
  bool bias = true;
  Ties ties = Ties::none;
  int64_t row_pad = 0;
};

DeepseekMoeConfig config_of(int64_t top_k, int64_t n_group, int64_t topk_group, bool softmax = false,
                            bool group_max = false, bool norm = true, float scaling = 1.f, double eps = 1e-20) {
  DeepseekMoeConfig c;
  c.scoring = softmax ? DeepseekScoring::softmax : DeepseekScoring::sigmoid;
  c.group_score = group_max ? DeepseekGroupScore::max : DeepseekGroupScore::top2_sum;
  c.top_k = top_k;
  c.n_group = n_group;
  c.topk_group = topk_group;
  c.norm_topk_prob = norm;
  c.routed_scaling_factor = scaling;
  c.norm_epsilon = eps;
  return c;
}

void check_grouped(const GroupedCase& c) {
  const DeepseekMoeConfig& cfg = c.config;
  SCOPED_TRACE("T " + std::to_string(c.T) + " E " + std::to_string(c.E) + " top_k " + std::to_string(cfg.top_k) +
               " groups " + std::to_string(cfg.topk_group) + "/" + std::to_string(cfg.n_group) +
               (cfg.scoring == DeepseekScoring::softmax ? " softmax" : " sigmoid") +
               (cfg.group_score == DeepseekGroupScore::max ? " group max" : "") + " " + dtype_name(c.dtype) +
               (c.bias ? " bias" : "") + " ties " + std::to_string(int(c.ties)) + " pad " + std::to_string(c.row_pad));
  const int64_t stride = c.E + c.row_pad;
  StridedOperand logits(c.dtype, {c.T, c.E}, 9 + uint64_t(c.E), {stride, 1}, 2.f);
  if (c.ties == Ties::grid)
    logits.for_each([&](int64_t o) { logits.set(o, std::round(logits.at(o) * 2.f) / 4.f); });
  if (c.ties == Ties::equal_rows)
    for (int64_t t = 0; t < c.T; t += 2)
      for (int64_t e = 0; e < c.E; ++e) logits.set(t * stride + e, 0.25f);
  logits.upload();
  std::vector<float> bias(size_t(c.E));
  std::mt19937_64 rng(c.E);
  std::normal_distribution<float> dist(0.f, 0.05f);
  for (auto& b : bias) b = c.ties == Ties::none ? dist(rng) : std::round(dist(rng) * 40.f) / 40.f;
  DeviceMemory dev_bias(bias.size() * 4);
  std::memcpy(dev_bias.data(), bias.data(), bias.size() * 4);

  const size_t n = size_t(c.T * cfg.top_k);
  DeviceMemory ids((n + 4) * sizeof(int32_t)), weights((n + 4) * sizeof(float));
  std::memset(ids.data(), 0xff, ids.size());
  std::memset(weights.data(), 0xff, weights.size());
  with_float_type(c.dtype, [&](auto tag) {
    using T = decltype(tag);
    const GroupedRouteParams<T> p{logits.device_ptr<const T>(),
                                  stride,
                                  c.bias ? reinterpret_cast<const float*>(dev_bias.data()) : nullptr,
                                  reinterpret_cast<int32_t*>(ids.data()),
                                  reinterpret_cast<float*>(weights.data()),
                                  c.T,
                                  int(c.E),
                                  int(cfg.top_k),
                                  int(cfg.n_group),
                                  int(cfg.topk_group),
                                  cfg.scoring == DeepseekScoring::softmax,
                                  cfg.group_score == DeepseekGroupScore::max,
                                  cfg.norm_topk_prob,
                                  cfg.routed_scaling_factor,
                                  cfg.norm_epsilon};
    launch_grouped(p);
  });

  std::vector<float> dense(size_t(c.T * c.E));
  for (int64_t t = 0; t < c.T; ++t)
    for (int64_t e = 0; e < c.E; ++e) dense[size_t(t * c.E + e)] = logits.at(t * stride + e);
  MoeRouting want;
  route_grouped_top_k(dense.data(), c.bias ? bias.data() : nullptr, c.T, c.E, cfg, want);
  const auto* got_ids = reinterpret_cast<const int32_t*>(ids.data());
  const auto* got_w = reinterpret_cast<const float*>(weights.data());
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(got_ids[i], want.experts[i]) << "token " << i / size_t(cfg.top_k) << " slot " << i % size_t(cfg.top_k);
    ASSERT_NEAR(got_w[i], want.weights[i], 4e-7 * std::fabs(want.weights[i]) + 1e-12)
        << "token " << i / size_t(cfg.top_k) << " slot " << i % size_t(cfg.top_k);
  }
  for (size_t b = n * 4; b < ids.size(); ++b) ASSERT_EQ(ids.data()[b], 0xff) << "byte " << b << " after the ids";
  for (size_t b = n * 4; b < weights.size(); ++b) ASSERT_EQ(weights.data()[b], 0xff) << "byte " << b << " after the weights";
}

TEST(EmulatedGroupedRouting, MatchesTheCpuRouting) {
  for (Ties ties : {Ties::none, Ties::grid, Ties::equal_rows}) {
    check_grouped({21, 256, config_of(8, 8, 4, false, false, true, 2.5f), DType::bf16, true, ties});  // DeepSeek-V3
    check_grouped({13, 256, config_of(8, 8, 4, false, false, true, 2.5f), DType::f32, true, ties, 3});
    check_grouped({17, 160, config_of(6, 8, 3, true, true, false, 16.f), DType::f32, false, ties});   // V2
    check_grouped({9, 64, config_of(6, 1, 1, true, false, false), DType::f16, false, ties, 1});       // V2-Lite
    check_grouped({19, 128, config_of(8, 1, 1, false, false, true, 2.5f), DType::bf16, true, ties});  // GLM-4.5
    check_grouped({11, 32, config_of(4, 1, 1, false, false, true, 1.f, 1e-6), DType::f32, true, ties});  // LFM2
    check_grouped({15, 24, config_of(5, 24, 7), DType::f32, true, ties});                             // 1 per group
    check_grouped({7, 45, config_of(5, 5, 2, false, false, true, 1.5f), DType::f32, true, ties, 2});   // odd groups
    check_grouped({5, 1024, config_of(32, 32, 4, false, false, true, 2.f), DType::f32, true, ties});   // 32 x 32
    check_grouped({6, 1000, config_of(8, 20, 3, true, true), DType::bf16, true, ties});
  }
}

// Every top_k from 1 to 8 and every topk_group of DeepSeek-V3's 8 groups.
TEST(EmulatedGroupedRouting, MatchesEveryTopKAndKeptGroups) {
  for (int64_t g = 1; g <= 8; ++g)
    for (int64_t k = 1; k <= 8; ++k)
      check_grouped({5, 256, config_of(k, 8, g, false, false, true, 2.5f), DType::f32, true, Ties::grid});
}

}  // namespace
}  // namespace attnzoo
