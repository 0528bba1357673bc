// The scheduler's sampling of a step (Scheduler::sample_step): the plain rows of every request in one sample_rows
// call over the step's logits, the logprobs and speculative rows on the host. Steps that mix greedy rows, seeded
// temperature / top-k / top-p / min-p draws, penalties, logprobs rows, the n = 2 samples forked from one prompt's
// row and speculative verification rows must give every request the tokens (and logprobs) it gets alone from the
// single-sequence generation loop; a row the sampler refuses fails its request and no other.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "engine/logprobs.h"
#include "engine/ngram_proposer.h"
#include "engine/scheduler_test_fixture.h"

namespace attnzoo {
namespace {

using scheduler_testing::SchedulerTest;

// Everything a request streamed, per sample.
struct Streamed {
  std::map<int64_t, std::vector<int32_t>> tokens;
  std::map<int64_t, std::vector<TokenLogprob>> logprobs;
  std::map<int64_t, std::vector<std::vector<TokenLogprob>>> top_logprobs;
  std::map<int64_t, FinishReason> reasons;
  std::string error;
  bool finished = false;
};

OutputCallback stream_into(Streamed& s) {
  return [&s](RequestOutput&& out) {
    for (auto& d : out.samples) {
      auto& t = s.tokens[d.index];
      t.insert(t.end(), d.token_ids.begin(), d.token_ids.end());
      auto& l = s.logprobs[d.index];
      l.insert(l.end(), d.logprobs.begin(), d.logprobs.end());
      auto& top = s.top_logprobs[d.index];
      top.insert(top.end(), d.top_logprobs.begin(), d.top_logprobs.end());
      if (d.finish_reason) s.reasons[d.index] = *d.finish_reason;
    }
    s.error = out.error;
    s.finished = out.finished;
  };
}

SamplingParams seeded(float temperature, uint64_t seed) {
  SamplingParams p;
  p.temperature = temperature;
  p.seed = seed;
  return p;
}

class SchedulerSamplingTest : public SchedulerTest {
 protected:
  // No EOS: every sample runs its max_tokens, so the steps stay mixed to the end.
  void SetUp() override {
    SchedulerTest::SetUp();
    eos_.clear();
  }

  // One request of each kind a step can hold (n = 2 forks included), all different prompts.
  static std::vector<Request> mixed_requests() {
    std::vector<RequestParams> kinds;
    auto add = [&](SamplingParams sp, int64_t max_tokens, int64_t n = 1, bool logprobs = false, int64_t top = 0) {
      RequestParams p;
      p.sampling = sp;
      p.max_tokens = max_tokens;
      p.n = n;
      p.logprobs = logprobs;
      p.top_logprobs = top;
      kinds.push_back(p);
    };
    add(seeded(0.f, 0), 9);                  // greedy
    add(seeded(0.8f, 11), 10);               // plain temperature draw
    SamplingParams k = seeded(1.1f, 12);
    k.top_k = 5;
    add(k, 8);
    SamplingParams nucleus = seeded(0.9f, 13);
    nucleus.top_p = 0.8f;
    nucleus.min_p = 0.02f;
    add(nucleus, 11);
    SamplingParams penalised = seeded(0.7f, 14);
    penalised.repetition_penalty = 1.3f;
    penalised.presence_penalty = 0.5f;
    penalised.frequency_penalty = 0.3f;
    add(penalised, 12);
    SamplingParams greedy_penalised = seeded(0.f, 0);
    greedy_penalised.repetition_penalty = 1.5f;
    add(greedy_penalised, 10);
    add(seeded(1.f, 15), 7, 1, /*logprobs=*/true, 3);   // a logprobs row: sampled on the host
    SamplingParams forked = seeded(1.2f, 16);
    forked.top_k = 12;
    forked.frequency_penalty = 0.4f;
    add(forked, 9, 2);                                   // two samples reading the prompt's one row
    add(seeded(0.f, 0), 6, 2, /*logprobs=*/true, 2);     // a fork whose shared row is a logprobs row
    std::vector<Request> reqs;
    for (size_t i = 0; i < kinds.size(); ++i)
      reqs.push_back({prompt_of(3 + int64_t(i) * 5 % 17, int32_t(i) + 40), kinds[i]});
    return reqs;
  }

  // The logprobs the request alone reports for `tokens`: each row of the model over the prompt and the tokens so
  // far, as a separately loaded copy computes it.
  std::vector<RowLogprobs> logprobs_alone(const std::vector<int32_t>& prompt, const std::vector<int32_t>& tokens,
                                          int64_t top) {
    if (!reference_) reference_ = load();
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), tokens.begin(), tokens.end());
    auto seq = reference_->new_sequence();
    Batch b;
    b.add(*seq, all);
    const std::vector<float> logits = reference_->forward(b);
    const size_t V = size_t(testing::kTinyLlamaVocab);
    std::vector<RowLogprobs> out;
    for (size_t j = 0; j < tokens.size(); ++j)
      out.push_back(row_logprobs(std::span(logits.data() + (prompt.size() - 1 + j) * V, V), tokens[j], top));
    return out;
  }

