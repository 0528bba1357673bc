// gpt-oss's harmony answers as OpenAI response objects (server/responses.h over answers/harmony.h): the message's
// fields, streamed chunks adding up to the whole answer, a forced call streamed from the first chunk, and
// parallel_tool_calls false.
#include "server/responses.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "answers/harmony.h"
#include "answers/tool_calls.h"
#include "loader/json.h"
#include "testing/harmony_testing.h"
#include "testing/stream_split_testing.h"

namespace attnzoo::server {
namespace {

using answers::ToolFormat;
using answers::ToolMode;
using answers::harmony_call_header;

ResponseContext harmony_context(ToolMode mode, bool include = true, std::string prefix = "") {
  ResponseContext ctx;
  ctx.endpoint = Endpoint::chat_completions;
  ctx.id = "chatcmpl-1";
  ctx.model = "m";
  ctx.tool_mode = mode;
  ctx.tool_format = ToolFormat::openai;
  ctx.include_reasoning = include;
  ctx.harmony = true;
  ctx.harmony_prefix = std::move(prefix);
  return ctx;
}

json::Value whole(const ResponseContext& ctx, const std::string& text, FinishReason reason = FinishReason::stop) {
  Choice c;
  c.text = text;
  c.finish_reason = reason;
  return json::parse(full_response(ctx, {c}, Usage{}, false)).find("choices")->as_array()[0];
}

TEST(HarmonyResponses, MessageFields) {
  json::Value c = whole(harmony_context(ToolMode::automatic), "<|channel|>analysis<|message|>hm<|end|>" + testing::kHarmonyCall);
  const json::Value* m = c.find("message");
  EXPECT_EQ(m->find("reasoning_content")->as_string(), "hm");
  EXPECT_TRUE(m->find("content")->is_null());
  ASSERT_EQ(m->find("tool_calls")->as_array().size(), 1u);
  EXPECT_EQ(c.find("finish_reason")->as_string(), "tool_calls");
  // Cut: no call, "length".
  c = whole(harmony_context(ToolMode::automatic), testing::kHarmonyCall, FinishReason::length);
  EXPECT_EQ(c.find("message")->find("tool_calls"), nullptr);
  EXPECT_EQ(c.find("finish_reason")->as_string(), "length");
  // No reasoning: null; include_reasoning false: no field.
  c = whole(harmony_context(ToolMode::text), "<|channel|>final<|message|>4");
  EXPECT_EQ(c.find("message")->find("content")->as_string(), "4");
  EXPECT_TRUE(c.find("message")->find("reasoning_content")->is_null());
  c = whole(harmony_context(ToolMode::text, false), "<|channel|>analysis<|message|>hm<|end|>");
  EXPECT_EQ(c.find("message")->find("reasoning_content"), nullptr);
  // A forced call: the prompt's header first, then the sampled arguments.
  c = whole(harmony_context(ToolMode::forced, true, harmony_call_header("get_weather")), "{\"city\": \"Rome\"}");
  ASSERT_EQ(c.find("message")->find("tool_calls")->as_array().size(), 1u);
  EXPECT_EQ(c.find("finish_reason")->as_string(), "tool_calls");
}

TEST(HarmonyResponses, StreamedChunksAddUpToTheWholeAnswer) {
  const std::string text = testing::kHarmonyTexts[2];
  for (size_t a = 1; a < text.size(); ++a) {
    SCOPED_TRACE(std::to_string(a));
    const ResponseContext ctx = harmony_context(ToolMode::automatic);
    StreamWriter w(ctx, 1, false, false);
    std::string reasoning, content;
    size_t calls = 0;
    std::vector<std::string> arguments;
    std::string reason;
    const std::vector<std::string> pieces = {text.substr(0, a), text.substr(a)};
    for (size_t i = 0; i < pieces.size(); ++i) {
      SampleDelta d;
      d.text = pieces[i];
      if (i + 1 == pieces.size()) d.finish_reason = FinishReason::stop;
      const std::string e = w.chunk(d);
      const json::Value v = json::parse(e.substr(6));
      const json::Value& ch = v.find("choices")->as_array()[0];
      const json::Value& delta = *ch.find("delta");
      if (const json::Value* r = delta.find("reasoning_content")) reasoning += r->as_string();
      if (const json::Value* c = delta.find("content")) content += c->as_string();
      if (const json::Value* t = delta.find("tool_calls"))
        for (const json::Value& call : t->as_array()) {
          const size_t index = size_t(call.find("index")->as_int());
          if (call.find("id")) {  // the first delta names the call
            ASSERT_EQ(index, calls++);
            arguments.emplace_back();
          }
          ASSERT_LT(index, arguments.size());
          arguments[index] += call.find("function")->find("arguments")->as_string();
        }
      if (!ch.find("finish_reason")->is_null()) reason = ch.find("finish_reason")->as_string();
    }
    const json::Value m = *whole(ctx, text).find("message");
    EXPECT_EQ(content, m.find("content")->is_null() ? "" : m.find("content")->as_string());
    EXPECT_EQ(reasoning, "");
    EXPECT_EQ(calls, m.find("tool_calls")->as_array().size());
    EXPECT_EQ(calls, 2u);
    for (size_t c = 0; c < calls; ++c)
      EXPECT_EQ(arguments[c], m.find("tool_calls")->as_array()[c].find("function")->find("arguments")->as_string());
    EXPECT_EQ(reason, "tool_calls");
  }
}

// A forced call: its header is the prompt's end, so the first chunk announces it, with the arguments it brings.
TEST(HarmonyResponses, ForcedCallStreamsFromTheFirstChunk) {
  const ResponseContext ctx = harmony_context(ToolMode::forced, true, harmony_call_header("get_weather"));
  StreamWriter w(ctx, 1, false, false);
  const std::vector<std::string> pieces = {"{\"city\": ", "\"Rome\"}"};
  std::vector<std::vector<std::string>> fragments;
  std::string reason;
  for (size_t i = 0; i < pieces.size(); ++i) {
    SampleDelta d;
    d.text = pieces[i];
    if (i + 1 == pieces.size()) d.finish_reason = FinishReason::stop;
    const std::string e = w.chunk(d);
    const json::Value v = json::parse(e.substr(6));
    const json::Value& ch = v.find("choices")->as_array()[0];
    fragments.emplace_back();
    for (const json::Value& call : ch.find("delta")->find("tool_calls")->as_array()) {
      EXPECT_EQ(call.find("index")->as_int(), 0);
      EXPECT_EQ(call.find("id") != nullptr, i == 0);
      if (i == 0) EXPECT_EQ(call.find("function")->find("name")->as_string(), "get_weather");
      fragments.back().push_back(call.find("function")->find("arguments")->as_string());
    }
    if (!ch.find("finish_reason")->is_null()) reason = ch.find("finish_reason")->as_string();
  }
  EXPECT_EQ(fragments, (std::vector<std::vector<std::string>>{{"{\"city\": "}, {"\"Rome\"}"}}));
  EXPECT_EQ(reason, "tool_calls");
}

TEST(HarmonyResponses, ParallelToolCallsFalseSendsTheFirstCallOnly) {
  ResponseContext ctx = harmony_context(ToolMode::automatic);
  ctx.parallel_tool_calls = false;
  const json::Value c = whole(ctx, testing::kHarmonyTexts[2]);
  const std::vector<json::Value>& calls = c.find("message")->find("tool_calls")->as_array();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].find("function")->find("name")->as_string(), "f");
  StreamWriter w(ctx, 1, false, false);
  SampleDelta d;
  d.text = testing::kHarmonyTexts[2];
  d.finish_reason = FinishReason::stop;
  const json::Value v = json::parse(w.chunk(d).substr(6));
  const json::Value& ch = v.find("choices")->as_array()[0];
  ASSERT_EQ(ch.find("delta")->find("tool_calls")->as_array().size(), 1u);
  EXPECT_EQ(ch.find("finish_reason")->as_string(), "tool_calls");
}

}  // namespace
}  // namespace attnzoo::server
