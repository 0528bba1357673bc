// The serving scheduler over a tiny Llama on a GPU, where each step's plain rows are sampled on the device and
// only the ids come back (logprobs and verification rows are copied down alone). Against the same requests run
// alone through the generation loop over a GPU copy of the model, which samples the copied-down rows on the host:
// the same tokens, greedy and seeded, forks, logprobs and min_tokens' banned rows included (the device sampler is
// the host's, and the tiny model's logits have no near-ties). Against the CPU: the same greedy tokens up to a
// near-tie of the CPU's own logits (bf16 on the GPU, f32 here). Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/device.h"
#include "engine/generate.h"
#include "engine/model_adapters.h"
#include "engine/ngram_proposer.h"
#include "engine/scheduler.h"
#include "models/model.h"
#include "testing/tiny_decoder.h"

namespace attnzoo {
namespace {

using testing::ScratchDir;
using testing::TinyDecoder;

constexpr int64_t V = testing::kTinyDecoderVocab;

class SchedulerGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU: " << cuda_unavailable_reason();
    write_tiny_decoder(dir_, TinyDecoder{});
  }

  std::unique_ptr<Model> load(Device device) const {
    LoadOptions o;
    o.pool.device = device;
    o.pool.kv_dtype = DType::bf16;  // the same cache rounding on both sides
    o.pool.bytes = 32 << 20;
    return Model::load(dir_.str(), o);
  }

  ScratchDir dir_;
};

struct Streamed {
  std::map<int64_t, std::vector<int32_t>> tokens;
  std::map<int64_t, std::vector<TokenLogprob>> logprobs;
  std::string error;
  bool finished = false;
};

// Every request through one scheduler over `model`, drained.
std::vector<Streamed> serve(const Model& model, const std::vector<Request>& reqs, EngineOptions o = {}) {
  o.max_num_batched_tokens = 512;
  o.max_num_seqs = 16;
  Scheduler s(model, nullptr, o);
  std::vector<Streamed> got(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    s.check(reqs[i]);
    s.add(uint64_t(i + 1), reqs[i], [&got, i](RequestOutput&& out) {
      for (auto& d : out.samples) {
        got[i].tokens[d.index].insert(got[i].tokens[d.index].end(), d.token_ids.begin(), d.token_ids.end());
        got[i].logprobs[d.index].insert(got[i].logprobs[d.index].end(), d.logprobs.begin(), d.logprobs.end());
      }
      got[i].error = out.error;
      got[i].finished = out.finished;
    }, EngineClock::now());
  }
  for (int step = 0; step < 1000 && s.has_work(); ++step) s.step();
  EXPECT_FALSE(s.has_work());
  return got;
}

std::vector<Request> requests() {
  std::vector<Request> reqs;
  auto add = [&](int64_t length, uint32_t salt, SamplingParams sp, int64_t n = 1, bool logprobs = false) {
    Request r;
    for (int64_t i = 0; i < length; ++i) r.prompt.push_back(int32_t((i * 37 + salt * 11 + 5) % V));
    r.params.sampling = sp;
    r.params.max_tokens = 12;
    r.params.n = n;
    r.params.logprobs = logprobs;
    r.params.top_logprobs = logprobs ? 2 : 0;
    reqs.push_back(r);
  };
  SamplingParams greedy;
  greedy.temperature = 0.f;
  add(5, 1, greedy);
  add(40, 2, greedy);
  add(17, 3, greedy, 1, /*logprobs=*/true);
  SamplingParams drawn;
  drawn.temperature = 0.9f;
  drawn.seed = 7;
  add(9, 4, drawn);
  SamplingParams filtered = drawn;
  filtered.top_k = 10;
  filtered.top_p = 0.9f;
  filtered.repetition_penalty = 1.2f;
  filtered.seed = 8;
  add(23, 5, filtered, 2);  // two samples forked from one row
  return reqs;
}

// The request alone through the single-sequence loop over `model` (host logits, host sampler).
std::vector<int32_t> alone(const Model& model, const Request& r, int64_t sample, Proposer* proposer = nullptr) {
  ModelSequence seq(model);
  GenerationOptions g;
  g.sampling = r.params.sampling;
  g.sampling.seed += uint64_t(sample);
  g.max_new_tokens = r.params.max_tokens;
  g.eos_token_ids = r.params.stop_token_ids;  // the scheduler here has no EOS ids: stop ids end (and are banned) alone
  g.min_new_tokens = r.params.min_tokens;
  if (proposer) {
    g.proposer = proposer;
    g.num_speculative_tokens = 3;
  }
  return generate(seq, r.prompt, g).tokens;
}

