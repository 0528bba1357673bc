// Sampler unit tests: each filter's support, the penalties' exact arithmetic, greedy, errors, reproducibility.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>
#include <set>

#include "core/error.h"
#include "engine/sampler_reference.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

std::vector<float> random_logits(size_t vocab, uint64_t seed, float stddev = 2.f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.f, stddev);
  std::vector<float> x(vocab);
  for (auto& v : x) v = dist(rng);
  return x;
}

std::vector<int32_t> draws(Sampler& s, const std::vector<float>& logits, int n, std::span<const int32_t> ctx = {}) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(s.sample(logits, ctx));
  return out;
}

// The ids n draws of a fresh Sampler(p) reach: the filters' support, once n is large.
std::set<int32_t> drawn_ids(const SamplingParams& p, const std::vector<float>& logits, int n) {
  Sampler s(p);
  std::set<int32_t> seen;
  for (int32_t id : draws(s, logits, n)) seen.insert(id);
  return seen;
}

double entropy_of_draws(const std::vector<int32_t>& ids, size_t vocab) {
  std::vector<double> c(vocab, 0);
  for (auto id : ids) c[size_t(id)] += 1;
  double h = 0;
  for (double v : c)
    if (v > 0) h -= v / double(ids.size()) * std::log(v / double(ids.size()));
  return h;
}

TEST(SamplingParams, ValidationNamesTheField) {
  auto fails_on = [](SamplingParams p, const char* field) {
    try {
      p.validate();
      ADD_FAILURE() << "no error for " << field;
    } catch (const ArgumentError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(field, 0), 0u) << e.what();
    }
  };
  SamplingParams p;
  p.temperature = -1;
  fails_on(p, "temperature");
  p = {}; p.temperature = NAN;
  fails_on(p, "temperature");
  p = {}; p.top_k = -2;
  fails_on(p, "top_k");
  p = {}; p.top_p = 0;
  fails_on(p, "top_p");
  p = {}; p.top_p = 1.5f;
  fails_on(p, "top_p");
  p = {}; p.min_p = -0.1f;
  fails_on(p, "min_p");
  p = {}; p.repetition_penalty = 0;
  fails_on(p, "repetition_penalty");
  p = {}; p.presence_penalty = INFINITY;
  fails_on(p, "presence_penalty");
  p = {}; p.frequency_penalty = NAN;
  fails_on(p, "frequency_penalty");
  EXPECT_NO_THROW(SamplingParams{}.validate());
}

TEST(Sampler, BadLogitsAreRefused) {
  Sampler s(SamplingParams{});
  std::vector<float> x = {1, 2, NAN, 3};
  EXPECT_THROW(s.sample(x), ArgumentError);
  x = {1, INFINITY};
  EXPECT_THROW(s.sample(x), ArgumentError);
  x = std::vector<float>(40, -INFINITY);
  EXPECT_THROW(s.sample(x), ArgumentError);
  EXPECT_THROW(s.sample(std::vector<float>{}), ArgumentError);
  x = {1, 2, 3};
  const std::vector<int32_t> ctx = {0, 3};
  EXPECT_THROW(s.sample(x, ctx), ArgumentError);
  // A NaN in a long row (the vectorised part, not the tail) is caught on every target.
  testing::for_each_target([&](Target) {
    std::vector<float> y(1000, 0.f);
    y[17] = NAN;
    SamplingParams g;
    g.temperature = 0;
    Sampler greedy(g);
    EXPECT_THROW(greedy.sample(y), ArgumentError);
  });
}

TEST(Sampler, GreedyIsFirstArgmaxOnEveryTarget) {
  testing::for_each_target([](Target) {
    for (size_t vocab : {1, 7, 16, 33, 1000, 4099}) {
      auto x = random_logits(vocab, vocab);
      SamplingParams p;
      p.temperature = 0;
      Sampler s(p);
      const auto want = std::max_element(x.begin(), x.end()) - x.begin();
      EXPECT_EQ(s.sample(x), want) << vocab;
      x.push_back(x[size_t(want)]);  // a tie later in the row: the first index still wins
      EXPECT_EQ(s.sample(x), want) << vocab;
    }
  });
}

