// Speculative decoding on a real (tiny, random) Llama checkpoint: verification passes of k + 1 tokens and
// rollbacks of the paged cache must leave greedy output identical to plain decoding, with n-gram lookup and
// with a second random checkpoint as the draft; a rollback gives its blocks back to the pool.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>

#include "engine/chi_square.h"
#include "engine/draft_proposer.h"
#include "engine/generate.h"
#include "engine/model_adapters.h"
#include "engine/ngram_proposer.h"
#include "engine/sampler_reference.h"
#include "testing/tiny_llama.h"

namespace attnzoo {
namespace {

// The target (seed 7) and an unrelated random checkpoint of the same shape (seed 8) as a draft.
class SpeculativeModel : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::write_tiny_llama(dir_);
    testing::write_tiny_llama(other_dir_, 8);
    model = Model::load(dir_.str());
    other = Model::load(other_dir_.str());
  }
  testing::ScratchDir dir_, other_dir_;
  std::unique_ptr<Model> model, other;
};

TEST_F(SpeculativeModel, GreedyMatchesPlainDecodingOver200Tokens) {
  const Model* draft_model = other.get();
  const std::vector<int32_t> prompt = {5, 17, 23, 5, 17, 40, 2, 5, 17};
  GenerationOptions o;
  o.sampling.temperature = 0;
  o.max_new_tokens = 200;
  std::vector<int32_t> want;
  {
    ModelSequence plain(*model);
    want = generate(plain, prompt, o).tokens;
  }
  ASSERT_EQ(want.size(), 200u);
  NgramProposer ngram(1, 3);
  for (int64_t k : {2, 5}) {
    for (bool use_draft : {false, true}) {
      ModelSequence target(*model), draft(*draft_model);
      DraftProposer drafter(draft, model->info().vocab_size);
      o.proposer = use_draft ? static_cast<Proposer*>(&drafter) : &ngram;
      o.num_speculative_tokens = k;
      const GenerationResult r = generate(target, prompt, o);
      EXPECT_EQ(r.tokens, want) << (use_draft ? "draft" : "ngram") << " k " << k;
      EXPECT_GT(r.speculative.draft_tokens, 0);
      EXPECT_LT(r.speculative.accepted_tokens, r.speculative.draft_tokens);  // rollbacks did happen
    }
  }
}

// A draft padded to another vocabulary size (one row more, one row less): guesses come only from the ids both
// hold, and a target token past the draft's table (96, in the prompt) neither reaches the draft's penalties nor
// its embedding; greedy output stays the target's.
TEST_F(SpeculativeModel, DraftWithAnotherVocabularySizeKeepsGreedyOutput) {
  const std::vector<int32_t> prompt = {5, 17, 96, 23, 5, 17, 40, 2, 5, 17};
  GenerationOptions o;
  o.sampling.temperature = 0;
  o.sampling.repetition_penalty = 1.1f;
  o.max_new_tokens = 120;
  std::vector<int32_t> want;
  {
    ModelSequence plain(*model);
    want = generate(plain, prompt, o).tokens;
  }
  for (int64_t vocab : {testing::kTinyLlamaVocab + 1, testing::kTinyLlamaVocab - 1}) {
    SCOPED_TRACE("draft vocab " + std::to_string(vocab));
    testing::ScratchDir draft_dir;
    testing::write_tiny_llama(draft_dir, 9, vocab);
    const auto draft_model = Model::load(draft_dir.str());
    ModelSequence target(*model), draft(*draft_model);
    DraftProposer drafter(draft, model->info().vocab_size);
    o.proposer = &drafter;
    o.num_speculative_tokens = 3;
    const GenerationResult r = generate(target, prompt, o);
    EXPECT_EQ(r.tokens, want);
    EXPECT_GT(r.speculative.draft_tokens, 0);
    // A guess is never an id the target lacks.
    Proposal p;
    Sampler sampler(o.sampling);
    for (int32_t start = 0; start < 60; ++start) {
      sampler.seek(start);
      drafter.propose(std::vector<int32_t>{start, int32_t(start * 7 % 90)}, 4, sampler, p);
      for (int32_t t : p.tokens) ASSERT_LT(t, model->info().vocab_size);
    }
  }
}

