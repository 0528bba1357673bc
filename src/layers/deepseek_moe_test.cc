#include "layers/deepseek_moe.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "testing/random_gated_experts.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

using testing::HostTensor;

float logit(double p) { return float(std::log(p / (1.0 - p))); }

// Sigmoid scores: group 0 (experts 0-3) holds the best single expert, group 1 (4-7) the best pair.
const std::vector<double> kScores = {0.95, 0.1, 0.1, 0.1, 0.6, 0.6, 0.5, 0.2};

std::vector<float> score_logits() {
  std::vector<float> l;
  for (double p : kScores) l.push_back(logit(p));
  return l;
}

TEST(DeepseekRouting, KeepsTheBestGroupsByTheirTopTwo) {
  const auto logits = score_logits();
  MoeRouting r;
  DeepseekMoeConfig c{.top_k = 2, .n_group = 2, .topk_group = 1, .norm_topk_prob = false, .routed_scaling_factor = 2.f};
  route_grouped_top_k(logits.data(), nullptr, 1, 8, c, r);
  // Group 1 wins (0.6 + 0.6 > 0.95 + 0.1) although expert 0 scores best; equal scores go to the lower index.
  EXPECT_EQ(r.experts, (std::vector<int32_t>{4, 5}));
  EXPECT_NEAR(r.weights[0], 2 * 0.6, 1e-6);
  EXPECT_NEAR(r.weights[1], 2 * 0.6, 1e-6);
  c.topk_group = 2;  // no group masked: the global top 2
  route_grouped_top_k(logits.data(), nullptr, 1, 8, c, r);
  EXPECT_EQ(r.experts, (std::vector<int32_t>{0, 4}));
  EXPECT_NEAR(r.weights[0], 2 * 0.95, 1e-6);
}

TEST(DeepseekRouting, CorrectionBiasChoosesButDoesNotWeigh) {
  const auto logits = score_logits();
  std::vector<float> bias(8, 0.f);
  bias[6] = 0.2f;  // expert 6: choice score 0.7, weight still its sigmoid score 0.5
  MoeRouting r;
  DeepseekMoeConfig c{.top_k = 2, .n_group = 2, .topk_group = 1, .norm_topk_prob = true, .routed_scaling_factor = 2.5f};
  route_grouped_top_k(logits.data(), bias.data(), 1, 8, c, r);
  EXPECT_EQ(r.experts, (std::vector<int32_t>{6, 4}));
  EXPECT_NEAR(r.weights[0], 2.5 * 0.5 / 1.1, 1e-6);
  EXPECT_NEAR(r.weights[1], 2.5 * 0.6 / 1.1, 1e-6);
  // A bias on group 0's runner-up moves the group choice too (0.95 + 0.1 + 0.3 > 1.2).
  bias.assign(8, 0.f);
  bias[1] = 0.3f;
  route_grouped_top_k(logits.data(), bias.data(), 1, 8, c, r);
  EXPECT_EQ(r.experts, (std::vector<int32_t>{0, 1}));
  EXPECT_NEAR(r.weights[0] + r.weights[1], 2.5, 1e-5);
}

TEST(DeepseekRouting, V2SoftmaxKeepsGroupsByTheirBestExpert) {
  // Logits log(p): softmax gives p / 31. Group 0's best (9) beats group 1's (6), though group 1's top two do not.
  const std::vector<double> p = {9, 1, 1, 1, 6, 6, 5, 2};
  std::vector<float> logits;
  for (double v : p) logits.push_back(float(std::log(v)));
  MoeRouting r;
  DeepseekMoeConfig c{.scoring = DeepseekScoring::softmax, .group_score = DeepseekGroupScore::max, .top_k = 2,
                      .n_group = 2, .topk_group = 1, .norm_topk_prob = false, .routed_scaling_factor = 1.5f};
  route_grouped_top_k(logits.data(), nullptr, 1, 8, c, r);
  EXPECT_EQ(r.experts, (std::vector<int32_t>{0, 1}));
  EXPECT_NEAR(r.weights[0], 1.5 * 9 / 31, 1e-6);
  EXPECT_NEAR(r.weights[1], 1.5 * 1 / 31, 1e-6);
  c.group_score = DeepseekGroupScore::top2_sum;  // V3's rule on the same scores: group 1 (12 > 10)
  route_grouped_top_k(logits.data(), nullptr, 1, 8, c, r);
  EXPECT_EQ(r.experts, (std::vector<int32_t>{4, 5}));
  c = {.scoring = DeepseekScoring::softmax, .top_k = 2, .norm_topk_prob = true};  // greedy: one group, renormalized
  route_grouped_top_k(logits.data(), nullptr, 1, 8, c, r);
  EXPECT_EQ(r.experts, (std::vector<int32_t>{0, 4}));
  EXPECT_NEAR(r.weights[0], 9.0 / 15, 1e-6);
  EXPECT_NEAR(r.weights[1], 6.0 / 15, 1e-6);
}

