// Speculative decoding inside the serving scheduler: greedy outputs equal each request alone (n-gram lookup and
// draft models, under preemption too), draft sequences live only while their request runs, and the acceptance
// counters count only the tokens output.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/ngram_proposer.h"
#include "engine/scheduler_test_fixture.h"
#include "testing/tiny_hybrid.h"

namespace attnzoo {
namespace {

using scheduler_testing::Collected;
using scheduler_testing::SchedulerTest;

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
      const PoolStats ds = draft->cache().stats();
      ASSERT_LE(ds.num_blocks - ds.free_blocks, s.stats().running_sequences * per_seq) << "step " << step;
    }
    for (int i = 0; i < N; ++i) {
      ASSERT_TRUE(got[size_t(i)].finished) << i;
      EXPECT_EQ(got[size_t(i)].tokens[0].size(), 24u) << i;
    }
    const EngineStats st = s.stats();
    EXPECT_GT(st.preemptions, 0);
    EXPECT_EQ(draft->cache().stats().free_blocks, draft->cache().stats().num_blocks);
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
  EXPECT_EQ(draft->cache().stats().free_blocks, draft->cache().stats().num_blocks);
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

// Seeded sampling with n-gram speculation, six requests sharing steps, draws exactly what the single-sequence loop
// draws for the same seed without any speculation: each token is its position's keyed draw, however many guesses
// the step's budget left room for.
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
    reqs[size_t(i)].params.sampling.temperature = i % 2 ? 0.7f : 0.2f;  // cool rows keep some guesses
    reqs[size_t(i)].params.sampling.top_p = 0.9f;
    reqs[size_t(i)].params.sampling.seed = uint64_t(100 + i);
    reqs[size_t(i)].params.max_tokens = 24 + i;
    s.add(uint64_t(i + 1), reqs[size_t(i)], collect(got[size_t(i)]), EngineClock::now());
  }
  drain(s);
  if (!reference_) reference_ = load();
  for (int i = 0; i < N; ++i) {
    ModelSequence seq(*reference_);
    GenerationOptions g;
    g.sampling = reqs[size_t(i)].params.sampling;
    g.max_new_tokens = reqs[size_t(i)].params.max_tokens;
    g.eos_token_ids = eos_;
    EXPECT_EQ(got[size_t(i)].tokens[0], generate(seq, reqs[size_t(i)].prompt, g).tokens) << "request " << i;
  }
  const auto& spec = s.stats().speculative;
  EXPECT_GT(spec.accepted_tokens, 0);
  EXPECT_GT(spec.draft_tokens, spec.accepted_tokens);
}

// A prompt one token longer than a step leaves its last token for the next step, which plans like a decode. With
// n > 1 that row must still fork the samples (each draws its own first token) rather than carry guesses: guesses
// verified there would be committed to sample 0 alone and copied into the others. With n = 1 the same row may
// carry guesses (there is nothing to fork).
TEST_F(SchedulerTest, SpeculativeParallelSamplesForkBeforeGuessing) {
  EngineOptions o = defaults();
  o.eos_token_ids = {};
  eos_ = {};
  o.max_num_batched_tokens = 16;
  o.speculative.method = SpeculativeMethod::ngram;
  o.speculative.num_speculative_tokens = 3;
  std::vector<int32_t> base = prompt_of(4, 5), prompt;
  while (int64_t(prompt.size()) < o.max_num_batched_tokens + 1) prompt.push_back(base[prompt.size() % base.size()]);
  for (const int64_t n : {int64_t(2), int64_t(1)}) {
    SCOPED_TRACE("n " + std::to_string(n));
    auto model = load();  // its own pool: no cached prefix from the other run
    Scheduler s(*model, nullptr, o);
    Request r;
    r.prompt = prompt;
    r.params.n = n;
    r.params.max_tokens = 8;
    r.params.sampling.temperature = 0;
    Collected got;
    s.add(1, r, collect(got), EngineClock::now());
    const auto steps = drain(s);
    ASSERT_GE(steps.size(), 2u);
    ASSERT_EQ(steps[1].chunks.size(), 1u);
    // The step that runs the prompt's last token: a plain row for the fork, or the pending token with guesses.
    if (n > 1)
      EXPECT_EQ(steps[1].chunks[0].num_tokens, 1);
    else
      EXPECT_GT(steps[1].chunks[0].num_tokens, 1);
    ASSERT_TRUE(got.finished);
    const std::vector<int32_t> want = alone(r.prompt, r.params);
    ASSERT_EQ(got.tokens.size(), size_t(n));
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(got.reasons[i], FinishReason::length) << "sample " << i;
      EXPECT_EQ(got.tokens[i], want) << "sample " << i;
    }
    EXPECT_EQ(got.usage.completion_tokens, n * r.params.max_tokens);
  }
}

// A small hybrid (Nemotron-H: a Mamba-2 layer and an attention layer): every running sequence holds a recurrent-
// state slot, and so does each speculation checkpoint.
std::unique_ptr<Model> load_tiny_hybrid(const testing::ScratchDir& dir, int64_t state_slots, int64_t block_tokens) {
  testing::write_tiny_hybrid(dir, {.architecture = "NemotronHForCausalLM", .pattern = "M*", .dtype = "F32"});
  LoadOptions o;
  o.pool.max_sequences = state_slots;
  o.pool.block_tokens = block_tokens;
  o.pool.prefix_caching = false;  // no snapshot slots: checkpoints come from the running slots
  return Model::load(dir.str(), o);
}