TEST(Sampler, PenaltiesFollowHuggingFaceAndOpenAI) {
  std::vector<float> x = {2.f, -2.f, 1.f, 0.5f, 3.f};
  const std::vector<int32_t> ctx = {0, 1, 1, 3, 3, 3};
  SamplingParams p;
  p.repetition_penalty = 2.f;
  p.presence_penalty = 0.25f;
  p.frequency_penalty = 0.5f;
  apply_penalties(x.data(), int64_t(x.size()), ctx, /*prompt_length=*/0, p);
  EXPECT_FLOAT_EQ(x[0], 2.f / 2 - 0.25f - 0.5f * 1);   // positive: divided
  EXPECT_FLOAT_EQ(x[1], -2.f * 2 - 0.25f - 0.5f * 2);  // negative: multiplied, once however often seen
  EXPECT_FLOAT_EQ(x[2], 1.f);                          // unseen: untouched
  EXPECT_FLOAT_EQ(x[3], 0.5f / 2 - 0.25f - 0.5f * 3);
  EXPECT_FLOAT_EQ(x[4], 3.f);
}

// vLLM's rule: presence and frequency count the generated tokens, the repetition penalty the prompt's too.
TEST(Sampler, PresenceAndFrequencyCountOnlyGeneratedTokens) {
  std::vector<float> x = {2.f, -2.f, 1.f, 0.5f, 3.f};
  const std::vector<int32_t> ctx = {0, 1, 3, /*generated:*/ 1, 3, 3};
  SamplingParams p;
  p.repetition_penalty = 2.f;
  p.presence_penalty = 0.25f;
  p.frequency_penalty = 0.5f;
  apply_penalties(x.data(), int64_t(x.size()), ctx, /*prompt_length=*/3, p);
  EXPECT_FLOAT_EQ(x[0], 2.f / 2);                      // the prompt's alone: repetition only
  EXPECT_FLOAT_EQ(x[1], -2.f * 2 - 0.25f - 0.5f * 1);  // generated once (the prompt's occurrence not counted)
  EXPECT_FLOAT_EQ(x[2], 1.f);
  EXPECT_FLOAT_EQ(x[3], 0.5f / 2 - 0.25f - 0.5f * 2);
  EXPECT_FLOAT_EQ(x[4], 3.f);

  // The Sampler applies its prompt length: a prompt full of token 0 no longer pushes greedy off it.
  const std::vector<float> row = {1.f, 0.9f};
  SamplingParams g;
  g.temperature = 0;
  g.presence_penalty = 2.f;
  g.frequency_penalty = 2.f;
  const std::vector<int32_t> prompt = {0, 0, 0};
  EXPECT_EQ(Sampler(g, 3).sample(row, prompt), 0);
  EXPECT_EQ(Sampler(g, 0).sample(row, prompt), 1);
  EXPECT_THROW(Sampler(g, -1), ArgumentError);
}

TEST(Sampler, RepetitionPenaltyChangesTheGreedyChoice) {
  const std::vector<float> x = {5.f, 4.f, 1.f};
  SamplingParams p;
  p.temperature = 0;
  p.repetition_penalty = 1.5f;
  Sampler s(p);
  const std::vector<int32_t> ctx = {0};
  EXPECT_EQ(s.sample(x), 0);
  EXPECT_EQ(s.sample(x, ctx), 1);  // 5 / 1.5 < 4
}

