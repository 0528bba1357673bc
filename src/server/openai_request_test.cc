// The bounds parse_request (server/openai_request.h) holds a hostile body to, before anything reaches the engine:
// stop strings and stop_token_ids, min_tokens within max_tokens, logit_bias keys naming one token twice, the JSON
// values of a body, and large bodies parsed a few at a time. Each refusal is a 400 naming the field; the other fields
// are checked over HTTP by python/tests/test_serve.py.
#include "server/openai_request.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "server/api_error.h"
#include "testing/char_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo::server {
namespace {

using namespace std::chrono_literals;

constexpr int kVocab = testing::kCharVocab;

const tok::Tokenizer& tokenizer() { return testing::char_tokenizer(); }

ApiLimits limits() {
  ApiLimits l;
  l.max_model_len = 128;
  return l;
}

ApiRequest completion(const std::string& fields, const ApiLimits& l = limits()) {
  return parse_request(Endpoint::completions, R"({"prompt": "ABC", "max_tokens": 2)" + fields + "}", tokenizer(),
                       nullptr, l);
}

// "param: message" of the 400 the fields get, "" when they are accepted.
std::string refusal(const std::string& fields, const ApiLimits& l = limits()) {
  try {
    completion(fields, l);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    return e.param + ": " + e.what();
  }
  return "";
}

std::string list_of(int64_t count, const std::string& item) {
  std::string out = "[";
  for (int64_t i = 0; i < count; ++i) out += (i ? "," : "") + item;
  return out + "]";
}

TEST(ApiRequestLimits, StopStringsAreFewAndShort) {
  const ApiLimits l = limits();
  const std::string longest = json::quote(std::string(size_t(l.max_stop_bytes), 'x'));
  EXPECT_EQ(completion(", \"stop\": " + list_of(l.max_stop, longest)).request.params.stop.size(),
            size_t(l.max_stop));
  EXPECT_EQ(refusal(", \"stop\": " + list_of(l.max_stop + 1, "\"x\"")), "stop: stop: at most 16 stop strings, got 17");
  const std::string too_long = json::quote(std::string(size_t(l.max_stop_bytes) + 1, 'x'));
  EXPECT_EQ(refusal(", \"stop\": " + too_long), "stop: stop: a stop string may be at most 256 bytes, got 257");
  EXPECT_EQ(refusal(", \"stop\": [\"a\", " + too_long + "]"),
            "stop: stop: a stop string may be at most 256 bytes, got 257");
}

TEST(ApiRequestLimits, StopTokenIdsAreBounded) {
  const ApiLimits l = limits();
  EXPECT_EQ(completion(", \"stop_token_ids\": " + list_of(l.max_stop_token_ids, "7")).request.params.stop_token_ids,
            std::vector<int32_t>(size_t(l.max_stop_token_ids), 7));
  EXPECT_EQ(refusal(", \"stop_token_ids\": " + list_of(l.max_stop_token_ids + 1, "7")),
            "stop_token_ids: stop_token_ids: at most 256 ids, got 257");
}

// vLLM's min_tokens: an integer from 0 to max_tokens (given, or the default it names), 400s naming the field.
TEST(ApiRequestLimits, MinTokensIsAtMostMaxTokens) {
  EXPECT_EQ(completion(", \"min_tokens\": 2").request.params.min_tokens, 2);
  EXPECT_EQ(completion(", \"min_tokens\": null").request.params.min_tokens, 0);
  EXPECT_EQ(refusal(", \"min_tokens\": 3"), "min_tokens: min_tokens: must be <= max_tokens (2), got 3");
  EXPECT_EQ(refusal(", \"min_tokens\": -1"), "min_tokens: min_tokens: must be in [0, 9223372036854775807], got -1");
  EXPECT_EQ(refusal(", \"min_tokens\": 1.5"), "min_tokens: min_tokens: must be an integer");
  EXPECT_EQ(refusal(", \"min_tokens\": \"4\""), "min_tokens: min_tokens: must be an integer");
  try {
    parse_request(Endpoint::completions, R"({"prompt": "ABC", "min_tokens": 17})", tokenizer(), nullptr, limits());
    ADD_FAILURE() << "min_tokens past the default max_tokens was taken";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "min_tokens");
    EXPECT_STREQ(e.what(), "min_tokens: must be <= max_tokens (16: the default; set max_tokens), got 17");
  }
}

// "7" and "007" are two JSON keys but one token: their biases would add up past the documented [-100, 100].
TEST(ApiRequestLimits, LogitBiasNamesEachTokenOnce) {
  const auto bias = completion(R"(, "logit_bias": {"7": 100, "8": -100})").request.params.logit_bias;
  EXPECT_EQ(bias.size(), 2u);
  EXPECT_EQ(refusal(R"(, "logit_bias": {"7": 100, "007": 100})"),
            "logit_bias: logit_bias: keys \"007\" and \"7\" both name token 7");
}

// A body holds at most max_model_len + max_body_values_beyond_context JSON values: a 4 MiB body of `0,` would be
// 2M values, 256 MB and more parsed.
TEST(ApiRequestLimits, BodyValuesAreBoundedByTheContext) {
  ApiLimits l = limits();
  EXPECT_EQ(body_value_limit(l), 128 + 65536);
  EXPECT_EQ(refusal(", \"x\": " + list_of(70000, "0"), l),
            ": the JSON body holds more than 65664 values, more than any request to this model needs "
            "(max_model_len + 65536)");
  l.max_body_values_beyond_context = 1000;
  EXPECT_EQ(refusal(", \"x\": " + list_of(900, "0"), l), "");  // the rest of the request, within the margin
  // A prompt of max_model_len ids fits (the engine then says it leaves no room for max_tokens)...
  EXPECT_EQ(parse_request(Endpoint::completions, "{\"prompt\": " + list_of(128, "5") + ", \"x\": " +
                                                     list_of(900, "0") + "}",
                          tokenizer(), nullptr, l)
                .request.prompt.size(),
            128u);
  EXPECT_NE(refusal(", \"x\": " + list_of(1200, "0"), l).find("more than 1128 values"), std::string::npos);
  // Malformed JSON is still called that.
  EXPECT_NE(refusal(", \"x\": [0,", l).find("malformed JSON body"), std::string::npos);
}

// Large bodies take one of kLargeBodySlots while they are parsed and read; small ones never wait.
TEST(ApiRequestLimits, LargeBodiesAreParsedAFewAtATime) {
  std::vector<std::optional<BodySlot>> held(BodySlot::kLargeBodySlots);
  for (auto& slot : held) slot.emplace(BodySlot::kSmallBody + 1);
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    const BodySlot slot(4 << 20);
    got = true;
  });
  { const BodySlot small(BodySlot::kSmallBody); }  // at once, with every large slot taken
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(got);
  held.back().reset();
  waiter.join();
  EXPECT_TRUE(got);
}

}  // namespace
}  // namespace attnzoo::server
