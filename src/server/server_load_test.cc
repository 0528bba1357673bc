// The whole serving path in one process, so that `make test-sanitize` runs it under ASan / UBSan / LSan: many
// HTTP clients at once on real sockets (streamed and not), clients that hang up mid-stream or while waiting for a
// non-streamed answer, /metrics read throughout, and a shutdown with streams in flight. Greedy answers must equal
// the single-sequence generation loop's on a second copy of the model; every hang-up must abort its request and
// every block must come back.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/generate.h"
#include "engine/model_adapters.h"
#include "loader/json.h"
#include "server/running_server.h"
#include "models/model.h"
#include "server/server.h"
#include "testing/raw_http_client.h"
#include "testing/tiny_llama.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo::server {
namespace {

using namespace std::chrono_literals;
using attnzoo::testing::kTinyLlamaVocab;
using attnzoo::testing::RawClient;
using attnzoo::testing::json_body;

// One character per id of the tiny Llama's vocabulary (BPE without merges), so decoded text maps back
// to ids one to one.
std::shared_ptr<const tok::Tokenizer> char_tokenizer() {
  std::string vocab;
  for (int id = 0; id < kTinyLlamaVocab; ++id) {
    char piece[8];
    std::snprintf(piece, sizeof piece, "\\u%04x", 0x21 + id);  // U+0021 '!' onwards, as JSON escapes
    vocab += (id ? ", \"" : "\"") + std::string(piece) + "\": " + std::to_string(id);
  }
  return tok::Tokenizer::from_json(R"({"model": {"type": "BPE", "vocab": {)" + vocab + R"(}, "merges": []}})",
                                   "chars.json");
}

std::vector<int32_t> prompt_of(int64_t length, int32_t salt) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < length; ++i) ids.push_back(int32_t((i * 31 + salt * 13 + 5) % kTinyLlamaVocab));
  return ids;
}

std::string body_of(const std::vector<int32_t>& prompt, int64_t max_tokens, bool stream) {
  std::string ids;
  for (int32_t id : prompt) ids += (ids.empty() ? "" : ",") + std::to_string(id);
  return R"({"model": "tiny", "prompt": [)" + ids + "], \"max_tokens\": " + std::to_string(max_tokens) +
         R"(, "temperature": 0, "ignore_eos": true, "stream": )" + (stream ? "true" : "false") + "}";
}

// The server-sent events of a streamed response (each was written as one chunk, so its text is contiguous).
std::vector<std::string> events(const std::string& response) {
  std::vector<std::string> out;
  for (size_t at = response.find("data: "); at != std::string::npos; at = response.find("data: ", at)) {
    const size_t end = response.find("\n\n", at);
    if (end == std::string::npos) break;
    out.push_back(response.substr(at + 6, end - at - 6));
    at = end;
  }
  return out;
}

struct Streamed {
  std::string text;
  std::string finish_reason;
  std::string error;  // an error event's message
  bool done = false;
};

Streamed parse_stream(const std::string& response) {
  Streamed s;
  for (const std::string& e : events(response)) {
    if (e == "[DONE]") {
      s.done = true;
      continue;
    }
    const json::Value v = json::parse(e);
    if (const json::Value* err = v.find("error")) {
      s.error = err->find("message")->as_string();
      continue;
    }
    const json::Value& choice = v.find("choices")->as_array().at(0);
    s.text += choice.find("text")->as_string();
    if (const json::Value* r = choice.find("finish_reason"); r && r->is_string()) s.finish_reason = r->as_string();
  }
  return s;
}

using Running = testing::RunningServer;