// The target drafting for itself keeps every guess; an EOS early in the run ends it there, and the guesses kept
// after it were never output: they are not counted as accepted.
TEST_F(SpeculativeModel, AcceptedCountsOnlyGuessesOutputBeforeEos) {
  const std::vector<int32_t> prompt = {54, 85, 19, 50, 81, 15, 46, 77, 11, 42};
  GenerationOptions o;
  o.sampling.temperature = 0;
  o.max_new_tokens = 40;
  std::vector<int32_t> want;
  {
    ModelSequence plain(*model);
    want = generate(plain, prompt, o).tokens;
  }
  // The first token that did not come before: with it as EOS, the first verification pass ends at it.
  size_t j = 1;
  while (j < want.size() && std::find(want.begin(), want.begin() + j, want[j]) != want.begin() + j) ++j;
  ASSERT_LE(j, 5u);
  o.eos_token_ids = {want[j]};
  ModelSequence target(*model), draft(*model);
  DraftProposer drafter(draft, model->info().vocab_size);
  o.proposer = &drafter;
  o.num_speculative_tokens = 5;
  const GenerationResult r = generate(target, prompt, o);
  EXPECT_EQ(r.tokens, std::vector<int32_t>(want.begin(), want.begin() + ptrdiff_t(j) + 1));
  EXPECT_EQ(r.speculative.draft_tokens, 5);
  EXPECT_EQ(r.speculative.accepted_tokens, int64_t(j));
}

TEST_F(SpeculativeModel, RollbackFreesBlocksAndRecomputesNothingOnAttention) {
  LoadOptions lo;
  lo.pool.block_tokens = 4;
  const auto blocks4 = Model::load(dir_.str(), lo);
  const int64_t free0 = blocks4->cache().stats().free_blocks;
  ModelSequence s(*blocks4);
  std::vector<float> logits(size_t(blocks4->info().vocab_size));
  s.append(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, logits);  // 2 blocks
  s.checkpoint();
  std::vector<float> rows(size_t(7 * blocks4->info().vocab_size));
  s.append_all(std::vector<int32_t>{7, 8, 9, 10, 11, 12, 13}, rows);  // 13 tokens: 4 blocks
  EXPECT_EQ(blocks4->cache().stats().free_blocks, free0 - 4);
  s.rollback(7);
  EXPECT_EQ(blocks4->cache().stats().free_blocks, free0 - 2);
  // Back at 7 tokens: feeding the 8th again gives the logits the verification pass gave for it.
  s.append(std::vector<int32_t>{8}, logits);
  for (size_t i = 0; i < logits.size(); ++i) ASSERT_NEAR(logits[i], rows[size_t(blocks4->info().vocab_size) + i], 1e-4);
  EXPECT_THROW(s.rollback(9), ArgumentError);  // longer than the sequence: named, nothing changed
  s.rollback(3);                                // attention alone needs no checkpoint to go back
  EXPECT_EQ(blocks4->cache().stats().free_blocks, free0 - 1);
}