TEST(DeepseekRouting, RejectsBadGroups) {
  const auto logits = score_logits();
  MoeRouting r;
  auto route = [&](DeepseekMoeConfig c) { route_grouped_top_k(logits.data(), nullptr, 1, 8, c, r); };
  EXPECT_THROW(route({.top_k = 2, .n_group = 3, .topk_group = 1}), ArgumentError);
  EXPECT_THROW(route({.top_k = 2, .n_group = 2, .topk_group = 3}), ArgumentError);
  EXPECT_THROW(route({.top_k = 5, .n_group = 2, .topk_group = 1}), ArgumentError);  // one group holds only 4
  EXPECT_THROW(route({.top_k = 0, .n_group = 2, .topk_group = 1}), ArgumentError);
}

struct MoeFixture : testing::RandomGatedExperts {
  HostTensor router{DType::f32, {E, H}, 1, 0.5f}, bias{DType::f32, {E}, 2, 0.1f};
  DeepseekMoeConfig c{.top_k = 3, .n_group = 4, .topk_group = 2, .norm_topk_prob = true, .routed_scaling_factor = 1.7f};

  MoeFixture() : RandomGatedExperts(/*hidden=*/24, /*width=*/12, /*experts=*/8, /*shared_width=*/20) {}
  DeepseekMoe build() const {
    return DeepseekMoe(c, Linear::from_weights(router.view, {}, "router"), bias.view, experts(), shared_expert(),
                       "moe");
  }
};

TEST(DeepseekMoe, MatchesTokenByTokenDefinition) {
  MoeFixture f;
  const DeepseekMoe moe = f.build();
  const int64_t T = 37;
  HostTensor x(DType::f32, {T, f.H}, 7);
  std::vector<float> got(size_t(T * f.H));
  moe.forward(x.view.ptr<float>(), T, got.data());
  MoeRouting routing;
  moe.route(x.view.ptr<float>(), T, routing);
  const GatedMlp shared = f.shared_expert();
  std::vector<int> used(size_t(f.E), 0);
  for (int64_t t = 0; t < T; ++t) {
    const float* xt = x.view.ptr<float>() + t * f.H;
    std::vector<double> want(size_t(f.H), 0.0);
    std::vector<float> y(size_t(f.H));
    shared.forward(xt, 1, y.data());
    for (int64_t i = 0; i < f.H; ++i) want[size_t(i)] += y[size_t(i)];
    for (int64_t j = 0; j < f.c.top_k; ++j) {
      const int32_t e = routing.experts[size_t(t * f.c.top_k + j)];
      used[size_t(e)] = 1;
      f.expert(e).forward(xt, 1, y.data());
      for (int64_t i = 0; i < f.H; ++i) want[size_t(i)] += double(routing.weights[size_t(t * f.c.top_k + j)]) * y[size_t(i)];
    }
    for (int64_t i = 0; i < f.H; ++i) ASSERT_NEAR(got[size_t(t * f.H + i)], want[size_t(i)], 1e-4) << t << " " << i;
  }
  int distinct = 0;
  for (int u : used) distinct += u;
  EXPECT_GE(distinct, 4);  // the tokens spread over experts: grouping by expert is exercised
  EXPECT_LT(moe.decode_weight_bytes(), moe.weight_bytes());
}

TEST(DeepseekMoe, RejectsWrongBiasShape) {
  MoeFixture f;
  HostTensor short_bias(DType::f32, {f.E - 1}, 3);
  try {
    DeepseekMoe(f.c, Linear::from_weights(f.router.view, {}, "router"), short_bias.view, f.experts(),
                std::nullopt, "layers.3.mlp");
    FAIL() << "expected ArgumentError";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("layers.3.mlp.gate.e_score_correction_bias"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attnzoo
