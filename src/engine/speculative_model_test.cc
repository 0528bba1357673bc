// Speculative decoding on a real (tiny, random) Llama checkpoint: verification passes of k + 1 tokens and
// rollbacks of the paged cache must leave greedy output identical to plain decoding, with n-gram lookup and
// with a second random checkpoint as the draft; a rollback gives its blocks back to the pool.
#include <gtest/gtest.h>

#include "engine/draft_proposer.h"
#include "engine/generate.h"
#include "engine/model_adapters.h"
#include "engine/ngram_proposer.h"
#include "testing/tiny_llama.h"

namespace attnzoo {
namespace {

TEST(SpeculativeModel, GreedyMatchesPlainDecodingOver200Tokens) {
  testing::ScratchDir dir, draft_dir;
  testing::write_tiny_llama(dir);
  testing::write_tiny_llama(draft_dir, 8);
  const auto model = Model::load(dir.str());
  const auto draft_model = Model::load(draft_dir.str());
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

TEST(SpeculativeModel, RollbackFreesBlocksAndRecomputesNothingOnAttention) {
  testing::ScratchDir dir;
  testing::write_tiny_llama(dir);
  LoadOptions lo;
  lo.pool.block_tokens = 4;
  const auto model = Model::load(dir.str(), lo);
  const int64_t free0 = model->pool().stats().free_blocks;
  ModelSequence s(*model);
  std::vector<float> logits(size_t(model->info().vocab_size));
  s.append(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, logits);  // 2 blocks
  s.checkpoint();
  std::vector<float> rows(size_t(7 * model->info().vocab_size));
  s.append_all(std::vector<int32_t>{7, 8, 9, 10, 11, 12, 13}, rows);  // 13 tokens: 4 blocks
  EXPECT_EQ(model->pool().stats().free_blocks, free0 - 4);
  s.rollback(7);
  EXPECT_EQ(model->pool().stats().free_blocks, free0 - 2);
  // Back at 7 tokens: feeding the 8th again gives the logits the verification pass gave for it.
  s.append(std::vector<int32_t>{8}, logits);
  for (size_t i = 0; i < logits.size(); ++i) ASSERT_NEAR(logits[i], rows[size_t(model->info().vocab_size) + i], 1e-4);
  EXPECT_THROW(s.rollback(9), ArgumentError);  // longer than the sequence: named, nothing changed
  s.rollback(3);                                // attention alone needs no checkpoint to go back
  EXPECT_EQ(model->pool().stats().free_blocks, free0 - 1);
}

}  // namespace
}  // namespace attnzoo
