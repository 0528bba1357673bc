// Tool calls as OpenAI response objects (server/responses.h over answers/tool_calls.h): Hermes, Llama 3.x JSON and
// Mistral answers whole and streamed (text before a call goes out as it comes, a partial marker is held, a call goes
// out as it is written), finish_reason tool_calls.
#include "server/responses.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "answers/tool_calls.h"
#include "loader/json.h"
#include "testing/response_stream_testing.h"

namespace attnzoo::server {
namespace {

using answers::ToolFormat;
using answers::ToolMode;

// Streaming: text before the tag goes out as it comes, a partial tag is held, a call goes out as it is written.
TEST(ToolStream, ContentThenCalls) {
  std::string content, tool_calls, arguments, reason;
  for (const testing::Chunk& k : testing::stream_chunks(
           testing::chat_context(ToolMode::automatic),
           {"Sure", ". <tool", "_call>\n{\"name\": \"f\", ", "\"arguments\": {\"a\": 1}}\n</tool_call>", ""})) {
    content += k.content.value_or("");
    for (const testing::ChunkCall& c : k.calls) {
      // vLLM's shapes: the first delta has id, type and name; later ones only arguments.
      EXPECT_EQ(c.index, 0);
      if (c.name) {
        EXPECT_TRUE(tool_calls.empty());
        EXPECT_EQ(c.type, "function");
        tool_calls = *c.name;
      } else {
        EXPECT_FALSE(c.id);
      }
      arguments += c.arguments;
    }
    if (!k.finish_reason.empty()) reason = k.finish_reason;
  }
  EXPECT_EQ(content, "Sure. ");
  EXPECT_EQ(tool_calls, "f");
  EXPECT_EQ(arguments, "{\"a\": 1}");
  EXPECT_EQ(reason, "tool_calls");
}

// Without a call every byte comes out as content, a held tail that only looked like the tag included; a forced call
// streams as an "auto" one does; one cut by max_tokens has been announced (its name was whole) and its text comes
// back as content with "length", as the whole answer reports it.
TEST(ToolStream, PlainTextAndForcedCalls) {
  const auto stream = [](ToolMode mode, std::vector<std::string> pieces, FinishReason end) {
    const testing::StreamedAnswer s = testing::gather(testing::stream_chunks(testing::chat_context(mode), pieces, end));
    return std::make_tuple(s.contents, int(s.ids.size()), s.reason);
  };
  auto [contents, calls, reason] = stream(ToolMode::automatic, {"a <", "b <tool", ""}, FinishReason::stop);
  EXPECT_EQ(contents, (std::vector<std::string>{"a ", "<b ", "<tool"}));
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(reason, "stop");
  std::tie(contents, calls, reason) =
      stream(ToolMode::forced, {"{\"name\": \"f\", ", "\"arguments\": {}}", ""}, FinishReason::stop);
  EXPECT_EQ(contents, (std::vector<std::string>{"", "", ""}));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(reason, "tool_calls");
  std::tie(contents, calls, reason) = stream(ToolMode::forced, {"{\"name\": \"f\", ", "\"argu"}, FinishReason::length);
  EXPECT_EQ(contents, (std::vector<std::string>{"", "{\"name\": \"f\", \"argu"}));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(reason, "length");
}

// The whole answer: content null beside calls, "tool_calls" for a finished answer with calls, text mode untouched.
TEST(ToolAnswer, FullResponse) {
  ResponseContext ctx = testing::chat_context(ToolMode::automatic);
  Choice called, plain;
  called.text = "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1}}</tool_call>";
  called.finish_reason = FinishReason::stop;
  plain.text = "hello";
  plain.finish_reason = FinishReason::stop;
  const json::Value r = json::parse(full_response(ctx, {called, plain}, Usage{}, false));
  const json::Value& a = r.find("choices")->as_array()[0];
  EXPECT_TRUE(a.find("message")->find("content")->is_null());
  EXPECT_EQ(a.find("message")->find("tool_calls")->as_array()[0].find("function")->find("arguments")->as_string(),
            "{\"x\": 1}");  // as the model wrote it
  EXPECT_EQ(a.find("finish_reason")->as_string(), "tool_calls");
  const json::Value& b = r.find("choices")->as_array()[1];
  EXPECT_EQ(b.find("message")->find("content")->as_string(), "hello");
  EXPECT_EQ(b.find("message")->find("tool_calls"), nullptr);
  EXPECT_EQ(b.find("finish_reason")->as_string(), "stop");
  ctx.tool_mode = ToolMode::text;
  const json::Value t = json::parse(full_response(ctx, {called}, Usage{}, false));
  EXPECT_EQ(t.find("choices")->as_array()[0].find("message")->find("content")->as_string(), called.text);
}

testing::StreamedAnswer stream(ToolFormat format, const std::vector<std::string>& pieces) {
  return testing::gather(testing::stream_chunks(testing::chat_context(ToolMode::automatic, format), pieces));
}

TEST(ToolFormat, StreamedLlama3) {
  // A '{' or <|python_tag|> start is held to the end; any other start streams from the first byte that rules a call
  // out (a lone "<|py" could still be the tag).
  testing::StreamedAnswer s =
      stream(ToolFormat::llama3_json, {" ", "<|py", "thon_tag|>{\"name\": \"f\", ", "\"parameters\": {}}", ""});
  EXPECT_EQ(s.contents, (std::vector<std::string>{"", "", "", "", ""}));
  EXPECT_EQ(s.names, (std::vector<std::string>{"f"}));
  EXPECT_EQ(s.reason, "tool_calls");
  s = stream(ToolFormat::llama3_json, {"<|p", "x Hi", " {\"name\": \"f\", \"parameters\": {}}", ""});
  EXPECT_EQ(s.contents, (std::vector<std::string>{"", "<|px Hi", " {\"name\": \"f\", \"parameters\": {}}", ""}));
  EXPECT_TRUE(s.names.empty());
  EXPECT_EQ(s.reason, "stop");
  s = stream(ToolFormat::llama3_json, {"{\"a\": ", "1} no", ""});  // held, then no call: all of it at the end
  EXPECT_EQ(s.contents, (std::vector<std::string>{"", "", "{\"a\": 1} no"}));
  EXPECT_TRUE(s.names.empty());
}

TEST(ToolFormat, StreamedMistral) {
  testing::StreamedAnswer s = stream(ToolFormat::mistral, {"Sure", ". [TOOL", "_CALLS][{\"name\": \"f\", \"arguments\": {}}, ",
                                            "{\"name\": \"g\", \"arguments\": {}}]", ""});
  EXPECT_EQ(s.contents, (std::vector<std::string>{"Sure", ". ", "", "", ""}));
  EXPECT_EQ(s.names, (std::vector<std::string>{"f", "g"}));
  EXPECT_EQ(s.reason, "tool_calls");
  s = stream(ToolFormat::mistral, {"a [TOOL", "S]", ""});
  EXPECT_EQ(s.contents, (std::vector<std::string>{"a ", "[TOOLS]", ""}));
  EXPECT_TRUE(s.names.empty());
}

TEST(ToolFormat, FullResponseMistral) {
  const ResponseContext ctx = testing::chat_context(ToolMode::automatic, ToolFormat::mistral);
  Choice called;
  called.text = "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"x\": 1}}]";
  called.finish_reason = FinishReason::stop;
  const json::Value r = json::parse(full_response(ctx, {called}, Usage{}, false));
  const json::Value& a = r.find("choices")->as_array()[0];
  EXPECT_TRUE(a.find("message")->find("content")->is_null());
  const json::Value& call = a.find("message")->find("tool_calls")->as_array()[0];
  EXPECT_EQ(call.find("id")->as_string().size(), 9u);
  EXPECT_EQ(call.find("function")->find("arguments")->as_string(), "{\"x\": 1}");  // as the model wrote it
  EXPECT_EQ(a.find("finish_reason")->as_string(), "tool_calls");
}

}  // namespace
}  // namespace attnzoo::server