  void expect_logprobs(const Request& r, const Streamed& got, int64_t sample) {
    const std::vector<int32_t>& tokens = got.tokens.at(sample);
    const std::vector<RowLogprobs> want = logprobs_alone(r.prompt, tokens, r.params.top_logprobs);
    ASSERT_EQ(got.logprobs.at(sample).size(), tokens.size());
    ASSERT_EQ(got.top_logprobs.at(sample).size(), tokens.size());
    for (size_t j = 0; j < tokens.size(); ++j) {
      EXPECT_EQ(got.logprobs.at(sample)[j].token, tokens[j]);
      EXPECT_NEAR(got.logprobs.at(sample)[j].logprob, want[j].chosen, 1e-5) << "token " << j;
      ASSERT_EQ(got.top_logprobs.at(sample)[j].size(), size_t(r.params.top_logprobs));
      for (size_t t = 0; t < want[j].top.size(); ++t) {
        EXPECT_EQ(got.top_logprobs.at(sample)[j][t].token, want[j].top[t].token) << "token " << j << " top " << t;
        EXPECT_NEAR(got.top_logprobs.at(sample)[j][t].logprob, want[j].top[t].logprob, 1e-5);
      }
    }
  }
};

TEST_F(SchedulerSamplingTest, MixedRowsInOneStepMatchEachRequestAlone) {
  auto model = load();
  EngineOptions o = defaults();
  o.max_num_batched_tokens = 256;  // every prompt in the first step, then every sample decodes in each step
  o.max_num_seqs = 16;
  Scheduler s(*model, nullptr, o);
  const std::vector<Request> reqs = mixed_requests();
  std::vector<Streamed> got(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    s.check(reqs[i]);
    s.add(uint64_t(i + 1), reqs[i], stream_into(got[i]), EngineClock::now());
  }
  const auto steps = drain(s);
  // The steps really mixed the kinds: the first decode step holds a row of every sample.
  ASSERT_GE(steps.size(), 2u);
  EXPECT_EQ(steps[0].admitted.size(), reqs.size());
  EXPECT_EQ(steps[1].chunks.size(), reqs.size() + 2);  // the two forked requests decode two samples each
  for (size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    ASSERT_TRUE(got[i].finished);
    EXPECT_EQ(got[i].error, "");
    ASSERT_EQ(int64_t(got[i].tokens.size()), reqs[i].params.n);
    for (int64_t n = 0; n < reqs[i].params.n; ++n) {
      EXPECT_EQ(got[i].tokens[n], alone(reqs[i].prompt, reqs[i].params, n)) << "sample " << n;
      EXPECT_EQ(int64_t(got[i].tokens[n].size()), reqs[i].params.max_tokens);  // no EOS: every step stays mixed
      if (reqs[i].params.logprobs) expect_logprobs(reqs[i], got[i], n);
      else EXPECT_TRUE(got[i].logprobs[n].empty());
    }
  }
  // The forked samples drew apart (their own seeds), the greedy fork did not.
  EXPECT_NE(got[7].tokens[0], got[7].tokens[1]);
  EXPECT_EQ(got[8].tokens[0], got[8].tokens[1]);
}

TEST_F(SchedulerSamplingTest, SpeculativeRowsBesidePlainAndLogprobsRowsMatchTheGenerateLoop) {
  auto model = load();
  EngineOptions o = defaults();
  o.max_num_batched_tokens = 256;
  o.max_num_seqs = 16;
  o.speculative.method = SpeculativeMethod::ngram;
  o.speculative.num_speculative_tokens = 3;
  Scheduler s(*model, nullptr, o);
  // Self-repeating prompts give prompt lookup guesses; the mixed ones mostly do not, and every sample's last
  // token is a plain row (no room for guesses), so steps hold verification rows beside plain and logprobs rows.
  std::vector<Request> reqs = mixed_requests();
  for (int i = 0; i < 3; ++i) {
    Request r;
    r.prompt = prompt_of(6 + i, 70 + i);
    r.prompt.insert(r.prompt.end(), r.prompt.begin(), r.prompt.end());
    r.params.sampling = seeded(i == 0 ? 0.f : 0.8f, uint64_t(30 + i));
    r.params.max_tokens = 10;
    r.params.logprobs = i == 2;
    r.params.top_logprobs = i == 2 ? 1 : 0;
    reqs.push_back(r);
  }
  std::vector<Streamed> got(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) s.add(uint64_t(i + 1), reqs[i], stream_into(got[i]), EngineClock::now());
  drain(s);
  EXPECT_GT(s.stats().speculative.draft_tokens, 0);
  if (!reference_) reference_ = load();
  NgramProposer ngram(o.speculative.prompt_lookup_min, o.speculative.prompt_lookup_max);
  for (size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    ASSERT_TRUE(got[i].finished);
    EXPECT_EQ(got[i].error, "");
    for (int64_t n = 0; n < reqs[i].params.n; ++n) {
      ModelSequence seq(*reference_);
      GenerationOptions g;
      g.sampling = reqs[i].params.sampling;
      g.sampling.seed += uint64_t(n);
      g.max_new_tokens = reqs[i].params.max_tokens;
      g.proposer = &ngram;
      g.num_speculative_tokens = 3;
      EXPECT_EQ(got[i].tokens[n], generate(seq, reqs[i].prompt, g).tokens) << "sample " << n;
      if (reqs[i].params.logprobs) expect_logprobs(reqs[i], got[i], n);
    }
  }
}

