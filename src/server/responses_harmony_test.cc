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
#include "testing/response_stream_testing.h"
#include "testing/stream_split_testing.h"

namespace attnzoo::server {
namespace {

using answers::ToolFormat;
using answers::ToolMode;
using answers::harmony_call_header;

using testing::whole_choice;

ResponseContext harmony_context(ToolMode mode, bool include = true, std::string prefix = "") {
  ResponseContext ctx = testing::chat_context(mode, ToolFormat::openai);
  ctx.include_reasoning = include;
  ctx.harmony = true;
  ctx.harmony_prefix = std::move(prefix);
  return ctx;
}

TEST(HarmonyResponses, MessageFields) {
  json::Value c = whole_choice(harmony_context(ToolMode::automatic), "<|channel|>analysis<|message|>hm<|end|>" + testing::kHarmonyCall);
  const json::Value* m = c.find("message");
  EXPECT_EQ(m->find("reasoning_content")->as_string(), "hm");
  EXPECT_TRUE(m->find("content")->is_null());
  ASSERT_EQ(m->find("tool_calls")->as_array().size(), 1u);
  EXPECT_EQ(c.find("finish_reason")->as_string(), "tool_calls");
  // Cut: no call, "length".
  c = whole_choice(harmony_context(ToolMode::automatic), testing::kHarmonyCall, FinishReason::length);
  EXPECT_EQ(c.find("message")->find("tool_calls"), nullptr);
  EXPECT_EQ(c.find("finish_reason")->as_string(), "length");
  // No reasoning: null; include_reasoning false: no field.
  c = whole_choice(harmony_context(ToolMode::text), "<|channel|>final<|message|>4");
  EXPECT_EQ(c.find("message")->find("content")->as_string(), "4");
  EXPECT_TRUE(c.find("message")->find("reasoning_content")->is_null());
  c = whole_choice(harmony_context(ToolMode::text, false), "<|channel|>analysis<|message|>hm<|end|>");
  EXPECT_EQ(c.find("message")->find("reasoning_content"), nullptr);
  // A forced call: the prompt's header first, then the sampled arguments.
  c = whole_choice(harmony_context(ToolMode::forced, true, harmony_call_header("get_weather")), "{\"city\": \"Rome\"}");
  ASSERT_EQ(c.find("message")->find("tool_calls")->as_array().size(), 1u);
  EXPECT_EQ(c.find("finish_reason")->as_string(), "tool_calls");
}

TEST(HarmonyResponses, StreamedChunksAddUpToTheWholeAnswer) {
  const std::string text = testing::kHarmonyTexts[2];
  for (size_t a = 1; a < text.size(); ++a) {
    SCOPED_TRACE(std::to_string(a));
    const ResponseContext ctx = harmony_context(ToolMode::automatic);
    std::string reasoning, content;
    size_t calls = 0;
    std::vector<std::string> arguments;
    std::string reason;
    for (const testing::Chunk& k : testing::stream_chunks(ctx, {text.substr(0, a), text.substr(a)})) {
      reasoning += k.reasoning.value_or("");
      content += k.content.value_or("");
      for (const testing::ChunkCall& call : k.calls) {
        ASSERT_GE(call.index, 0);
        const size_t index = size_t(call.index);
        if (call.id) {  // the first delta names the call
          ASSERT_EQ(index, calls++);
          arguments.emplace_back();
        }
        ASSERT_LT(index, arguments.size());
        arguments[index] += call.arguments;
      }
      if (!k.finish_reason.empty()) reason = k.finish_reason;
    }
    const json::Value m = *whole_choice(ctx, text).find("message");
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
  const std::vector<testing::Chunk> chunks = testing::stream_chunks(ctx, {"{\"city\": ", "\"Rome\"}"});
  for (size_t i = 0; i < chunks.size(); ++i) {
    EXPECT_FALSE(chunks[i].calls.empty()) << i;  // each chunk carries the call's delta
    for (const testing::ChunkCall& call : chunks[i].calls) {
      EXPECT_EQ(call.index, 0);
      EXPECT_EQ(call.id.has_value(), i == 0);
      if (i == 0) EXPECT_EQ(call.name, "get_weather");
    }
  }
  const testing::StreamedAnswer s = testing::gather(chunks);
  EXPECT_EQ(s.fragments, (std::vector<std::vector<std::string>>{{"{\"city\": "}, {"\"Rome\"}"}}));
  EXPECT_EQ(s.reason, "tool_calls");
}

TEST(HarmonyResponses, ParallelToolCallsFalseSendsTheFirstCallOnly) {
  ResponseContext ctx = harmony_context(ToolMode::automatic);
  ctx.parallel_tool_calls = false;
  const json::Value c = whole_choice(ctx, testing::kHarmonyTexts[2]);
  const std::vector<json::Value>& calls = c.find("message")->find("tool_calls")->as_array();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].find("function")->find("name")->as_string(), "f");
  const std::vector<testing::Chunk> chunks = testing::stream_chunks(ctx, {testing::kHarmonyTexts[2]});
  ASSERT_EQ(chunks.size(), 1u);
  ASSERT_EQ(chunks[0].calls.size(), 1u);
  EXPECT_EQ(chunks[0].finish_reason, "tool_calls");
}

}  // namespace
}  // namespace attnzoo::server
