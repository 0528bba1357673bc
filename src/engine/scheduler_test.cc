// The scheduler on a small random Llama: every request's tokens are checked against the single-sequence
// generation loop (generate() over ModelSequence, a separately loaded copy of the model) run alone, while the
// step reports are checked for the token budget, decode-first order, chunked prefill and preemption.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "core/error.h"
#include "engine/generate.h"
#include "engine/model_adapters.h"
#include "engine/ngram_proposer.h"
#include "models/model.h"
#include "testing/tiny_llama.h"

namespace attnzoo {
namespace {

struct Collected {
  std::map<int64_t, std::vector<int32_t>> tokens;
  std::map<int64_t, FinishReason> reasons;
  bool finished = false;
  int outputs = 0;
  Usage usage;
};

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override { testing::write_tiny_llama(dir_); }

  std::unique_ptr<Model> load(int64_t blocks = 0, int64_t block_tokens = 4) {
    LoadOptions o;
    o.pool.block_tokens = block_tokens;
    // 2 layers x (K + V) x block_tokens x 2 KV heads x 8 dims x 4 bytes per block.
    if (blocks > 0) o.pool.bytes = blocks * 2 * 2 * block_tokens * 2 * 8 * 4;
    return Model::load(dir_.str(), o);
  }

  EngineOptions defaults() const {
    EngineOptions o;
    o.eos_token_ids = eos_;
    return o;
  }

  // Speculation with `draft` proposing k tokens.
  EngineOptions drafting(const Model* draft, int64_t k) const {
    EngineOptions o = defaults();
    o.speculative.method = SpeculativeMethod::draft;
    o.speculative.num_speculative_tokens = k;
    o.draft_model = draft;
    return o;
  }

  // The reference: the request alone through the single-sequence loop.
  std::vector<int32_t> alone(const std::vector<int32_t>& prompt, const RequestParams& p, int64_t sample = 0) {
    if (!reference_) reference_ = load();
    ModelSequence seq(*reference_);
    GenerationOptions g;
    g.sampling = p.sampling;
    g.sampling.seed += uint64_t(sample);
    g.max_new_tokens = p.max_tokens;
    g.eos_token_ids = eos_;
    return generate(seq, prompt, g).tokens;
  }

  static std::vector<int32_t> prompt_of(int64_t length, int32_t salt) {
    std::vector<int32_t> ids;
    for (int64_t i = 0; i < length; ++i) ids.push_back(int32_t((i * 31 + salt * 17 + 3) % testing::kTinyLlamaVocab));
    return ids;
  }

  OutputCallback collect(Collected& c) {
    return [&c](RequestOutput&& out) {
      ++c.outputs;
      for (auto& s : out.samples) {
        auto& t = c.tokens[s.index];
        t.insert(t.end(), s.token_ids.begin(), s.token_ids.end());
        EXPECT_EQ(s.token_times.size(), s.token_ids.size());
        if (s.finish_reason) c.reasons[s.index] = *s.finish_reason;
      }
      EXPECT_FALSE(c.finished) << "output after the last one";
      c.finished = out.finished;
      c.usage = out.usage;
    };
  }

  static std::vector<StepReport> drain(Scheduler& s, int max_steps = 5000) {
    std::vector<StepReport> steps;
    while (s.has_work() && int(steps.size()) < max_steps) steps.push_back(s.step());
    EXPECT_FALSE(s.has_work()) << "the scheduler did not finish";
    return steps;
  }

