// The sampling fields of a request read as vLLM's server reads them (server/openai_request.h, responses.h): a
// completion's top_logprobs hold the sampled token too, a temperature in (0, 0.01) is raised to 0.01, a request
// without a seed (or with -1) draws a fresh one, and vLLM's extras attnzoo does not implement are refused by name.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>

#include "loader/json.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/responses.h"
#include "testing/char_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo::server {
namespace {

constexpr int kVocab = testing::kCharVocab;

const tok::Tokenizer& tokenizer() { return testing::char_tokenizer(); }

ApiRequest completion(const std::string& fields) {
  ApiLimits l;
  l.max_model_len = 128;
  return parse_request(Endpoint::completions, R"({"prompt": "ABC", "max_tokens": 2)" + fields + "}", tokenizer(),
                       nullptr, l);
}

// "param: message" of the 400 the fields get, "" when they are accepted.
std::string refusal(const std::string& fields) {
  try {
    completion(fields);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    return e.param + ": " + e.what();
  }
  return "";
}

// OpenAI's legacy completions and vLLM list the sampled token in top_logprobs whatever its rank: logprobs + 1
// entries at most, the sampled token alone for logprobs = 0; chat keeps it apart, in `logprob`.
TEST(OpenAiSampling, CompletionTopLogprobsHoldTheSampledToken) {
  ResponseContext ctx;
  ctx.tokenizer = &tokenizer();
  Choice c;
  c.text = "#";
  c.logprobs = {{2, -3.f}};  // "#", ranked below the alternatives
  c.top_logprobs = {{{0, -0.5f}, {1, -1.f}}};
  // The first token's top_logprobs (completions) or content entry (chat), as parsed JSON.
  const auto first = [&](Endpoint endpoint) {
    ctx.endpoint = endpoint;
    return json::parse(full_response(ctx, {c}, Usage{}, true));
  };
  const auto listed = [](const json::Value& v) -> const json::Value& {
    return v.find("choices")->as_array()[0].find("logprobs")->find("top_logprobs")->as_array()[0];
  };
  const json::Value three = first(Endpoint::completions);
  ASSERT_EQ(listed(three).as_object().size(), 3u);
  EXPECT_EQ(listed(three).find("#")->as_double(), -3.0);
  EXPECT_EQ(listed(three).find("!")->as_double(), -0.5);
  EXPECT_EQ(listed(three).find("\"")->as_double(), -1.0);
  c.top_logprobs = {{{2, -3.f}}};  // the sampled token among the alternatives: listed once
  EXPECT_EQ(listed(first(Endpoint::completions)).as_object().size(), 1u);
  c.top_logprobs = {{}};  // logprobs = 0
  const json::Value alone = first(Endpoint::completions);
  ASSERT_EQ(listed(alone).as_object().size(), 1u);
  EXPECT_EQ(listed(alone).find("#")->as_double(), -3.0);

  c.top_logprobs = {{{0, -0.5f}, {1, -1.f}}};
  const json::Value chat = first(Endpoint::chat_completions);
  const json::Value& token = chat.find("choices")->as_array()[0].find("logprobs")->find("content")->as_array()[0];
  EXPECT_EQ(token.find("logprob")->as_double(), -3.0);
  EXPECT_EQ(token.find("top_logprobs")->as_array().size(), 2u);  // OpenAI chat: the k most likely only
}

TEST(OpenAiSampling, TemperaturesBelowOneHundredthAreRaisedToIt) {
  for (const char* t : {"1e-40", "1e-6", "0.001", "0.0099"})
    EXPECT_FLOAT_EQ(completion(std::string(", \"temperature\": ") + t).request.params.sampling.temperature, 0.01f) << t;
  EXPECT_EQ(completion(", \"temperature\": 0").request.params.sampling.temperature, 0.f);  // greedy stays greedy
  EXPECT_FLOAT_EQ(completion(", \"temperature\": 0.5").request.params.sampling.temperature, 0.5f);
  EXPECT_EQ(refusal(", \"temperature\": -0.1"), "temperature: temperature: must be in [0, 2], got -0.1");
}

TEST(OpenAiSampling, NoSeedDrawsAFreshOne) {
  std::set<uint64_t> seeds;
  for (const char* s : {"", ", \"seed\": null", ", \"seed\": -1", "", ", \"seed\": -1"})
    seeds.insert(completion(s).request.params.sampling.seed);
  EXPECT_EQ(seeds.size(), 5u);  // 64 random bits each: a collision is a bug, not luck
  EXPECT_EQ(completion(", \"seed\": 0").request.params.sampling.seed, 0u);
  EXPECT_EQ(completion(", \"seed\": 42").request.params.sampling.seed, 42u);
  EXPECT_EQ(refusal(", \"seed\": -2"), "seed: seed: must be in [-1, 9223372036854775807], got -2");
}

TEST(OpenAiSampling, UnimplementedVllmFieldsAreRefusedByName) {
  EXPECT_EQ(refusal(R"(, "allowed_token_ids": [1, 2])"),
            "allowed_token_ids: allowed_token_ids: not supported by this server (null or absent only)");
  EXPECT_EQ(refusal(R"(, "allowed_token_ids": [])"),
            "allowed_token_ids: allowed_token_ids: not supported by this server (null or absent only)");
  EXPECT_EQ(refusal(R"(, "bad_words": ["x"])"),
            "bad_words: bad_words: not supported by this server (an empty list, null or absent only)");
  EXPECT_EQ(refusal(R"(, "prompt_logprobs": 0)"),
            "prompt_logprobs: prompt_logprobs: not supported by this server (null or absent only)");
  EXPECT_EQ(refusal(R"(, "use_beam_search": true)"),
            "use_beam_search: use_beam_search: not supported by this server (false only)");
  EXPECT_EQ(refusal(R"(, "skip_special_tokens": false)"),
            "skip_special_tokens: skip_special_tokens: not supported by this server (true only: special tokens are "
            "always left out of the text)");
  EXPECT_EQ(refusal(R"(, "include_stop_str_in_output": true)"),
            "include_stop_str_in_output: include_stop_str_in_output: not supported by this server (false only: the "
            "text ends before the stop string)");
  // The values that ask for what the server does anyway.
  EXPECT_EQ(refusal(R"(, "allowed_token_ids": null, "bad_words": [], "prompt_logprobs": null,
                      "use_beam_search": false, "skip_special_tokens": true, "include_stop_str_in_output": false)"),
            "");
}

}  // namespace
}  // namespace attnzoo::server
