// logit_bias in the scheduler: a -100 bias on a greedy request's first token changes that token, a +100 bias on
// an id makes every greedy token that id whatever else shares the step, the reported logprobs stay those of the
// raw logits, speculation is off for biased requests, and the bias's ids and values are checked.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/scheduler.h"
#include "engine/scheduler_test_fixture.h"

namespace attnzoo {
namespace {

using scheduler_testing::Collected;
using scheduler_testing::SchedulerTest;

class SchedulerLogitBiasTest : public SchedulerTest {
 protected:
  void SetUp() override {
    SchedulerTest::SetUp();
    eos_.clear();
  }

  static Request greedy(int32_t salt, int64_t max_tokens, std::vector<std::pair<int32_t, float>> bias = {}) {
    Request r;
    r.prompt = prompt_of(7 + salt, salt);
    r.params.sampling.temperature = 0;
    r.params.max_tokens = max_tokens;
    r.params.logit_bias = std::move(bias);
    return r;
  }
};

TEST_F(SchedulerLogitBiasTest, BiasChangesAndForcesGreedyTokens) {
  auto model = load();
  Scheduler s(*model, nullptr, defaults());
  const Request plain = greedy(1, 6);
  const auto want = alone(plain.prompt, plain.params);
  const int32_t first = want[0];
  const int32_t forced = first == 5 ? 6 : 5;
  Collected banned, forcing, other;
  s.add(1, greedy(1, 6, {{first, -100.f}}), collect(banned), EngineClock::now());
  s.add(2, greedy(1, 6, {{forced, 100.f}, {first, 0.f}}), collect(forcing), EngineClock::now());
  s.add(3, plain, collect(other), EngineClock::now());
  drain(s);
  ASSERT_EQ(banned.tokens[0].size(), 6u);
  EXPECT_NE(banned.tokens[0][0], first);
  EXPECT_EQ(forcing.tokens[0], std::vector<int32_t>(6, forced));
  EXPECT_EQ(other.tokens[0], want) << "an unbiased request beside biased ones is unchanged";
}

TEST_F(SchedulerLogitBiasTest, LogprobsAreTheRawLogits) {
  auto model = load();
  Scheduler s(*model, nullptr, defaults());
  Request plain = greedy(2, 1);
  plain.params.logprobs = true;
  plain.params.top_logprobs = testing::kTinyLlamaVocab;
  const int32_t forced = 11;
  Request biased = greedy(2, 1, {{forced, 100.f}});
  biased.params.logprobs = true;
  std::vector<TokenLogprob> plain_top, biased_lp;
  s.add(1, plain, [&](RequestOutput&& o) {
    for (auto& d : o.samples)
      for (auto& t : d.top_logprobs) plain_top = t;
  }, EngineClock::now());
  s.add(2, biased, [&](RequestOutput&& o) {
    for (auto& d : o.samples) biased_lp.insert(biased_lp.end(), d.logprobs.begin(), d.logprobs.end());
  }, EngineClock::now());
  drain(s);
  ASSERT_EQ(biased_lp.size(), 1u);
  EXPECT_EQ(biased_lp[0].token, forced);
  float raw = 1;
  for (const auto& t : plain_top)
    if (t.token == forced) raw = t.logprob;
  ASSERT_LT(raw, 0.f);
  EXPECT_FLOAT_EQ(biased_lp[0].logprob, raw);
  EXPECT_LT(raw, -0.5f) << "the forced token was not already certain: the test could not tell the difference";
}

TEST_F(SchedulerLogitBiasTest, BiasedRequestsDecodeWithoutGuesses) {
  auto model = load();
  auto draft = load();
  Scheduler s(*model, nullptr, drafting(draft.get(), 3));
  Collected biased, plain;
  s.add(1, greedy(3, 12, {{7, 5.f}}), collect(biased), EngineClock::now());
  s.add(2, greedy(4, 12), collect(plain), EngineClock::now());
  std::map<uint64_t, int64_t> most;
  for (const auto& step : drain(s))
    for (const auto& c : step.chunks)
      if (c.decode) most[c.request_id] = std::max(most[c.request_id], c.num_tokens);
  EXPECT_EQ(most[1], 1) << "a biased request verified guesses";
  EXPECT_GT(most[2], 1) << "the plain request beside it still speculates";
  EXPECT_EQ(biased.tokens[0].size(), 12u);
}

TEST_F(SchedulerLogitBiasTest, BadBiasesNameTheField) {
  auto model = load();
  Scheduler s(*model, nullptr, defaults());
  for (auto bias : {std::pair<int32_t, float>{int32_t(testing::kTinyLlamaVocab), 1.f}, {-1, 1.f}, {3, 100.5f},
                    {3, -101.f}, {3, NAN}}) {
    const Request r = greedy(1, 2, {bias});
    try {
      s.check(r);
      ADD_FAILURE() << "accepted " << bias.first << ": " << bias.second;
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("logit_bias"), std::string::npos) << e.what();
    }
  }
  Request json = greedy(1, 2);
  json.params.response_format = ResponseFormat::json_object;
  try {
    s.check(json);
    ADD_FAILURE() << "JSON mode without a tokenizer";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("response_format"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attnzoo