TEST(Sampler, TopKNeverLeavesTheKBest) {
  testing::for_each_target([](Target) {
    const auto x = random_logits(5000, 3);
    std::vector<int32_t> order(x.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return x[a] > x[b]; });
    for (int64_t k : {1, 5, 40}) {
      SamplingParams p;
      p.top_k = k;
      p.temperature = 3.f;  // flat: without the filter most draws would fall outside
      p.seed = uint64_t(k);
      Sampler s(p);
      const std::set<int32_t> best(order.begin(), order.begin() + k);
      std::set<int32_t> seen;
      for (int32_t id : draws(s, x, 2000)) {
        ASSERT_TRUE(best.count(id)) << "k=" << k << " drew " << id;
        seen.insert(id);
      }
      if (k <= 5) EXPECT_EQ(seen.size(), size_t(k));
    }
  });
}

TEST(Sampler, TopKKeepsTiesWithTheKthAsHuggingFace) {
  const std::vector<float> x = {1.f, 3.f, 2.f, 2.f, 0.f};
  SamplingParams p;
  p.top_k = 2;
  EXPECT_EQ(drawn_ids(p, x, 3000), (std::set<int32_t>{1, 2, 3}));
}

TEST(Sampler, TopPKeepsTheSmallestNucleus) {
  // Probabilities 0.5, 0.25, 0.125, 0.0625, ...: top_p = 0.8 needs three tokens (0.875 >= 0.8 > 0.75).
  std::vector<float> x(12);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -float(i) * std::log(2.f);
  SamplingParams p;
  p.top_p = 0.8f;
  EXPECT_EQ(drawn_ids(p, x, 3000), (std::set<int32_t>{0, 1, 2}));
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheBest) {
  const std::vector<float> x = {0.f, std::log(0.5f), std::log(0.2f), std::log(0.09f), std::log(0.01f)};
  SamplingParams p;
  p.min_p = 0.1f;
  EXPECT_EQ(drawn_ids(p, x, 4000), (std::set<int32_t>{0, 1, 2}));
}

TEST(Sampler, LowerTemperatureLowersEntropy) {
  const auto x = random_logits(200, 9, 1.f);
  double previous = 1e9;
  for (float t : {2.f, 1.f, 0.5f, 0.2f}) {
    SamplingParams p;
    p.temperature = t;
    Sampler s(p);
    const double h = entropy_of_draws(draws(s, x, 4000), x.size());
    EXPECT_LT(h, previous) << "temperature " << t;
    previous = h;
  }
}

TEST(Sampler, SameSeedSameTokensOnEveryTarget) {
  const auto x = random_logits(3000, 5, 1.f);
  SamplingParams p;
  p.seed = 1234;
  p.top_p = 0.9f;
  std::vector<int32_t> first;
  testing::for_each_target([&](Target) {
    Sampler s(p);
    auto got = draws(s, x, 300);
    if (first.empty()) first = got;
    EXPECT_EQ(got, first);
  });
  p.seed = 1235;
  Sampler other(p);
  EXPECT_NE(draws(other, x, 300), first);
}

TEST(KeyedUniform, FixedDefinition) {
  // The draws are part of the reproducibility promise: their values must never change.
  double sum = 0, lag = 0, prev = 0.5;
  for (uint64_t i = 0; i < 100000; ++i) {
    const double u = keyed_uniform(42, i, DrawPurpose::token);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    lag += (u - 0.5) * (prev - 0.5);
    prev = u;
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.005);
  EXPECT_NEAR(lag / 100000, 0.0, 0.002);  // neighbouring positions uncorrelated (1/12 would be identical)
  // Neighbouring seeds (a request's n samples use seed + i) and the purposes at one position are unrelated.
  double across = 0;
  for (uint64_t s = 0; s < 20000; ++s)
    across += (keyed_uniform(s, 7, DrawPurpose::token) - 0.5) * (keyed_uniform(s + 1, 7, DrawPurpose::token) - 0.5) +
              (keyed_uniform(s, 7, DrawPurpose::token) - 0.5) * (keyed_uniform(s, 7, DrawPurpose::accept) - 0.5);
  EXPECT_NEAR(across / 40000, 0.0, 0.004);
  // Pinned (computed apart, in Python): splitmix64's output function of mix64(4 seed + purpose + golden) +
  // (index + 1) golden, its top 53 bits.
  EXPECT_EQ(keyed_uniform(0, 0, DrawPurpose::token), 0x1.4e0dba5e9a32fp-1);
  EXPECT_EQ(keyed_uniform(7, 3, DrawPurpose::accept), 0x1.4b3667d121a40p-7);
}

