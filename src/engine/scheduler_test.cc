// The scheduler on a small random Llama: every request's tokens are checked against the single-sequence
// generation loop (generate() over ModelSequence, a separately loaded copy of the model) run alone, while the
// step reports are checked for the token budget, decode-first order, chunked prefill and preemption.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "core/error.h"
#include "engine/scheduler_test_fixture.h"

namespace attnzoo {
namespace {

using scheduler_testing::Collected;
using scheduler_testing::SchedulerTest;

TEST_F(SchedulerTest, GreedyBatchesMatchEachRequestAlone) {
  auto model = load();
  EngineOptions o = defaults();
  o.max_num_batched_tokens = 32;
  o.max_num_seqs = 8;
  Scheduler s(*model, nullptr, o);
  const int N = 20;
  std::vector<Collected> got(N);
  std::vector<Request> reqs(N);
  for (int i = 0; i < N; ++i) {
    reqs[size_t(i)].prompt = prompt_of(1 + (i * 13) % 70, i);
    reqs[size_t(i)].params.sampling.temperature = 0;
    reqs[size_t(i)].params.max_tokens = 6 + i % 9;
    s.check(reqs[size_t(i)]);
    s.add(uint64_t(i + 1), reqs[size_t(i)], collect(got[size_t(i)]), EngineClock::now());
  }
  const auto steps = drain(s);
  std::map<uint64_t, int> prefill_chunks;
  for (const auto& st : steps) {
    EXPECT_LE(st.num_tokens, 32);
    EXPECT_LE(int64_t(st.chunks.size()), 8);
    bool seen_prefill = false;
    for (const auto& c : st.chunks) {
      // Decodes come first in every step, prefill chunks after them.
      if (!c.decode) seen_prefill = true;
      EXPECT_FALSE(c.decode && seen_prefill) << "a decode after a prefill chunk";
      if (!c.decode) ++prefill_chunks[c.request_id];
    }
  }
  // The 64-token prompt (request 6: 1 + 65 % 70) cannot fit one step of 32 tokens: it was split.
  EXPECT_GE(prefill_chunks[6], 2);
  for (int i = 0; i < N; ++i) {
    ASSERT_TRUE(got[size_t(i)].finished) << i;
    EXPECT_EQ(got[size_t(i)].tokens[0], alone(reqs[size_t(i)].prompt, reqs[size_t(i)].params)) << "request " << i;
    EXPECT_EQ(got[size_t(i)].usage.prompt_tokens, int64_t(reqs[size_t(i)].prompt.size()));
    EXPECT_EQ(got[size_t(i)].usage.completion_tokens, int64_t(got[size_t(i)].tokens[0].size()));
  }
  // The model is not degenerate: the continuations differ, and some end at EOS.
  std::set<std::vector<int32_t>> distinct;
  int eos_stops = 0;
  for (auto& g : got) {
    distinct.insert(g.tokens[0]);
    eos_stops += g.reasons[0] == FinishReason::stop;
  }
  EXPECT_GT(distinct.size(), size_t(N / 2));
  EXPECT_GT(eos_stops, 0);
  const EngineStats st = s.stats();
  EXPECT_EQ(st.finished_requests, N);
  EXPECT_EQ(st.free_blocks, st.num_blocks);
}

TEST_F(SchedulerTest, DecodesFirstThenAChunkFillsTheBudget) {
  auto model = load();
  EngineOptions o = defaults();
  o.max_num_batched_tokens = 16;
  Scheduler s(*model, nullptr, o);
  Collected a, b, c;
  RequestParams p;
  p.sampling.temperature = 0;
  p.max_tokens = 40;
  s.add(1, {prompt_of(5, 1), p}, collect(a), EngineClock::now());
  s.add(2, {prompt_of(6, 2), p}, collect(b), EngineClock::now());
  StepReport first = s.step();  // both prompts prefilled in one step
  ASSERT_EQ(first.chunks.size(), 2u);
  EXPECT_EQ(first.num_tokens, 11);
  s.add(3, {prompt_of(40, 3), p}, collect(c), EngineClock::now());
  for (int k = 0; k < 3; ++k) {
    StepReport st = s.step();
    ASSERT_EQ(st.chunks.size(), 3u);
    EXPECT_TRUE(st.chunks[0].decode);
    EXPECT_TRUE(st.chunks[1].decode);
    EXPECT_EQ(st.chunks[2].request_id, 3u);
    EXPECT_FALSE(st.chunks[2].decode);
    // 40 prompt tokens: 14 + 14 + 12, two decode tokens alongside each chunk.
    EXPECT_EQ(st.chunks[2].num_tokens, k < 2 ? 14 : 12);
    EXPECT_EQ(st.num_tokens, k < 2 ? 16 : 14);
  }
  drain(s);
  EXPECT_EQ(c.tokens[0], alone(prompt_of(40, 3), p));
}

TEST_F(SchedulerTest, WithoutChunkedPrefillALongPromptRunsWhole) {
  auto model = load();
  EngineOptions o = defaults();
  o.max_num_batched_tokens = 16;
  o.enable_chunked_prefill = false;
  Scheduler s(*model, nullptr, o);
  Collected a, b;
  RequestParams p;
  p.sampling.temperature = 0;
  p.max_tokens = 4;
  s.add(1, {prompt_of(10, 1), p}, collect(a), EngineClock::now());
  s.add(2, {prompt_of(40, 2), p}, collect(b), EngineClock::now());
  EXPECT_EQ(s.step().num_tokens, 10);  // the 40-token prompt does not fit beside it
  const auto steps = drain(s);
  bool whole = false;
  for (const auto& st : steps)
    for (const auto& c : st.chunks) whole |= c.request_id == 2 && c.num_tokens == 40;
  EXPECT_TRUE(whole);
  EXPECT_EQ(b.tokens[0], alone(prompt_of(40, 2), p));
}

TEST_F(SchedulerTest, PreemptsTheNewestWhenThePoolRunsOutAndEveryRequestCompletes) {
  auto model = load(/*blocks=*/24);
  ASSERT_EQ(model->cache().stats().num_blocks, 24);
  EngineOptions o = defaults();
  o.max_num_batched_tokens = 64;
  Scheduler s(*model, nullptr, o);
  const int N = 8;
  std::vector<Collected> got(N);
  std::vector<Request> reqs(N);
  for (int i = 0; i < N; ++i) {
    reqs[size_t(i)].prompt = prompt_of(6 + i, 40 + i);
    reqs[size_t(i)].params.sampling.temperature = 0;
    reqs[size_t(i)].params.max_tokens = 30;  // 36..43 tokens: 9..11 blocks each, 8 of them cannot share 24
    s.check(reqs[size_t(i)]);
    s.add(uint64_t(i + 1), reqs[size_t(i)], collect(got[size_t(i)]), EngineClock::now());
  }
  // Replays admission order from the step reports: each preempted request must be the newest still running.
  std::vector<uint64_t> running;
  int64_t preempted = 0;
  for (int k = 0; k < 5000 && s.has_work(); ++k) {
    const StepReport st = s.step();
    for (uint64_t id : st.preempted) {
      ASSERT_FALSE(running.empty());
      EXPECT_EQ(id, running.back()) << "preempted a request that was not the newest";
      running.pop_back();
      ++preempted;
    }
    running.insert(running.end(), st.admitted.begin(), st.admitted.end());
    std::erase_if(running, [&](uint64_t id) { return got[size_t(id - 1)].finished; });
  }
  EXPECT_FALSE(s.has_work());
  EXPECT_GT(preempted, 0);
  EXPECT_EQ(s.stats().preemptions, preempted);
  for (int i = 0; i < N; ++i) {
    ASSERT_TRUE(got[size_t(i)].finished);
    EXPECT_EQ(got[size_t(i)].reasons[0], got[size_t(i)].tokens[0].size() == 30 ? FinishReason::length : FinishReason::stop);
    EXPECT_EQ(got[size_t(i)].tokens[0], alone(reqs[size_t(i)].prompt, reqs[size_t(i)].params)) << "request " << i;
  }
  const EngineStats st = s.stats();
  EXPECT_EQ(st.free_blocks, st.num_blocks);
  EXPECT_EQ(st.finished_requests, N);
}

TEST_F(SchedulerTest, AbortFreesEveryBlockAtOnce) {
  auto model = load();
  const int64_t baseline = model->cache().stats().free_blocks;
  EngineOptions o = defaults();
  o.max_num_batched_tokens = 24;
  Scheduler s(*model, nullptr, o);
  std::vector<Collected> got(5);
  RequestParams p;
  p.max_tokens = 100;
  p.n = 2;
  for (int i = 0; i < 5; ++i) s.add(uint64_t(i + 1), {prompt_of(20 + 7 * i, i), p}, collect(got[size_t(i)]), EngineClock::now());
  for (int k = 0; k < 4; ++k) s.step();
  EXPECT_LT(model->cache().stats().free_blocks, baseline);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(s.abort(uint64_t(i + 1)));
  EXPECT_FALSE(s.abort(1));
  EXPECT_FALSE(s.has_work());
  EXPECT_EQ(model->cache().stats().free_blocks, baseline);
  for (const auto& c : got) {
    EXPECT_TRUE(c.finished);
    ASSERT_EQ(c.reasons.size(), 2u);  // both samples end, forked or not
    for (const auto& [index, reason] : c.reasons) EXPECT_EQ(reason, FinishReason::abort);
  }
  EXPECT_EQ(s.stats().aborted_requests, 5);
}

TEST_F(SchedulerTest, ParallelSamplesShareThePromptAndMatchTheirSeeds) {
  auto model = load();
  EngineOptions o = defaults();
  Scheduler s(*model, nullptr, o);
  Collected got;
  Request r;
  r.prompt = prompt_of(32, 9);  // 8 full blocks of 4
  r.params.n = 3;
  r.params.max_tokens = 12;
  r.params.sampling.temperature = 0.9f;
  r.params.sampling.top_p = 0.95f;
  r.params.sampling.repetition_penalty = 1.1f;
  r.params.sampling.seed = 1234;
  s.add(1, r, collect(got), EngineClock::now());
  const PoolStats before = model->cache().stats();
  s.step();  // prefill, fork, first token of each sample
  const PoolStats after = model->cache().stats();
  EXPECT_EQ(before.free_blocks - after.free_blocks, 8) << "the samples share the prompt's blocks";
  drain(s);
  ASSERT_EQ(got.tokens.size(), 3u);
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(got.tokens[i], alone(r.prompt, r.params, i)) << "sample " << i;
  EXPECT_NE(got.tokens[0], got.tokens[1]);
  EXPECT_EQ(got.usage.completion_tokens, int64_t(got.tokens[0].size() + got.tokens[1].size() + got.tokens[2].size()));
}

TEST_F(SchedulerTest, PrefixCacheIsUsedAcrossRequests) {
  auto model = load();
  Scheduler s(*model, nullptr, defaults());
  Collected a, b;
  RequestParams p;
  p.sampling.temperature = 0;
  p.max_tokens = 3;
  std::vector<int32_t> shared = prompt_of(40, 4), other = shared;
  other.back() = (other.back() + 1) % int32_t(testing::kTinyLlamaVocab);
  s.add(1, {shared, p}, collect(a), EngineClock::now());
  drain(s);
  s.add(2, {other, p}, collect(b), EngineClock::now());
  drain(s);
  EXPECT_EQ(b.usage.cached_tokens, 36);  // 9 whole blocks of the 39 shared tokens
  EXPECT_EQ(s.stats().prefix_cache_hits, 36);
  EXPECT_EQ(s.stats().prefix_cache_queries, 80);
  EXPECT_EQ(b.tokens[0], alone(other, p));
}

TEST_F(SchedulerTest, LogprobsAreTheRawLogSoftmax) {
  auto model = load();
  Scheduler s(*model, nullptr, defaults());
  std::vector<SampleDelta> deltas;
  Request r;
  r.prompt = prompt_of(7, 2);
  r.params.sampling.temperature = 0;
  r.params.max_tokens = 1;
  r.params.logprobs = true;
  r.params.top_logprobs = 3;
  s.add(1, r, [&](RequestOutput&& o) { for (auto& d : o.samples) deltas.push_back(d); }, EngineClock::now());
  drain(s);
  ASSERT_EQ(deltas.size(), 1u);
  auto seq = model->new_sequence();
  Batch b;
  b.add(*seq, r.prompt);
  const std::vector<float> logits = model->forward(b, true);
  double z = 0;
  for (float l : logits) z += std::exp(double(l));
  const auto& d = deltas[0];
  ASSERT_EQ(d.top_logprobs[0].size(), 3u);
  EXPECT_EQ(d.top_logprobs[0][0].token, d.token_ids[0]);  // greedy picks the most likely
  for (const auto& t : d.top_logprobs[0]) EXPECT_NEAR(t.logprob, std::log(std::exp(double(logits[size_t(t.token)])) / z), 1e-5);
  EXPECT_GE(d.top_logprobs[0][0].logprob, d.top_logprobs[0][1].logprob);
  EXPECT_NEAR(d.logprobs[0].logprob, d.top_logprobs[0][0].logprob, 1e-6);
}

TEST_F(SchedulerTest, RejectsRequestsThatCanNeverRun) {
  auto model = load(/*blocks=*/8);
  EngineOptions o = defaults();
  o.max_model_len = 100;
  o.max_num_seqs = 4;
  Scheduler s(*model, nullptr, o);
  auto message = [&](const Request& r) {
    try {
      s.check(r);
    } catch (const ArgumentError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  Request r;
  EXPECT_NE(message(r).find("prompt: is empty"), std::string::npos);
  r.prompt = {1, 2, 97};
  EXPECT_NE(message(r).find("token id 97"), std::string::npos);
  r.prompt = prompt_of(90, 1);
  r.params.max_tokens = 20;
  EXPECT_NE(message(r).find("90 tokens + max_tokens 20 exceed max_model_len 100"), std::string::npos);
  r.params.max_tokens = 5;  // 94 tokens: 24 blocks of 4, the pool has 8
  EXPECT_NE(message(r).find("the whole memory pool has 8"), std::string::npos);
  r.prompt = prompt_of(8, 1);
  r.params.n = 5;
  EXPECT_NE(message(r).find("n: 5 samples exceed max_num_seqs 4"), std::string::npos);
  r.params.n = 1;
  r.params.stop = {"x"};
  EXPECT_NE(message(r).find("stop: stop strings need"), std::string::npos);
  r.params.stop.clear();
  r.params.sampling.top_p = 0;
  EXPECT_NE(message(r).find("top_p"), std::string::npos);
  r.params.sampling.top_p = 1;
  EXPECT_EQ(message(r), "");
}

}  // namespace
}  // namespace attnzoo