// Sampling on the real model: the joint distribution of three new tokens (temperature 1.5, top-k 4, a repetition
// penalty; the first comes from the prompt's pass, the other two from one verification pass), enumerated from the
// model's own logits through the sampler reference, against 3000 seeded runs with each proposer: n-gram lookup,
// the target as its own draft (a second load), and an unrelated random checkpoint as the draft.
TEST_F(SpeculativeModel, SampledContinuationsFollowTheTargetDistribution) {
  const auto good_draft = Model::load(dir_.str());
  const Model* bad_draft = other.get();
  // The prompt is the model's own greedy chain: a sampled token has likely appeared in it, and prompt lookup then
  // guesses what the model itself put after it (often, not always, kept).
  std::vector<int32_t> prompt = {5, 17};
  {
    ModelSequence chain(*model);
    GenerationOptions g;
    g.sampling.temperature = 0;
    g.max_new_tokens = 40;
    const auto more = generate(chain, prompt, g).tokens;
    prompt.insert(prompt.end(), more.begin(), more.end());
  }
  SamplingParams p;
  p.temperature = 1.5f;
  p.top_k = 4;
  p.repetition_penalty = 1.1f;
  const int64_t V = model->info().vocab_size;
  std::map<std::vector<int32_t>, size_t> cell;
  std::vector<double> probs;
  std::vector<float> logits(static_cast<size_t>(V));
  std::function<void(std::vector<int32_t>&, double)> walk = [&](std::vector<int32_t>& ctx, double prob) {
    if (ctx.size() == prompt.size() + 3) {
      cell[std::vector<int32_t>(ctx.begin() + std::ptrdiff_t(prompt.size()), ctx.end())] = probs.size();
      probs.push_back(prob);
      return;
    }
    ModelSequence fresh(*model);
    fresh.append(ctx, logits);
    const auto next = sampling_distribution_reference(logits, ctx, p);
    for (int32_t t = 0; t < V; ++t) {
      if (next[size_t(t)] == 0) continue;
      ctx.push_back(t);
      walk(ctx, prob * next[size_t(t)]);
      ctx.pop_back();
    }
  };
  std::vector<int32_t> start = prompt;
  walk(start, 1.0);
  NgramProposer ngram(1, 2);
  for (const Model* draft : std::vector<const Model*>{nullptr, good_draft.get(), bad_draft}) {
    SCOPED_TRACE(draft == nullptr ? "ngram" : draft == good_draft.get() ? "self draft" : "bad draft");
    std::vector<int64_t> counts(probs.size(), 0);
    int64_t outside = 0, proposed = 0, accepted = 0;
    for (int i = 0; i < 3000; ++i) {
      ModelSequence target(*model);
      std::unique_ptr<ModelSequence> draft_seq;
      std::unique_ptr<DraftProposer> drafter;
      GenerationOptions o;
      o.sampling = p;
      o.sampling.seed = uint64_t(i) + 1;
      o.max_new_tokens = 3;
      o.num_speculative_tokens = 2;
      o.proposer = &ngram;
      if (draft) {
        draft_seq = std::make_unique<ModelSequence>(*draft);
        drafter = std::make_unique<DraftProposer>(*draft_seq, V);
        o.proposer = drafter.get();
      }
      const GenerationResult r = generate(target, prompt, o);
      ASSERT_EQ(r.tokens.size(), 3u);
      proposed += r.speculative.draft_tokens;
      accepted += r.speculative.accepted_tokens;
      const auto it = cell.find(r.tokens);
      if (it == cell.end()) ++outside; else ++counts[it->second];
    }
    EXPECT_EQ(outside, 0);
    EXPECT_GT(proposed, 500);  // at most one guess a run: the second new token, verified with the third's row
    if (draft == good_draft.get()) {
      EXPECT_GT(accepted, proposed * 9 / 10);  // q = p (up to rounding): guesses are kept
    } else {
      EXPECT_LT(accepted, proposed * 9 / 10);  // the rejection branch ran often
      if (!draft) EXPECT_GT(accepted, 0);      // n-gram guesses from the model's own chain are sometimes right
    }
    const ChiSquare fit = chi_square_fit(counts, probs);
    EXPECT_GT(fit.dof, 5);
    EXPECT_GT(fit.p_value, 1e-4) << "chi2 " << fit.statistic << " dof " << fit.dof;
  }
}

}  // namespace
}  // namespace attnzoo
