// Statistical tests: with fixed seeds, the sampled frequencies must match the exact distribution from the
// plain reference (penalties, temperature, top-k, top-p, min-p), by Pearson's chi-square, on every target.
#include <gtest/gtest.h>

#include <random>

#include "engine/chi_square.h"
#include "engine/sampler.h"
#include "engine/sampler_reference.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

TEST(ChiSquare, KnownQuantiles) {
  // Upper 5% points of the chi-square distribution (standard tables).
  EXPECT_NEAR(upper_incomplete_gamma_q(1 / 2.0, 3.841 / 2), 0.05, 1e-4);
  EXPECT_NEAR(upper_incomplete_gamma_q(10 / 2.0, 18.307 / 2), 0.05, 1e-4);
  EXPECT_NEAR(upper_incomplete_gamma_q(100 / 2.0, 124.342 / 2), 0.05, 1e-4);
  // A biased sampler must be caught: counts drawn from the wrong distribution fail the fit.
  std::vector<double> fair(10, 0.1);
  std::vector<int64_t> skewed = {1300, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 700};
  EXPECT_LT(chi_square_fit(skewed, fair).p_value, 1e-6);
}

struct Case {
  const char* name;
  SamplingParams params;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  auto add = [&](const char* name, float t, int64_t k, float p, float min_p, float rep, float pres, float freq) {
    SamplingParams s;
    s.temperature = t;
    s.top_k = k;
    s.top_p = p;
    s.min_p = min_p;
    s.repetition_penalty = rep;
    s.presence_penalty = pres;
    s.frequency_penalty = freq;
    s.seed = out.size() + 11;
    out.push_back({name, s});
  };
  add("softmax", 1.f, 0, 1.f, 0.f, 1.f, 0.f, 0.f);
  add("hot", 1.7f, 0, 1.f, 0.f, 1.f, 0.f, 0.f);
  add("cold", 0.6f, 0, 1.f, 0.f, 1.f, 0.f, 0.f);
  add("top_k", 1.f, 12, 1.f, 0.f, 1.f, 0.f, 0.f);
  add("top_p", 0.9f, 0, 0.7f, 0.f, 1.f, 0.f, 0.f);
  add("min_p", 1.f, 0, 1.f, 0.05f, 1.f, 0.f, 0.f);
  add("top_k+top_p+min_p", 1.2f, 20, 0.85f, 0.02f, 1.f, 0.f, 0.f);
  add("penalties", 1.f, 0, 1.f, 0.f, 1.3f, 0.4f, 0.3f);
  add("everything", 0.8f, 30, 0.9f, 0.01f, 1.2f, 0.2f, 0.1f);
  return out;
}

TEST(SamplerStatistics, FrequenciesMatchTheReferenceDistribution) {
  const size_t vocab = 96;
  std::mt19937_64 gen(2024);
  std::normal_distribution<float> dist(0.f, 1.5f);
  std::vector<float> logits(vocab);
  for (auto& v : logits) v = dist(gen);
  const std::vector<int32_t> context = {3, 3, 17, 40, 40, 40, 95, int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin())};
  const int draws = 20000;
  testing::for_each_target([&](Target) {
    for (const auto& c : cases()) {
      SCOPED_TRACE(c.name);
      const auto probs = sampling_distribution_reference(logits, context, c.params);
      Sampler s(c.params);
      std::vector<int64_t> counts(vocab, 0);
      for (int i = 0; i < draws; ++i) ++counts[size_t(s.sample(logits, context))];
      const ChiSquare fit = chi_square_fit(counts, probs);
      EXPECT_EQ(fit.draws_outside_support, 0);
      EXPECT_GT(fit.dof, 0);
      // Fixed seeds make this deterministic; 1e-4 leaves room for honest chance, none for a wrong distribution.
      EXPECT_GT(fit.p_value, 1e-4) << "chi2 " << fit.statistic << " dof " << fit.dof;
    }
  });
}

// The reference itself against hand-computed cases, so the statistical test is not comparing two copies of
// one mistake.
TEST(SamplerReference, HandComputedDistributions) {
  const std::vector<float> x = {std::log(4.f), std::log(2.f), std::log(1.f), std::log(1.f)};  // 0.5 .25 .125 .125
  SamplingParams p;
  auto probs = sampling_distribution_reference(x, {}, p);
  EXPECT_NEAR(probs[0], 0.5, 1e-6);
  EXPECT_NEAR(probs[3], 0.125, 1e-6);
  p.top_k = 2;
  probs = sampling_distribution_reference(x, {}, p);
  EXPECT_NEAR(probs[0], 2.0 / 3, 1e-6);
  EXPECT_EQ(probs[2], 0.0);
  p = {};
  p.top_p = 0.75f;  // 0.5 + 0.25 reaches 0.75 exactly: two tokens
  probs = sampling_distribution_reference(x, {}, p);
  EXPECT_NEAR(probs[1], 1.0 / 3, 1e-6);
  EXPECT_EQ(probs[2], 0.0);
  p = {};
  p.min_p = 0.3f;  // keeps probability >= 0.15
  probs = sampling_distribution_reference(x, {}, p);
  EXPECT_NEAR(probs[0], 2.0 / 3, 1e-6);
  EXPECT_EQ(probs[3], 0.0);
  p = {};
  p.temperature = 0.5f;  // squares the odds: 16 : 4 : 1 : 1
  probs = sampling_distribution_reference(x, {}, p);
  EXPECT_NEAR(probs[0], 16.0 / 22, 1e-6);
}

}  // namespace
}  // namespace attnzoo
