// Perplexity on a small random Llama against a plain computation of llama.cpp's definition: each window alone
// through Model::forward (every row's logits, a fresh sequence), log-softmax accumulated in double, the mean and
// error formulas written out. Every n_batch layout (windows in pieces, one per call, several side by side) must
// give the same numbers; the pool must be empty afterwards; bad options are named.
#include "engine/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/error.h"
#include "testing/tiny_llama.h"

namespace attnzoo {
namespace {

struct Reference {
  double ppl, error;
  std::vector<double> running;
};

Reference plain_perplexity(const Model& model, const std::vector<int32_t>& ids, int64_t c, std::optional<int32_t> bos,
                           int64_t chunks) {
  const int64_t V = model.info().vocab_size, first = c / 2;
  std::vector<double> nll;
  Reference r{};
  for (int64_t w = 0; w < chunks; ++w) {
    std::vector<int32_t> window(ids.begin() + w * c, ids.begin() + (w + 1) * c);
    if (bos) window[0] = *bos;
    const auto seq = model.new_sequence();
    Batch batch;
    batch.add(*seq, window);
    const std::vector<float> logits = model.forward(batch);
    for (int64_t j = first; j < c - 1; ++j) {
      const float* row = logits.data() + j * V;
      double z = 0;
      for (int64_t v = 0; v < V; ++v) z += std::exp(double(row[v]));
      nll.push_back(std::log(z) - double(row[ids[size_t(w * c + j + 1)]]));
    }
    double sum = 0;
    for (double x : nll) sum += x;
    r.running.push_back(std::exp(sum / double(nll.size())));
  }
  double mean = 0, var = 0;
  for (double x : nll) mean += x / double(nll.size());
  for (double x : nll) var += (x - mean) * (x - mean) / double(nll.size());
  r.ppl = std::exp(mean);
  r.error = r.ppl * std::sqrt(var / double(nll.size() - 1));
  return r;
}

class PerplexityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::write_tiny_llama(dir_);
    LoadOptions o;
    o.pool.block_tokens = 4;
    model_ = Model::load(dir_.str(), o);
    std::mt19937 rng(11);
    std::uniform_int_distribution<int32_t> id(0, int32_t(testing::kTinyLlamaVocab) - 1);
    for (int i = 0; i < 5 * 24 + 9; ++i) ids_.push_back(id(rng));
  }
  testing::ScratchDir dir_;
  std::unique_ptr<Model> model_;
  std::vector<int32_t> ids_;
};

TEST_F(PerplexityTest, EveryBatchLayoutMatchesWindowsRunAlone) {
  for (std::optional<int32_t> bos : {std::optional<int32_t>(), std::optional<int32_t>(5)}) {
    const Reference want = plain_perplexity(*model_, ids_, 24, bos, 5);
    for (int64_t n_batch : {int64_t(7), int64_t(24), int64_t(48), int64_t(2048)}) {
      PerplexityOptions o;
      o.n_ctx = 24;
      o.n_batch = n_batch;
      o.bos = bos;
      int calls = 0;
      const PerplexityResult r = perplexity(*model_, ids_, o, [&](const PerplexityResult& so_far) {
        ++calls;
        EXPECT_EQ(so_far.running_ppl.size(), size_t(calls));
      });
      EXPECT_EQ(calls, 5);
      ASSERT_EQ(r.running_ppl.size(), want.running.size());
      for (size_t i = 0; i < want.running.size(); ++i)
        EXPECT_NEAR(r.running_ppl[i], want.running[i], 1e-4 * want.running[i]) << "n_batch " << n_batch << " window " << i;
      EXPECT_NEAR(r.ppl, want.ppl, 1e-4 * want.ppl);
      EXPECT_NEAR(r.ppl_error, want.error, 1e-3 * want.error);
      EXPECT_EQ(r.n_scored, 5 * (24 - 1 - 12));
      EXPECT_EQ(r.n_tokens, int64_t(ids_.size()));
      const PoolStats s = model_->cache().stats();
      EXPECT_EQ(s.free_blocks, s.num_blocks);  // every window's sequence was freed (cached blocks count as free)
    }
  }
}

TEST_F(PerplexityTest, ChunksLimitTheWindows) {
  PerplexityOptions o;
  o.n_ctx = 24;
  o.n_chunks = 2;
  const PerplexityResult r = perplexity(*model_, ids_, o);
  const Reference want = plain_perplexity(*model_, ids_, 24, std::nullopt, 2);
  ASSERT_EQ(r.running_ppl.size(), 2u);
  EXPECT_NEAR(r.ppl, want.ppl, 1e-4 * want.ppl);
  o.n_chunks = 1000;  // more than the text holds: every whole window
  EXPECT_EQ(perplexity(*model_, ids_, o).running_ppl.size(), 5u);
}

TEST_F(PerplexityTest, BadOptionsAreNamed) {
  auto expect_error = [&](PerplexityOptions o, std::span<const int32_t> ids, const std::string& start) {
    try {
      perplexity(*model_, ids, o);
      ADD_FAILURE() << "no error for " << start;
    } catch (const ArgumentError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(start, 0), 0u) << e.what();
    }
  };
  PerplexityOptions o;
  o.n_ctx = 24;
  o.source = "-f: book.txt";
  expect_error(o, std::span(ids_).first(47), "-f: book.txt: tokenizes to 47 tokens; perplexity with a window (-c) of 24 "
                                              "needs at least 2 * 24 = 48 tokens");
  o.n_ctx = 3;
  expect_error(o, ids_, "n_ctx: the window (-c) must be at least 4");
  o.n_ctx = 1024;  // the tiny model's context is 512
  expect_error(o, std::vector<int32_t>(2048, 1), "n_ctx: the window (-c) of 1024 tokens is longer than the model's");
  o.n_ctx = 24;
  o.n_batch = 0;
  expect_error(o, ids_, "n_batch:");
  o.n_batch = 64;
  o.n_chunks = 0;
  expect_error(o, ids_, "n_chunks:");
  o.n_chunks = -1;
  o.bos = 97;
  expect_error(o, ids_, "bos: id 97 outside the vocabulary");
  o.bos.reset();
  std::vector<int32_t> bad = ids_;
  bad[30] = -2;
  expect_error(o, bad, "tokens: -f: book.txt: token 30 is id -2");
}

TEST(PerplexityError, IsLlamaCppsStandardErrorTimesPpl) {
  // -log p of 1, 2, 3: mean 2, population variance 2/3, error e^2 * sqrt((2/3) / 2).
  PerplexityResult r;
  finish_perplexity(r, 6.0, 14.0, 3);
  EXPECT_DOUBLE_EQ(r.ppl, std::exp(2.0));
  EXPECT_NEAR(r.ppl_error, std::exp(2.0) * std::sqrt(1.0 / 3.0), 1e-12);
  finish_perplexity(r, 3.0, 3.0, 3);  // no spread: no estimate
  EXPECT_TRUE(std::isnan(r.ppl_error));
}

}  // namespace
}  // namespace attnzoo
