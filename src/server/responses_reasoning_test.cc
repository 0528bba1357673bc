// The reasoning fields of chat answers (server/responses.h over answers/reasoning.h): whole and streamed,
// reasoning_content beside the content, tool calls read from the content only, include_reasoning false.
#include "server/responses.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "answers/reasoning.h"
#include "answers/tool_calls.h"
#include "loader/json.h"
#include "testing/response_stream_testing.h"
#include "testing/stream_split_testing.h"

namespace attnzoo::server {
namespace {

using answers::ReasoningParser;
using answers::ToolMode;

using P = ReasoningParser;

ResponseContext chat_context(P parser, ToolMode mode = ToolMode::text, bool include = true) {
  ResponseContext ctx = testing::chat_context(mode);
  ctx.reasoning = parser;
  ctx.include_reasoning = include;
  return ctx;
}

json::Value whole(const ResponseContext& ctx, const std::string& text) { return testing::whole_choice(ctx, text); }

TEST(ReasoningResponses, WholeAnswer) {
  const json::Value m = *whole(chat_context(P::qwen3), "<think>hm</think>\n\n4").find("message");
  EXPECT_EQ(m.find("reasoning_content")->as_string(), "hm");
  EXPECT_EQ(m.find("content")->as_string(), "\n\n4");
  // Empty content is null beside the reasoning.
  EXPECT_TRUE(whole(chat_context(P::deepseek_r1), "hm").find("message")->find("content")->is_null());
  EXPECT_TRUE(whole(chat_context(P::qwen3), "4").find("message")->find("reasoning_content")->is_null());
  // include_reasoning false: no field at all.
  EXPECT_EQ(whole(chat_context(P::qwen3, ToolMode::text, false), "<think>hm</think>4").find("message")->find(
                "reasoning_content"),
            nullptr);
  // No parser: the tags stay in the content, no reasoning field.
  const json::Value plain = *whole(chat_context(P::none), "<think>hm</think>4").find("message");
  EXPECT_EQ(plain.find("content")->as_string(), "<think>hm</think>4");
  EXPECT_EQ(plain.find("reasoning_content"), nullptr);
}

TEST(ReasoningResponses, ToolCallsAreReadFromTheContentOnly) {
  const std::string call = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>";
  const json::Value c = whole(chat_context(P::qwen3, ToolMode::automatic), "<think>maybe " + call + "</think>" + call);
  const json::Value& m = *c.find("message");
  EXPECT_EQ(m.find("reasoning_content")->as_string(), "maybe " + call);
  ASSERT_EQ(m.find("tool_calls")->as_array().size(), 1u);
  EXPECT_TRUE(m.find("content")->is_null());
  EXPECT_EQ(c.find("finish_reason")->as_string(), "tool_calls");
}

// The SSE chunks of one choice fed `pieces`, read back into the reasoning, content and calls they carry.
struct Streamed {
  std::string reasoning, content;
  size_t calls = 0;
  bool reasoning_after_content = false;
};

Streamed stream_answer(const ResponseContext& ctx, const std::vector<std::string>& pieces) {
  Streamed out;
  for (const testing::Chunk& k : testing::stream_chunks(ctx, pieces)) {
    if (k.reasoning) {
      out.reasoning_after_content = out.reasoning_after_content || !out.content.empty();
      out.reasoning += *k.reasoning;
    }
    out.content += k.content.value_or("");
    for (const testing::ChunkCall& c : k.calls) out.calls += c.id.has_value();  // a call's first delta carries its id
  }
  return out;
}

TEST(ReasoningResponses, StreamedEqualsWholeAtEveryCut) {
  const std::string call = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
  const std::string text = "<think>a <tool_call> b</think>Sure." + call;
  for (P parser : {P::qwen3, P::deepseek_r1})
    for (size_t a = 1; a < text.size(); ++a) {
      SCOPED_TRACE(std::to_string(a));
      const ResponseContext ctx = chat_context(parser, ToolMode::automatic);
      const Streamed s = stream_answer(ctx, {text.substr(0, a), text.substr(a)});
      const json::Value m = *whole(ctx, text).find("message");
      EXPECT_EQ(s.reasoning, m.find("reasoning_content")->as_string());
      EXPECT_EQ(s.content, m.find("content")->as_string());
      EXPECT_EQ(s.calls, m.find("tool_calls")->as_array().size());
      EXPECT_FALSE(s.reasoning_after_content);
    }
}

}  // namespace
}  // namespace attnzoo::server