bool wait_idle(const Engine& engine) {
  for (auto until = std::chrono::steady_clock::now() + 20s; std::chrono::steady_clock::now() < until;) {
    const EngineStats st = engine.stats();
    if (st.running_requests + st.waiting_requests == 0) return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

TEST(ServerLoad, ConcurrentClientsHangUpsAndShutdownEndCleanly) {
  attnzoo::testing::ScratchDir dir;
  attnzoo::testing::write_tiny_llama(dir);
  auto model = Model::load(dir.str());
  auto reference = Model::load(dir.str());
  const auto tokenizer = char_tokenizer();
  ASSERT_EQ(int64_t(tokenizer->vocab_size()), kTinyLlamaVocab);
  ASSERT_TRUE(tokenizer->eos_token_ids().empty());  // generation ends only at max_tokens: answers are comparable
  EngineOptions eo;
  eo.max_num_seqs = 12;
  eo.max_num_batched_tokens = 48;  // chunked prefill and a full batch while the clients pile up
  Engine engine(*model, tokenizer, eo);
  ServerOptions so;
  so.port = 0;
  so.model_name = "tiny";
  Running s(so);
  s.server.set_ready({&engine, tokenizer, nullptr});
  const int64_t all_blocks = engine.stats().num_blocks;
  ASSERT_EQ(engine.stats().free_blocks, all_blocks);

  // Kinds: 0 non-streamed, 1 streamed (both run to max_tokens and are checked); 2 streamed, hung up after the
  // first event; 3 non-streamed, hung up while waiting for the answer. Kinds 2 and 3 ask for far more tokens than
  // they could produce before the server notices.
  const int N = 32, long_tokens = 440;
  std::vector<std::vector<int32_t>> prompts(N);
  std::vector<int64_t> max_tokens(N);
  std::vector<std::string> got(N);
  std::vector<std::string> failures(N);
  std::atomic<bool> load_done{false};
  std::thread metrics_reader([&] {
    while (!load_done) {
      for (const char* path : {"/metrics", "/health", "/v1/models"}) {
        RawClient c(s.port);
        if (c.send_request("GET", path, "")) c.read_until("");
        EXPECT_NE(c.received().find("HTTP/1.1 200"), std::string::npos) << path;
      }
      std::this_thread::sleep_for(2ms);
    }
  });
  std::vector<std::thread> clients;
  for (int i = 0; i < N; ++i) {
    const int kind = i % 4;
    prompts[size_t(i)] = prompt_of(2 + (i * 7) % 53, i);
    max_tokens[size_t(i)] = kind < 2 ? 4 + i % 9 : long_tokens;
    clients.emplace_back([&, i, kind] {
      RawClient c(s.port);
      if (!c.send_request("POST", "/v1/completions", body_of(prompts[size_t(i)], max_tokens[size_t(i)], kind == 1 || kind == 2))) {
        failures[size_t(i)] = "could not send";
        return;
      }
      if (kind == 2) {
        if (!c.read_until("data: ")) failures[size_t(i)] = "no first event";
        c.hang_up();
      } else if (kind == 3) {
        std::this_thread::sleep_for(std::chrono::milliseconds(30 + i % 7 * 10));
        c.hang_up();
      } else {
        c.read_until("");
        got[size_t(i)] = c.received();
      }
    });
  }
  for (auto& t : clients) t.join();
  ASSERT_TRUE(wait_idle(engine));
  load_done = true;
  metrics_reader.join();

  for (int i = 0; i < N; ++i) {
    SCOPED_TRACE("client " + std::to_string(i));
    EXPECT_EQ(failures[size_t(i)], "");
    if (i % 4 >= 2) continue;
    ModelSequence seq(*reference);
    GenerationOptions g;
    g.sampling.temperature = 0.f;
    g.max_new_tokens = max_tokens[size_t(i)];
    const std::string want = tokenizer->decode(generate(seq, prompts[size_t(i)], g).tokens);
    ASSERT_FALSE(want.empty());
    if (i % 4 == 0) {
      ASSERT_NE(got[size_t(i)].find("HTTP/1.1 200"), std::string::npos) << got[size_t(i)];
      const json::Value v = json::parse(json_body(got[size_t(i)]));
      const json::Value& choice = v.find("choices")->as_array().at(0);
      EXPECT_EQ(choice.find("text")->as_string(), want);
      EXPECT_EQ(choice.find("finish_reason")->as_string(), "length");
    } else {
      const Streamed st = parse_stream(got[size_t(i)]);
      EXPECT_EQ(st.text, want);
      EXPECT_EQ(st.finish_reason, "length");
      EXPECT_TRUE(st.done);
    }
  }
  EngineStats st = engine.stats();
  // A streamed hang-up is seen at the next event it is sent, so all N / 4 of them abort. A non-streamed one is
  // seen only when its socket is polled: one that hung up before an HTTP thread took it never reaches the engine,
  // and the tiny model can finish one of long_tokens before the next poll, which is right (nobody could tell).
  const int64_t hung_up_finished = st.finished_requests - N / 2;
  EXPECT_GE(hung_up_finished, 0);
  EXPECT_LE(hung_up_finished, N / 4);
  EXPECT_GE(st.aborted_requests, N / 4);
  EXPECT_LE(st.aborted_requests + hung_up_finished, N / 2);
  int64_t short_tokens = 0;
  for (int i = 0; i < N; ++i) short_tokens += i % 4 < 2 ? max_tokens[size_t(i)] : 0;
  // The aborted ones stopped early: on average before half of what they asked for.
  EXPECT_LT(st.generation_tokens - short_tokens - hung_up_finished * long_tokens,
            st.aborted_requests * long_tokens / 2);
  EXPECT_EQ(st.free_blocks, all_blocks);

  // Shutdown with streams in flight: each ends with its abort, an error event and [DONE], and nothing leaks.
  const int64_t aborted_before = st.aborted_requests;
  const int K = 4;
  std::vector<std::unique_ptr<RawClient>> streams;
  for (int i = 0; i < K; ++i) {
    streams.push_back(std::make_unique<RawClient>(s.port));
    ASSERT_TRUE(streams.back()->send_request("POST", "/v1/completions", body_of(prompt_of(9, 100 + i), long_tokens, true)));
  }
  for (auto& c : streams) ASSERT_TRUE(c->read_until("data: "));
  engine.stop();
  // The tiny model runs 440 tokens in tens of milliseconds: a test thread descheduled that long between the first
  // events and stop() sees a stream finish first, which is correct; every stream still ends with [DONE], and the
  // engine counts exactly the aborts the clients saw.
  int aborts = 0;
  for (auto& c : streams) {
    c->read_until("");
    const Streamed sd = parse_stream(c->received());
    EXPECT_TRUE(sd.finish_reason == "abort" || sd.finish_reason == "length") << sd.finish_reason;
    aborts += sd.finish_reason == "abort";
    EXPECT_EQ(sd.error.empty(), sd.finish_reason != "abort") << sd.error;
    EXPECT_TRUE(sd.done);
  }
  st = engine.stats();
  EXPECT_EQ(st.aborted_requests, aborted_before + aborts);
  EXPECT_EQ(st.free_blocks, all_blocks);
  RawClient late(s.port);  // the engine is stopped: new work gets 503 in OpenAI's shape
  ASSERT_TRUE(late.send_request("POST", "/v1/completions", body_of({1, 2}, 2, false)));
  late.read_until("");
  EXPECT_NE(late.received().find("HTTP/1.1 503"), std::string::npos) << late.received();
  EXPECT_NE(late.received().find("shutting down"), std::string::npos);
}

}  // namespace
}  // namespace attnzoo::server