// vLLM's rule in plain and speculative rows and in the generation loop alike: presence and frequency penalties
// count the generated tokens only, the repetition penalty the prompt's too. The reference applies that rule by hand
// to the model's rows (the prompts repeat themselves, so counting their tokens would move the greedy choices).
TEST_F(SchedulerSamplingTest, PresenceAndFrequencyPenaltiesCountOnlyGeneratedTokens) {
  auto model = load();
  if (!reference_) reference_ = load();
  const size_t V = size_t(testing::kTinyLlamaVocab);
  std::vector<Request> reqs;
  std::vector<std::vector<int32_t>> want;
  for (int i = 0; i < 6; ++i) {
    Request r;
    r.prompt = prompt_of(6 + i, 90 + i);
    r.prompt.insert(r.prompt.end(), r.prompt.begin(), r.prompt.end());
    r.params.sampling = seeded(0.f, 0);
    r.params.sampling.presence_penalty = 1.5f;
    r.params.sampling.frequency_penalty = 0.5f;
    r.params.sampling.repetition_penalty = i % 2 ? 1.3f : 1.f;
    r.params.max_tokens = 8;
    std::vector<int32_t> all = r.prompt, tokens;
    while (int64_t(tokens.size()) < r.params.max_tokens) {
      auto seq = reference_->new_sequence();
      Batch b;
      b.add(*seq, all);
      const std::vector<float> logits = reference_->forward(b);
      std::vector<float> row(logits.end() - std::ptrdiff_t(V), logits.end());
      apply_penalties(row.data(), int64_t(V), all, int64_t(r.prompt.size()), r.params.sampling);
      const int32_t id = int32_t(std::max_element(row.begin(), row.end()) - row.begin());
      tokens.push_back(id);
      all.push_back(id);
    }
    reqs.push_back(r);
    want.push_back(tokens);
  }
  for (const bool speculate : {false, true}) {
    SCOPED_TRACE(speculate ? "ngram speculation" : "no speculation");
    EngineOptions o = defaults();
    if (speculate) {
      o.speculative.method = SpeculativeMethod::ngram;
      o.speculative.num_speculative_tokens = 3;
    }
    Scheduler s(*model, nullptr, o);
    std::vector<Streamed> got(reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i) s.add(uint64_t(i + 1), reqs[i], stream_into(got[i]), EngineClock::now());
    drain(s);
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(got[i].tokens[0], want[i]) << "request " << i;
      if (!speculate) EXPECT_EQ(alone(reqs[i].prompt, reqs[i].params), want[i]) << "request " << i;
    }
    if (speculate) EXPECT_GT(s.stats().speculative.draft_tokens, 0);
  }
}

TEST_F(SchedulerSamplingTest, ARowTheSamplerRefusesFailsOnlyItsRequest) {
  auto model = load();
  Scheduler s(*model, nullptr, defaults());
  std::vector<Request> reqs = mixed_requests();
  Request bad;
  bad.prompt = prompt_of(9, 5);
  bad.params.sampling = seeded(1e-44f, 3);  // 1 / temperature is +inf: the scaled logits overflow
  bad.params.max_tokens = 4;
  reqs.insert(reqs.begin() + 2, bad);
  std::vector<Streamed> got(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) s.add(uint64_t(i + 1), reqs[i], stream_into(got[i]), EngineClock::now());
  drain(s);
  EXPECT_EQ(got[2].error, "sampling failed: temperature: is so small that the scaled logits overflow");
  EXPECT_EQ(got[2].reasons[0], FinishReason::error);
  EXPECT_TRUE(got[2].tokens[0].empty());
  EXPECT_EQ(s.stats().failed_requests, 1);
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (i == 2) continue;
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_EQ(got[i].error, "");
    for (int64_t n = 0; n < reqs[i].params.n; ++n)
      EXPECT_EQ(got[i].tokens[n], alone(reqs[i].prompt, reqs[i].params, n)) << "sample " << n;
  }
}

}  // namespace
}  // namespace attnzoo
