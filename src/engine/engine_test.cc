// The engine thread: requests from several client threads through OutputQueues, abort, stop, limits. Token
// equality with the single-sequence loop is checked here too, since the engine thread adds requests between steps.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <thread>

#include "core/error.h"
#include "engine/generate.h"
#include "engine/model_adapters.h"
#include "models/model.h"
#include "testing/tiny_llama.h"

namespace attnzoo {
namespace {

using namespace std::chrono_literals;

std::vector<int32_t> prompt_of(int64_t length, int32_t salt) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < length; ++i) ids.push_back(int32_t((i * 29 + salt * 11 + 1) % testing::kTinyLlamaVocab));
  return ids;
}

// Everything a request produced, read from its queue until the last output.
struct Drained {
  std::vector<int32_t> tokens;
  std::optional<FinishReason> reason;
  RequestOutput last;
};

Drained drain(OutputQueue& q) {
  Drained d;
  for (;;) {
    auto out = q.pop(10s);
    if (!out) {
      ADD_FAILURE() << "no output for 10 s";
      return d;
    }
    for (auto& s : out->samples) {
      d.tokens.insert(d.tokens.end(), s.token_ids.begin(), s.token_ids.end());
      if (s.finish_reason) d.reason = s.finish_reason;
    }
    if (out->finished) {
      d.last = std::move(*out);
      return d;
    }
  }
}

TEST(Engine, ClientThreadsGetTheTokensOfRunningAlone) {
  testing::ScratchDir dir;
  testing::write_tiny_llama(dir);
  auto model = Model::load(dir.str());
  auto reference = Model::load(dir.str());
  EngineOptions o;
  o.max_num_batched_tokens = 48;
  Engine engine(*model, nullptr, o);
  const int N = 16;
  std::vector<Drained> got(N);
  std::vector<Request> reqs(N);
  std::vector<std::thread> clients;
  for (int i = 0; i < N; ++i) {
    reqs[size_t(i)].prompt = prompt_of(3 + (i * 11) % 60, i);
    reqs[size_t(i)].params.sampling.temperature = i % 2 ? 0.7f : 0.f;
    reqs[size_t(i)].params.sampling.seed = uint64_t(i);
    reqs[size_t(i)].params.max_tokens = 5 + i % 7;
    clients.emplace_back([&, i] {
      auto q = OutputQueue::make();
      engine.add_request(reqs[size_t(i)], q->callback());
      got[size_t(i)] = drain(*q);
    });
  }
  for (auto& t : clients) t.join();
  for (int i = 0; i < N; ++i) {
    ModelSequence seq(*reference);
    GenerationOptions g;
    g.sampling = reqs[size_t(i)].params.sampling;
    g.max_new_tokens = reqs[size_t(i)].params.max_tokens;
    EXPECT_EQ(got[size_t(i)].tokens, generate(seq, reqs[size_t(i)].prompt, g).tokens) << "request " << i;
    const RequestOutput& last = got[size_t(i)].last;
    ASSERT_TRUE(last.first_token && last.finish);
    EXPECT_LE(last.arrival, *last.first_token);
    EXPECT_LE(*last.first_token, *last.finish);
  }
  const EngineStats st = engine.stats();
  EXPECT_EQ(st.finished_requests, N);
  EXPECT_EQ(st.running_requests + st.waiting_requests, 0);
  EXPECT_EQ(st.free_blocks, st.num_blocks);
  EXPECT_GT(st.steps, 0);
}

TEST(Engine, AbortAndStopEndRequestsAndFreeTheirBlocks) {
  testing::ScratchDir dir;
  testing::write_tiny_llama(dir);
  auto model = Model::load(dir.str());
  const int64_t baseline = model->cache().stats().free_blocks;
  EngineOptions o;
  o.max_model_len = 400;
  Engine engine(*model, nullptr, o);
  Request r;
  r.prompt = prompt_of(30, 1);
  r.params.max_tokens = 300;
  auto q = OutputQueue::make();
  const uint64_t id = engine.add_request(r, q->callback());
  ASSERT_TRUE(q->pop(10s));  // it is running
  engine.abort(id);
  const Drained d = drain(*q);
  EXPECT_EQ(d.reason, FinishReason::abort);
  EXPECT_LT(int64_t(d.tokens.size()), 300);
  for (int k = 0; k < 100 && engine.stats().free_blocks != baseline; ++k) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(engine.stats().free_blocks, baseline);

  // stop() ends what is still running, with an abort output, and refuses new work.
  auto q2 = OutputQueue::make();
  engine.add_request(r, q2->callback());
  engine.stop();
  EXPECT_TRUE(q2->finished());
  EXPECT_EQ(drain(*q2).reason, FinishReason::abort);
  EXPECT_THROW(engine.add_request(r, q2->callback()), EngineStopped);
  EXPECT_EQ(model->cache().stats().free_blocks, baseline);
  engine.stop();  // idempotent
}

TEST(Engine, RejectsInvalidRequestsOnTheCallersThread) {
  testing::ScratchDir dir;
  testing::write_tiny_llama(dir);
  auto model = Model::load(dir.str());
  Engine engine(*model, nullptr, EngineOptions{});
  EXPECT_EQ(engine.max_model_len(), 512);  // config.json max_position_embeddings
  Request r;
  r.prompt = prompt_of(500, 1);
  r.params.max_tokens = 20;
  try {
    engine.add_request(r, {});
    ADD_FAILURE() << "no error";
  } catch (const ArgumentError& e) {
    EXPECT_STREQ(e.what(), "prompt: 500 tokens + max_tokens 20 exceed max_model_len 512");
  }
  Request stop;
  stop.prompt = prompt_of(8, 1);
  stop.params.stop_token_ids = {3, -5};
  try {
    engine.add_request(stop, {});
    ADD_FAILURE() << "no error";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("stop_token_ids: token id -5 is outside the vocabulary"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(engine.stats().waiting_requests, 0);
  EngineOptions bad;
  bad.max_num_seqs = 0;
  EXPECT_THROW(Engine(*model, nullptr, bad), ArgumentError);
  EngineOptions beyond;  // vLLM refuses a max_model_len past the model's context too
  beyond.max_model_len = 513;
  try {
    Engine engine_beyond(*model, nullptr, beyond);
    ADD_FAILURE() << "no error";
  } catch (const ArgumentError& e) {
    EXPECT_STREQ(e.what(), "max_model_len: 513 is more than the model's context of 512 (max_position_embeddings, "
                           "or YaRN's original length * factor)");
  }
  beyond.max_model_len = 512;
  EXPECT_EQ(Engine(*model, nullptr, beyond).max_model_len(), 512);
}

}  // namespace
}  // namespace attnzoo
