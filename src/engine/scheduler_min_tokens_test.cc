// vLLM's min_tokens in the serving scheduler: the ids that would end a sample (EOS, stop_token_ids) are banned
// until it has that many tokens, in batches, under preemption, in forks and in speculative verification alike,
// each request's tokens those of the single-sequence loop with the same minimum run alone; logprobs stay raw.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "engine/scheduler_test_fixture.h"

namespace attnzoo {
namespace {

using scheduler_testing::Collected;
using scheduler_testing::SchedulerTest;

bool holds_before(const std::vector<int32_t>& tokens, int64_t count, int32_t id) {
  const auto end = tokens.begin() + std::min<int64_t>(count, int64_t(tokens.size()));
  return std::find(tokens.begin(), end, id) != end;
}

// Greedy requests with minimums 0, 4, 9 and 20 batched (and, with a small pool, preempted and recomputed): each
// equals its request alone, no EOS comes before its minimum, and some would have ended there without the ban.
TEST_F(SchedulerTest, MinTokensMatchesEachRequestAloneInABatch) {
  for (const int64_t blocks : {int64_t(0), int64_t(24)}) {
    SCOPED_TRACE("blocks " + std::to_string(blocks));
    auto model = load(blocks);
    EngineOptions o = defaults();
    o.max_num_batched_tokens = 32;
    o.max_num_seqs = 6;
    Scheduler s(*model, nullptr, o);
    const int N = 16;
    std::vector<Collected> got(N);
    std::vector<Request> reqs(N);
    for (int i = 0; i < N; ++i) {
      reqs[size_t(i)].prompt = prompt_of(3 + (i * 7) % 40, i);
      reqs[size_t(i)].params.sampling.temperature = 0;
      reqs[size_t(i)].params.max_tokens = 20;
      reqs[size_t(i)].params.min_tokens = std::vector<int64_t>{0, 4, 9, 20}[size_t(i % 4)];
      s.check(reqs[size_t(i)]);
      s.add(uint64_t(i + 1), reqs[size_t(i)], collect(got[size_t(i)]), EngineClock::now());
    }
    drain(s);
    int banned_an_end = 0;
    for (int i = 0; i < N; ++i) {
      const RequestParams& p = reqs[size_t(i)].params;
      ASSERT_TRUE(got[size_t(i)].finished) << i;
      const auto& tokens = got[size_t(i)].tokens[0];
      EXPECT_EQ(tokens, alone(reqs[size_t(i)].prompt, p)) << "request " << i;
      EXPECT_GE(int64_t(tokens.size()), p.min_tokens) << i;
      EXPECT_FALSE(holds_before(tokens, p.min_tokens, eos_[0])) << i;
      RequestParams free = p;
      free.min_tokens = 0;
      banned_an_end += int64_t(alone(reqs[size_t(i)].prompt, free).size()) < p.min_tokens;
    }
    EXPECT_GT(banned_an_end, 0) << "no request would have ended before its minimum: the test shows nothing";
    if (blocks > 0) EXPECT_GT(s.stats().preemptions, 0);
    EXPECT_EQ(s.stats().free_blocks, s.stats().num_blocks);
  }
}

// Verification bans the rows that decide tokens before the minimum, so n-gram and draft speculation give each
// request's greedy tokens alone (the guesses know nothing of the ban).
TEST_F(SchedulerTest, MinTokensIsExactUnderSpeculation) {
  const auto draft = load();
  for (const auto method : {SpeculativeMethod::ngram, SpeculativeMethod::draft}) {
    SCOPED_TRACE(method == SpeculativeMethod::ngram ? "ngram" : "draft");
    auto model = load();
    EngineOptions o = defaults();
    o.max_num_batched_tokens = 40;
    o.speculative.method = method;
    o.speculative.num_speculative_tokens = 3;
    o.draft_model = draft.get();
    Scheduler s(*model, nullptr, o);
    const int N = 12;
    std::vector<Collected> got(N);
    std::vector<Request> reqs(N);
    int banned_an_end = 0;
    for (int i = 0; i < N; ++i) {
      std::vector<int32_t> p = prompt_of(4 + i % 5, i);
      for (int rep = 0; rep < 3; ++rep) p.insert(p.end(), p.begin(), p.begin() + 4 + i % 5);
      reqs[size_t(i)].prompt = p;
      reqs[size_t(i)].params.sampling.temperature = 0;
      reqs[size_t(i)].params.max_tokens = 24;
      reqs[size_t(i)].params.min_tokens = 2 + (i * 5) % 22;
      s.add(uint64_t(i + 1), reqs[size_t(i)], collect(got[size_t(i)]), EngineClock::now());
      RequestParams free = reqs[size_t(i)].params;
      free.min_tokens = 0;
      banned_an_end += int64_t(alone(p, free).size()) < reqs[size_t(i)].params.min_tokens;
    }
    drain(s);
    for (int i = 0; i < N; ++i) {
      ASSERT_TRUE(got[size_t(i)].finished) << i;
      EXPECT_EQ(got[size_t(i)].tokens[0], alone(reqs[size_t(i)].prompt, reqs[size_t(i)].params)) << "request " << i;
    }
    EXPECT_GT(banned_an_end, 0);
    EXPECT_GT(s.stats().speculative.accepted_tokens, 0);
  }
}

// Seeded forks: each of the n samples draws with the ban from its own seed, as the loop alone with seed + i.
TEST_F(SchedulerTest, MinTokensHoldsForEverySampleOfAFork) {
  auto model = load();
  Scheduler s(*model, nullptr, defaults());
  Collected got;
  Request r;
  r.prompt = prompt_of(21, 5);
  r.params.n = 3;
  r.params.max_tokens = 16;
  r.params.min_tokens = 12;
  r.params.sampling.temperature = 1.3f;
  r.params.sampling.seed = 99;
  s.add(1, r, collect(got), EngineClock::now());
  drain(s);
  ASSERT_EQ(got.tokens.size(), 3u);
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(got.tokens[i], alone(r.prompt, r.params, i)) << "sample " << i;
    EXPECT_FALSE(holds_before(got.tokens[i], 12, eos_[0])) << "sample " << i;
  }
}

// stop_token_ids are banned like EOS, and EOS is banned under ignore_eos too (vLLM's min_tokens says when an end
// may be drawn). Logprobs stay the raw logits' (vLLM v1's): the banned id is still the most likely one reported.
TEST_F(SchedulerTest, MinTokensBansStopIdsAndKeepsRawLogprobs) {
  auto model = load();
  const std::vector<int32_t> prompt = prompt_of(9, 3);
  RequestParams p;
  p.sampling.temperature = 0;
  p.max_tokens = 12;
  p.ignore_eos = true;
  std::vector<int32_t> free_run;
  {
    EngineOptions o = defaults();
    o.eos_token_ids = {};
    Scheduler s(*model, nullptr, o);
    Collected c;
    s.add(1, {prompt, p}, collect(c), EngineClock::now());
    drain(s);
    free_run = c.tokens[0];
  }
  ASSERT_EQ(free_run.size(), 12u);
  const int32_t stop_id = free_run[0], eos = free_run[1] == stop_id ? free_run[2] : free_run[1];
  ASSERT_NE(eos, stop_id);
  EngineOptions o = defaults();
  o.eos_token_ids = {eos};
  Scheduler s(*model, nullptr, o);
  p.stop_token_ids = {stop_id};
  p.min_tokens = 6;
  p.logprobs = true;
  p.top_logprobs = 2;
  std::vector<SampleDelta> deltas;
  s.add(2, {prompt, p}, [&](RequestOutput&& out) { for (auto& d : out.samples) deltas.push_back(d); },
        EngineClock::now());
  drain(s);
  std::vector<int32_t> tokens;
  std::vector<TokenLogprob> chosen;
  std::vector<std::vector<TokenLogprob>> top;
  for (const auto& d : deltas) {
    tokens.insert(tokens.end(), d.token_ids.begin(), d.token_ids.end());
    chosen.insert(chosen.end(), d.logprobs.begin(), d.logprobs.end());
    top.insert(top.end(), d.top_logprobs.begin(), d.top_logprobs.end());
  }
  ASSERT_GE(tokens.size(), 6u);
  EXPECT_FALSE(holds_before(tokens, 6, stop_id));
  EXPECT_FALSE(holds_before(tokens, 6, eos));
  EXPECT_NE(tokens[0], free_run[0]);
  // The first row's raw log-softmax: the banned stop id is reported first; greedy drew the best unbanned id.
  auto seq = model->new_sequence();
  Batch b;
  b.add(*seq, prompt);
  std::vector<float> logits = model->forward(b, true);
  double z = 0;
  for (float l : logits) z += std::exp(double(l));
  ASSERT_EQ(top[0].size(), 2u);
  EXPECT_EQ(top[0][0].token, stop_id);
  EXPECT_NEAR(top[0][0].logprob, double(logits[size_t(stop_id)]) - std::log(z), 1e-5);
  EXPECT_NEAR(chosen[0].logprob, double(logits[size_t(tokens[0])]) - std::log(z), 1e-5);
  logits[size_t(stop_id)] = logits[size_t(eos)] = -INFINITY;
  EXPECT_EQ(tokens[0], int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin()));
}

TEST_F(SchedulerTest, MinTokensIsCheckedByName) {
  auto model = load();
  Scheduler s(*model, nullptr, defaults());
  auto message = [&](int64_t min_tokens, int64_t max_tokens) {
    Request r;
    r.prompt = prompt_of(5, 1);
    r.params.min_tokens = min_tokens;
    r.params.max_tokens = max_tokens;
    try {
      s.check(r);
    } catch (const ArgumentError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(message(5, 5), "");
  EXPECT_EQ(message(6, 5), "min_tokens: must be <= max_tokens (5), got 6");
  EXPECT_EQ(message(-1, 5), "min_tokens: must be >= 0, got -1");
}

}  // namespace
}  // namespace attnzoo