// A sample's i-th token is decided by draw i alone: a sampler moved to position i picks what the i-th call of a
// fresh one picks, greedy calls move on like the others, and a refused row moves nothing.
TEST(Sampler, DrawsAreKeyedByPosition) {
  const auto x = random_logits(300, 4, 1.f);
  const std::vector<int32_t> ctx = {3, 9};
  SamplingParams p;
  p.temperature = 1.3f;
  p.seed = 77;
  Sampler stream(p);
  std::vector<int32_t> seq;
  for (int i = 0; i < 40; ++i) seq.push_back(stream.sample(x, ctx));
  EXPECT_EQ(stream.position(), 40);
  Sampler jump(p);
  for (int i : {31, 4, 17, 0, 39}) {
    jump.seek(i);
    EXPECT_EQ(jump.sample(x, ctx), seq[size_t(i)]) << i;
    EXPECT_EQ(jump.position(), i + 1);
  }
  SamplingParams g = p;
  g.temperature = 0.f;
  Sampler greedy(g);
  greedy.sample(x, ctx);
  EXPECT_EQ(greedy.position(), 1);
  std::vector<float> bad(300, -INFINITY);
  EXPECT_THROW(stream.sample(bad, ctx), ArgumentError);
  EXPECT_EQ(stream.position(), 40);
  EXPECT_THROW(stream.seek(-1), ArgumentError);
}

// A large, peaked vocabulary row (as real models produce) through every filter combination: the fast path's
// draws stay inside the reference's support. The time per draw is printed, not asserted: a timed assertion fails
// under the sanitizers or on a loaded machine without anything being wrong (well under a millisecond, typically).
TEST(Sampler, LargeVocabularyDrawsStayInsideTheSupport) {
  const size_t vocab = 151936;
  auto x = random_logits(vocab, 77, 1.5f);
  for (int i = 0; i < 20; ++i) x[size_t(i) * 7001] += 12.f;  // a few strong candidates
  const std::vector<int32_t> ctx = {7001, 14002, 5, 5, 9};
  struct Case { float t; int64_t k; float p; float min_p; };
  for (const Case c : {Case{1.f, 0, 1.f, 0.f}, Case{0.8f, 50, 1.f, 0.f}, Case{0.7f, 0, 0.9f, 0.f},
                       Case{1.f, 40, 0.95f, 0.05f}, Case{1.f, 0, 1.f, 0.1f}, Case{0.f, 0, 1.f, 0.f}}) {
    SamplingParams p;
    p.temperature = c.t;
    p.top_k = c.k;
    p.top_p = c.p;
    p.min_p = c.min_p;
    p.repetition_penalty = 1.1f;
    const auto ref = sampling_distribution_reference(x, ctx, p);
    Sampler s(p);
    s.sample(x, ctx);  // warm the scratch buffers
    const int n = 200;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
      const int32_t id = s.sample(x, ctx);
      ASSERT_GT(ref[size_t(id)], 0.0) << "t=" << c.t << " k=" << c.k << " p=" << c.p;
    }
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n;
    std::printf("vocab %zu t=%.1f k=%lld p=%.2f min_p=%.2f: %.1f us per token\n", vocab, c.t, (long long)c.k, c.p,
                c.min_p, us);
  }
}

}  // namespace
}  // namespace attnzoo
