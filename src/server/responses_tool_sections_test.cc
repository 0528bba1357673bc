// DeepSeek-V3 / V3.1, Kimi-K2 and pythonic calls streamed as OpenAI chunks (server/responses.h over
// answers/tool_stream.h): content, the calls' ids and names, their arguments' fragments as they are written.
#include "server/responses.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "answers/tool_calls.h"
#include "answers/tool_format_sections.h"
#include "loader/json.h"
#include "testing/response_stream_testing.h"

namespace attnzoo::server {
namespace {

using answers::ToolFormat;
using answers::ToolMode;
using answers::kDeepSeekCallBegin;
using answers::kDeepSeekCallEnd;
using answers::kDeepSeekCallsBegin;
using answers::kDeepSeekCallsEnd;
using answers::kDeepSeekSep;

const std::string kB = std::string(kDeepSeekCallsBegin), kE = std::string(kDeepSeekCallsEnd),
                  kCB = std::string(kDeepSeekCallBegin), kCE = std::string(kDeepSeekCallEnd),
                  kSep = std::string(kDeepSeekSep);

// (fragments: per chunk, the argument text each of its deltas carried)
testing::StreamedAnswer stream(ToolFormat format, const std::vector<std::string>& pieces,
                               ToolMode mode = ToolMode::automatic, const std::string& forced_name = {}) {
  ResponseContext ctx = testing::chat_context(mode, format);
  ctx.tool_forced_name = forced_name;
  return testing::gather(testing::stream_chunks(ctx, pieces));
}

TEST(ToolFormat, StreamedSectionsAndPythonic) {
  // Content streams until a possible start of the section's marker; a Kimi call goes out once its id is whole (the
  // argument marker follows it), then the arguments as they are written.
  testing::StreamedAnswer s = stream(ToolFormat::kimi_k2,
                      {"Sure", ". <|tool_calls_sec", "tion_begin|><|tool_call_begin|>functions.f:0",
                       "<|tool_call_argument_begin|>", "{\"a\": ", "1, \"b\"", ": 2}<|tool_call_end|>", ""});
  EXPECT_EQ(s.contents, (std::vector<std::string>{"Sure", ". ", "", "", "", "", "", ""}));
  EXPECT_EQ(s.ids, (std::vector<std::string>{"functions.f:0"}));
  EXPECT_EQ(s.fragments, (std::vector<std::vector<std::string>>{
                             {}, {}, {}, {""}, {"{\"a\": "}, {"1, \"b\""}, {": 2}"}, {}}));
  EXPECT_EQ(s.reason, "tool_calls");
  s = stream(ToolFormat::deepseek_v31, {"a ", kB.substr(0, 5), "x", ""});  // a partial marker that was not one
  EXPECT_EQ(s.contents, (std::vector<std::string>{"a ", "", kB.substr(0, 5) + "x", ""}));
  EXPECT_TRUE(s.names.empty());
  // DeepSeek-V3: the name goes out with the fence's '{', not before (the fence's language could still rule it out).
  s = stream(ToolFormat::deepseek_v3, {kB + kCB + "function" + kSep + "get_weather\n``", "`json\n", "{\"city\"",
                                       ": \"Rome\"}\n```" + kCE + kE, ""});
  EXPECT_EQ(s.fragments, (std::vector<std::vector<std::string>>{
                             {}, {}, {"{\"city\""}, {": \"Rome\"}"}, {}}));
  EXPECT_EQ(s.names, (std::vector<std::string>{"get_weather"}));
  // Pythonic: a call once '(' follows its name, its arguments as JSON one keyword at a time (once its value ends).
  s = stream(ToolFormat::pythonic, {" [get_", "time(), f(a=", "1", ", b='x')]", ""});
  EXPECT_EQ(s.contents, (std::vector<std::string>{"", "", "", "", ""}));
  EXPECT_EQ(s.names, (std::vector<std::string>{"get_time", "f"}));
  EXPECT_EQ(s.fragments, (std::vector<std::vector<std::string>>{{}, {"{}", "{"}, {}, {"\"a\":1,\"b\":\"x\"}"}, {}}));
  EXPECT_EQ(s.reason, "tool_calls");
  s = stream(ToolFormat::pythonic, {"Hi [f()]", " ok", ""});
  EXPECT_EQ(s.contents, (std::vector<std::string>{"Hi [f()]", " ok", ""}));
  EXPECT_TRUE(s.names.empty());
  // Forced: the prompt's opening named the function, the arguments stream from the first piece.
  s = stream(ToolFormat::deepseek_v3, {"{\"city\": ", "\"Rome\"}"}, ToolMode::forced, "get_weather");
  EXPECT_EQ(s.names, (std::vector<std::string>{"get_weather"}));
  EXPECT_EQ(s.fragments, (std::vector<std::vector<std::string>>{{"{\"city\": "}, {"\"Rome\"}"}}));
  EXPECT_EQ(s.reason, "tool_calls");
  s = stream(ToolFormat::kimi_k2, {"{\"city\": ", "\"Rome\"}"}, ToolMode::forced, "get_weather");
  EXPECT_EQ(s.ids, (std::vector<std::string>{"functions.get_weather:0"}));
}

}  // namespace
}  // namespace attnzoo::server
