#pragma once
// The scheduler tests' fixture: a small random Llama on disk, loaded with a pool of a chosen size, and the reference
// every request is checked against (the single-sequence generation loop over a separately loaded copy).
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <vector>

#include "engine/generate.h"
#include "engine/model_adapters.h"
#include "engine/scheduler.h"
#include "models/model.h"
#include "testing/tiny_llama.h"

namespace attnzoo::scheduler_testing {

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
    g.min_new_tokens = p.min_tokens;
    g.eos_token_ids = eos_;  // stop ids end (and are banned) as EOS does
    g.eos_token_ids.insert(g.eos_token_ids.end(), p.stop_token_ids.begin(), p.stop_token_ids.end());
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

}  // namespace attnzoo::scheduler_testing