TEST_F(SchedulerGpu, DeviceSampledStepsMatchHostSamplingOfTheSameModel) {
  const auto gpu = load(Device::cuda());
  const auto reference = load(Device::cuda());
  const std::vector<Request> reqs = requests();
  const std::vector<Streamed> got = serve(*gpu, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    ASSERT_TRUE(got[i].finished);
    EXPECT_EQ(got[i].error, "");
    for (int64_t n = 0; n < reqs[i].params.n; ++n)
      EXPECT_EQ(got[i].tokens.at(n), alone(*reference, reqs[i], n)) << "sample " << n;
  }
  // The logprobs row came down: its chosen token's logprob is the best of its top two (greedy).
  ASSERT_EQ(got[2].logprobs.at(0).size(), got[2].tokens.at(0).size());
  for (size_t j = 0; j < got[2].logprobs.at(0).size(); ++j) {
    EXPECT_EQ(got[2].logprobs.at(0)[j].token, got[2].tokens.at(0)[j]);
    EXPECT_LE(got[2].logprobs.at(0)[j].logprob, 0.f);
    EXPECT_GT(got[2].logprobs.at(0)[j].logprob, -30.f);
  }
  EXPECT_NE(got[4].tokens.at(0), got[4].tokens.at(1));
}

TEST_F(SchedulerGpu, SpeculativeStepsOnTheDeviceMatchTheGenerateLoop) {
  const auto gpu = load(Device::cuda());
  const auto reference = load(Device::cuda());
  std::vector<Request> reqs = requests();
  for (Request& r : reqs) r.prompt.insert(r.prompt.end(), r.prompt.begin(), r.prompt.end());  // lookups find guesses
  EngineOptions o;
  o.speculative.method = SpeculativeMethod::ngram;
  o.speculative.num_speculative_tokens = 3;
  const std::vector<Streamed> got = serve(*gpu, reqs, o);
  NgramProposer ngram(o.speculative.prompt_lookup_min, o.speculative.prompt_lookup_max);
  for (size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_EQ(got[i].error, "");
    for (int64_t n = 0; n < reqs[i].params.n; ++n)
      EXPECT_EQ(got[i].tokens.at(n), alone(*reference, reqs[i], n, &ngram)) << "sample " << n;
  }
}

// min_tokens on the device: a sample's rows before its minimum come down and are drawn on the host with the stop
// ids banned, plain and verified rows alike, the later ones on the device: the loop's tokens alone with that
// minimum. Each request's stop id is the third token it says without one.
TEST_F(SchedulerGpu, MinTokensBansStopIdsAsTheGenerateLoop) {
  const auto gpu = load(Device::cuda());
  const auto reference = load(Device::cuda());
  std::vector<Request> reqs = requests();
  for (Request& r : reqs) {
    r.prompt.insert(r.prompt.end(), r.prompt.begin(), r.prompt.end());  // lookups find guesses
    r.params.stop_token_ids = {alone(*reference, r, 0)[2]};
    r.params.min_tokens = 8;
  }
  NgramProposer ngram(1, 3);
  for (const bool speculate : {false, true}) {
    SCOPED_TRACE(speculate ? "ngram" : "plain");
    EngineOptions o;
    if (speculate) {
      o.speculative.method = SpeculativeMethod::ngram;
      o.speculative.num_speculative_tokens = 3;
    }
    const std::vector<Streamed> got = serve(*gpu, reqs, o);
    for (size_t i = 0; i < reqs.size(); ++i) {
      SCOPED_TRACE("request " + std::to_string(i));
      EXPECT_EQ(got[i].error, "");
      for (int64_t n = 0; n < reqs[i].params.n; ++n) {
        const std::vector<int32_t>& tokens = got[i].tokens.at(n);
        EXPECT_EQ(tokens, alone(*reference, reqs[i], n, speculate ? &ngram : nullptr)) << "sample " << n;
        ASSERT_GE(tokens.size(), 8u);
        EXPECT_EQ(std::count(tokens.begin(), tokens.begin() + 8, reqs[i].params.stop_token_ids[0]), 0);
      }
    }
  }
}

TEST_F(SchedulerGpu, GreedyTokensEqualTheCpusUpToANearTie) {
  const auto gpu = load(Device::cuda());
  const auto cpu = load(Device::cpu());
  std::vector<Request> reqs = requests();
  reqs.resize(3);  // the greedy ones
  const std::vector<Streamed> on_gpu = serve(*gpu, reqs), on_cpu = serve(*cpu, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    const std::vector<int32_t>& g = on_gpu[i].tokens.at(0);
    const std::vector<int32_t>& c = on_cpu[i].tokens.at(0);
    ASSERT_EQ(g.size(), c.size());
    const size_t split = size_t(std::mismatch(g.begin(), g.end(), c.begin()).first - g.begin());
    if (split == g.size()) continue;
    // They parted where the CPU's own top two are within bf16 tolerance of each other: recompute that row.
    std::vector<int32_t> context = reqs[i].prompt;
    context.insert(context.end(), c.begin(), c.begin() + std::ptrdiff_t(split));
    auto seq = cpu->new_sequence();
    Batch b;
    b.add(*seq, context);
    std::vector<float> row = cpu->forward(b, true);
    float scale = 0.f;
    for (float x : row) scale = std::max(scale, std::abs(x));
    std::partial_sort(row.begin(), row.begin() + 2, row.end(), std::greater<>());
    EXPECT_LE(row[0] - row[1], 2 * (0.03f * scale + 0.02f)) << "token " << split << " differs without a near-tie";
  }
}

}  // namespace
}  // namespace attnzoo