// Admission sets state slots aside for the forks of an unforked request (n > 1). A speculating request's checkpoint
// in the same step must not take them: here B's checkpoint would take one of the two slots A's prompt (finishing in
// that step) forks into. B loses that step's guesses instead, and A's three samples all run.
TEST_F(SchedulerTest, SpeculativeCheckpointLeavesTheSlotsOfPendingForks) {
  testing::ScratchDir dir;
  auto model = load_tiny_hybrid(dir, 4, 4);
  ASSERT_TRUE(model->cache().has_state());
  ASSERT_EQ(model->cache().stats().state_slots, 4);
  ASSERT_EQ(model->cache().stats().snapshot_slots, 0);
  EngineOptions o = defaults();
  o.eos_token_ids = {};
  o.max_num_seqs = 4;
  o.max_num_batched_tokens = 16;
  o.speculative.method = SpeculativeMethod::ngram;
  o.speculative.num_speculative_tokens = 3;
  Scheduler s(*model, nullptr, o);
  // B's prompt leaves its last token for the second step, where prompt lookup has guesses for it.
  Request b, a;
  const std::vector<int32_t> base = prompt_of(4, 5);
  while (int64_t(b.prompt.size()) < o.max_num_batched_tokens + 1) b.prompt.push_back(base[b.prompt.size() % 4]);
  b.params.max_tokens = 6;
  b.params.sampling.temperature = 0;
  a.prompt = prompt_of(6, 2);
  a.params.n = 3;
  a.params.max_tokens = 4;
  a.params.sampling.temperature = 0;
  Collected got_a, got_b;
  s.add(1, b, collect(got_b), EngineClock::now());
  s.step();
  s.add(2, a, collect(got_a), EngineClock::now());
  const StepReport second = s.step();
  ASSERT_EQ(second.admitted, std::vector<uint64_t>{2});
  drain(s);
  ASSERT_TRUE(got_a.finished && got_b.finished);
  ASSERT_EQ(got_a.reasons.size(), 3u);
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(got_a.reasons[i], FinishReason::length) << "sample " << i;
    EXPECT_EQ(got_a.tokens[i].size(), 4u) << "sample " << i;
    EXPECT_EQ(got_a.tokens[i], got_a.tokens[0]) << "greedy samples agree";
  }
  EXPECT_EQ(got_b.reasons[0], FinishReason::length);
  EXPECT_EQ(got_b.tokens[0].size(), 6u);
  EXPECT_EQ(model->cache().stats().free_state_slots, 4);
}

// On a hybrid a rejected guess rolls back to the checkpoint and recomputes the kept tokens inside the verification.
// When the pass ended on a block boundary (prefix caching registered that block) the rollback lands inside it:
// with the pool full (a pool just big enough for the request), the recompute must write it in place, not need a
// free block for a copy. Requests of several lengths put that boundary at different steps.
TEST_F(SchedulerTest, SpeculativeRollbackIntoACachedBlockInAFullPool) {
  testing::ScratchDir dir;
  const int64_t B = 4;
  testing::write_tiny_hybrid(dir, {.architecture = "NemotronHForCausalLM", .pattern = "M*", .dtype = "F32"});
  LoadOptions lo;
  lo.pool.max_sequences = 2;
  lo.pool.block_tokens = B;
  const CacheGeometry g = Model::load(dir.str(), lo)->cache().geometry();
  std::vector<int32_t> prompt;
  const std::vector<int32_t> base = prompt_of(3, 7);
  while (prompt.size() < 9) prompt.push_back(base[prompt.size() % 3]);
  int64_t drafts = 0;
  for (int64_t max_tokens = 12; max_tokens <= 40; max_tokens += 4) {
    SCOPED_TRACE("max_tokens " + std::to_string(max_tokens));
    // A pool of exactly the request's blocks: a quarter of what the running slots leave goes to snapshots.
    const int64_t want = (int64_t(prompt.size()) + max_tokens - 1 + B - 1) / B;
    int64_t bytes = g.running_slots * g.slot_bytes + want * g.block_bytes;
    std::unique_ptr<Model> model;
    for (int tries = 0; tries < 200; ++tries, bytes += g.block_bytes / 8) {
      lo.pool.bytes = bytes;
      model = Model::load(dir.str(), lo);
      if (model->cache().stats().num_blocks >= want) break;
    }
    ASSERT_EQ(model->cache().stats().num_blocks, want);
    EngineOptions o = defaults();
    o.eos_token_ids = {};
    o.max_num_seqs = 1;
    o.speculative.method = SpeculativeMethod::ngram;
    o.speculative.num_speculative_tokens = 2;
    Scheduler s(*model, nullptr, o);
    Request r;
    r.prompt = prompt;
    r.params.max_tokens = max_tokens;
    r.params.sampling.temperature = 0;
    s.check(r);
    Collected got;
    s.add(1, r, collect(got), EngineClock::now());
    drain(s);
    ASSERT_TRUE(got.finished);
    EXPECT_EQ(got.reasons[0], FinishReason::length);
    EXPECT_EQ(int64_t(got.tokens[0].size()), max_tokens);
    drafts += s.stats().speculative.drafts;
  }
  EXPECT_GT(drafts, 0);
}

}  // namespace
}  // namespace attnzoo