  testing::ScratchDir dir_;
  std::unique_ptr<Model> reference_;
  std::vector<int32_t> eos_ = {63};  // a token this model often produces
};

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
  ASSERT_EQ(model->pool().stats().num_blocks, 24);
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
  const int64_t baseline = model->pool().stats().free_blocks;
  EngineOptions o = defaults();
  o.max_num_batched_tokens = 24;
  Scheduler s(*model, nullptr, o);
  std::vector<Collected> got(5);
  RequestParams p;
  p.max_tokens = 100;
  p.n = 2;
  for (int i = 0; i < 5; ++i) s.add(uint64_t(i + 1), {prompt_of(20 + 7 * i, i), p}, collect(got[size_t(i)]), EngineClock::now());
  for (int k = 0; k < 4; ++k) s.step();
  EXPECT_LT(model->pool().stats().free_blocks, baseline);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(s.abort(uint64_t(i + 1)));
  EXPECT_FALSE(s.abort(1));
  EXPECT_FALSE(s.has_work());
  EXPECT_EQ(model->pool().stats().free_blocks, baseline);
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
  const PoolStats before = model->pool().stats();
  s.step();  // prefill, fork, first token of each sample
  const PoolStats after = model->pool().stats();
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

namespace attnzoo {
namespace {

// Speculation inside the batch: greedy outputs equal each request alone, with n-gram lookup (guesses often
// refused: rollbacks) and with a copy of the target as its own draft (guesses kept: long accepted runs), also
// when a small pool preempts requests mid-way.
TEST_F(SchedulerTest, SpeculativeGreedyMatchesEachRequestAlone) {
  const auto draft = load();
  for (const auto method : {SpeculativeMethod::ngram, SpeculativeMethod::draft}) {
    for (const int64_t blocks : {int64_t(0), int64_t(28)}) {
      SCOPED_TRACE(std::string(method == SpeculativeMethod::ngram ? "ngram" : "draft") + " blocks " +
                   std::to_string(blocks));
      auto model = load(blocks);
      EngineOptions o = defaults();
      o.max_num_batched_tokens = 40;
      o.max_num_seqs = 6;
      o.speculative.method = method;
      o.speculative.num_speculative_tokens = 3;
      o.draft_model = draft.get();
      Scheduler s(*model, nullptr, o);
      const int N = 10;
      std::vector<Collected> got(N);
      std::vector<Request> reqs(N);
      for (int i = 0; i < N; ++i) {
        // A prompt that repeats itself gives prompt lookup something to find.
        std::vector<int32_t> p = prompt_of(4 + i % 5, i);
        for (int rep = 0; rep < 3; ++rep) p.insert(p.end(), p.begin(), p.begin() + 4 + i % 5);
        reqs[size_t(i)].prompt = p;
        reqs[size_t(i)].params.sampling.temperature = 0;
        reqs[size_t(i)].params.max_tokens = 10 + i % 7;
        s.check(reqs[size_t(i)]);
        s.add(uint64_t(i + 1), reqs[size_t(i)], collect(got[size_t(i)]), EngineClock::now());
      }
      const auto steps = drain(s);
      for (const auto& st : steps) EXPECT_LE(st.num_tokens, 40);
      for (int i = 0; i < N; ++i) {
        ASSERT_TRUE(got[size_t(i)].finished) << i;
        EXPECT_EQ(got[size_t(i)].tokens[0], alone(reqs[size_t(i)].prompt, reqs[size_t(i)].params)) << "request " << i;
        EXPECT_EQ(got[size_t(i)].usage.completion_tokens, int64_t(got[size_t(i)].tokens[0].size()));
      }
      const EngineStats st = s.stats();
      EXPECT_EQ(st.finished_requests, N);
      EXPECT_EQ(st.free_blocks, st.num_blocks);
      EXPECT_GT(st.speculative.draft_tokens, 0);
      EXPECT_GT(st.speculative.accepted_tokens, 0);
      if (method == SpeculativeMethod::ngram)
        EXPECT_LT(st.speculative.accepted_tokens, st.speculative.draft_tokens);
      else
        EXPECT_GT(st.speculative.accepted_tokens * 2, st.speculative.draft_tokens);
      // Fewer forward passes than sampled tokens after the first of each request: guesses were kept.
      int64_t decode_tokens = 0;
      for (auto& g : got) decode_tokens += int64_t(g.tokens[0].size()) - 1;
      EXPECT_LT(st.speculative.drafts, decode_tokens);
      if (blocks > 0) EXPECT_GT(st.preemptions, 0);
    }
  }
}

// A draft padded to another vocabulary size (one row more, one row less) serves the whole batch: no request
// fails, greedy outputs equal each request alone. The prompts hold 96, an id only the target has.
TEST_F(SchedulerTest, SpeculativeDraftWithAnotherVocabularySize) {
  auto model = load();
  for (int64_t vocab : {testing::kTinyLlamaVocab + 1, testing::kTinyLlamaVocab - 1}) {
    SCOPED_TRACE("draft vocab " + std::to_string(vocab));
    testing::ScratchDir draft_dir;
    testing::write_tiny_llama(draft_dir, 9, vocab);
    const auto draft = Model::load(draft_dir.str());
    Scheduler s(*model, nullptr, drafting(draft.get(), 3));
    const int N = 6;
    std::vector<Collected> got(N);
    std::vector<Request> reqs(N);
    for (int i = 0; i < N; ++i) {
      reqs[size_t(i)].prompt = prompt_of(6 + i, i);
      reqs[size_t(i)].prompt.push_back(96);
      reqs[size_t(i)].params.sampling.temperature = 0;
      reqs[size_t(i)].params.sampling.repetition_penalty = 1.1f;
      reqs[size_t(i)].params.max_tokens = 40;
      s.add(uint64_t(i + 1), reqs[size_t(i)], collect(got[size_t(i)]), EngineClock::now());
    }
    drain(s);
    for (int i = 0; i < N; ++i) {
      ASSERT_TRUE(got[size_t(i)].finished) << i;
      ASSERT_NE(got[size_t(i)].reasons[0], FinishReason::error) << i;
      EXPECT_EQ(got[size_t(i)].tokens[0], alone(reqs[size_t(i)].prompt, reqs[size_t(i)].params)) << "request " << i;
    }
    EXPECT_GT(s.stats().speculative.draft_tokens, 0);
  }
}

// Waiting and preempted requests hold no draft sequence: a draft pool with room for max_num_seqs sequences only
// serves every request (the same drafts as an ample one), with a small target pool preempting often, and ends
// empty.
TEST_F(SchedulerTest, SpeculativeDraftSequencesLiveOnlyWhileRunning) {
  const int64_t max_seqs = 4, B = 4, longest = 20 + 24 + 3;  // prompt + max_tokens + k
  std::map<int64_t, SpeculativeStats> seen;
  for (const int64_t draft_blocks : {int64_t(0), max_seqs * ((longest + B - 1) / B)}) {
    SCOPED_TRACE("draft blocks " + std::to_string(draft_blocks));
    auto model = load(13);
    auto draft = load(draft_blocks);
    EngineOptions o = drafting(draft.get(), 3);
    o.eos_token_ids = {};
    o.max_num_seqs = max_seqs;
    Scheduler s(*model, nullptr, o);
    const int N = 10;
    std::vector<Collected> got(N);
    std::vector<Request> reqs(N);
    for (int i = 0; i < N; ++i) {
      reqs[size_t(i)].prompt = prompt_of(12 + i % 9, i);
      reqs[size_t(i)].params.sampling.temperature = 0;
      reqs[size_t(i)].params.max_tokens = 24;
      s.add(uint64_t(i + 1), reqs[size_t(i)], collect(got[size_t(i)]), EngineClock::now());
    }
    // Only running samples hold draft sequences, each at most the blocks of its longest context.
    const int64_t per_seq = (longest + B - 1) / B;
    for (int step = 0; s.has_work() && step < 5000; ++step) {
      s.step();
      const PoolStats ds = draft->pool().stats();
      ASSERT_LE(ds.num_blocks - ds.free_blocks, s.stats().running_sequences * per_seq) << "step " << step;
    }
    for (int i = 0; i < N; ++i) {
      ASSERT_TRUE(got[size_t(i)].finished) << i;
      EXPECT_EQ(got[size_t(i)].tokens[0].size(), 24u) << i;
    }
    const EngineStats st = s.stats();
    EXPECT_GT(st.preemptions, 0);
    EXPECT_EQ(draft->pool().stats().free_blocks, draft->pool().stats().num_blocks);
    seen[draft_blocks] = st.speculative;
  }
  EXPECT_GT(seen.begin()->second.drafts, 0);
  EXPECT_EQ(seen.begin()->second.drafts, seen.rbegin()->second.drafts);
  EXPECT_EQ(seen.begin()->second.draft_tokens, seen.rbegin()->second.draft_tokens);
}

// A draft whose pool is full for a moment (a long prompt's draft holds most of it) costs the other request only
// those steps' guesses: once the long one finishes, the other speculates again.
TEST_F(SchedulerTest, SpeculativeDraftPoolFullOnlySkipsThoseSteps) {
  auto model = load();
  auto draft = load(11);  // a draft for the 36-token prompt (10 blocks), or for the short request alone
  eos_ = {};               // both run to max_tokens, here and in the reference
  Scheduler s(*model, nullptr, drafting(draft.get(), 3));
  Request a, b;
  a.prompt = prompt_of(36, 1);
  a.params.max_tokens = 3;
  b.prompt = prompt_of(8, 2);
  b.params.max_tokens = 30;
  for (Request* r : {&a, &b}) r->params.sampling.temperature = 0;
  Collected got_a, got_b;
  s.add(1, a, collect(got_a), EngineClock::now());
  s.add(2, b, collect(got_b), EngineClock::now());
  int64_t b_passes_with_guesses = 0;
  while (s.has_work()) {
    const StepReport report = s.step();
    for (const auto& c : report.chunks)
      if (c.request_id == 2 && got_a.finished && c.num_tokens > 1) ++b_passes_with_guesses;
  }
  ASSERT_TRUE(got_a.finished && got_b.finished);
  EXPECT_EQ(got_b.tokens[0], alone(b.prompt, b.params));
  EXPECT_GT(b_passes_with_guesses, 0);
  EXPECT_EQ(draft->pool().stats().free_blocks, draft->pool().stats().num_blocks);
}

// A self-draft keeps every guess; an EOS early in the run ends the request there and the guesses kept after it,
// never output, are not counted as accepted.
TEST_F(SchedulerTest, SpeculativeAcceptedCountsOnlyGuessesOutputBeforeEos) {
  auto model = load();
  Request req;
  req.prompt = prompt_of(10, 3);
  req.params.sampling.temperature = 0;
  req.params.max_tokens = 40;
  const std::vector<int32_t> want = alone(req.prompt, req.params);
  ASSERT_NE(want[0], want[1]);
  EngineOptions o = drafting(model.get(), 5);
  o.eos_token_ids = {want[1]};
  Scheduler s(*model, nullptr, o);
  Collected got;
  s.add(1, req, collect(got), EngineClock::now());
  drain(s);
  EXPECT_EQ(got.tokens[0], std::vector<int32_t>(want.begin(), want.begin() + 2));
  EXPECT_EQ(s.stats().speculative.draft_tokens, 5);
  EXPECT_EQ(s.stats().speculative.accepted_tokens, 1);
}

// Seeded sampling with speculation draws exactly what the single-sequence loop with the same proposer and seed
// draws: one algorithm, one stream of random numbers, however the step's batch is formed.
TEST_F(SchedulerTest, SpeculativeSeededSamplingMatchesTheGenerateLoop) {
  auto model = load();
  EngineOptions o = defaults();
  o.max_num_batched_tokens = 24;
  o.speculative.method = SpeculativeMethod::ngram;
  o.speculative.num_speculative_tokens = 3;
  Scheduler s(*model, nullptr, o);
  const int N = 6;
  std::vector<Collected> got(N);
  std::vector<Request> reqs(N);
  for (int i = 0; i < N; ++i) {
    std::vector<int32_t> p = prompt_of(5 + i, i);
    p.insert(p.end(), p.begin(), p.end());
    reqs[size_t(i)].prompt = p;
    reqs[size_t(i)].params.sampling.temperature = 0.7f;
    reqs[size_t(i)].params.sampling.top_p = 0.9f;
    reqs[size_t(i)].params.sampling.seed = uint64_t(100 + i);
    reqs[size_t(i)].params.max_tokens = 12 + i;
    s.add(uint64_t(i + 1), reqs[size_t(i)], collect(got[size_t(i)]), EngineClock::now());
  }
  drain(s);
  if (!reference_) reference_ = load();
  NgramProposer ngram(o.speculative.prompt_lookup_min, o.speculative.prompt_lookup_max);
  for (int i = 0; i < N; ++i) {
    ModelSequence seq(*reference_);
    GenerationOptions g;
    g.sampling = reqs[size_t(i)].params.sampling;
    g.max_new_tokens = reqs[size_t(i)].params.max_tokens;
    g.eos_token_ids = eos_;
    g.proposer = &ngram;
    g.num_speculative_tokens = 3;
    EXPECT_EQ(got[size_t(i)].tokens[0], generate(seq, reqs[size_t(i)].prompt, g).tokens) << "request " << i;
  }
  EXPECT_GT(s.stats().speculative.draft_tokens, 0);
}

}  // namespace
}  // namespace attnzoo
