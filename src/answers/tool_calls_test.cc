// Reading Hermes <tool_call> blocks out of answers (vLLM's hermes parser semantics, one malformed block kept as
// content instead of dropping every call), the modes, unique ids (a request's tool fields and the streamed
// responses: server/tool_request_test.cc, server/responses_tool_calls_test.cc).
#include "answers/tool_calls.h"

#include <gtest/gtest.h>

#include <set>
#include <tuple>
#include <vector>
#include <string>

#include "loader/json.h"
#include "testing/tool_request_testing.h"

namespace attnzoo::answers {
namespace {

using testing::args_of;

TEST(HermesToolCalls, ContentAndTwoCalls) {
  const std::string text =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\", \"exact\": true, "
      "\"x\": [1.5, null]}}\n</tool_call>";
  const ParsedAnswer a = parse_hermes_tool_calls(text);
  EXPECT_EQ(a.content, "Let me check.\n");
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(args_of(a.calls[0]).find("city")->as_string(), "Paris");
  EXPECT_EQ(args_of(a.calls[0]).find("days")->as_int(), 2);
  EXPECT_EQ(a.calls[1].name, "get_time");
  const json::Value t = args_of(a.calls[1]);
  EXPECT_TRUE(t.find("exact")->as_bool());
  EXPECT_DOUBLE_EQ(t.find("x")->as_array()[0].as_double(), 1.5);
  EXPECT_TRUE(t.find("x")->as_array()[1].is_null());
  EXPECT_NE(a.calls[0].id, a.calls[1].id);
  EXPECT_EQ(a.calls[0].id.rfind("call_", 0), 0u);
}

TEST(HermesToolCalls, OneBrokenBlockMakesTheAnswerContent) {
  // vLLM's hermes reads every block in one try: one that is not a call, and the whole answer is content.
  const std::string bad = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }\n</tool_call>";
  const std::string good = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
  ParsedAnswer a = parse_hermes_tool_calls("Hi " + bad + "\n" + good);
  EXPECT_EQ(a.content, "Hi " + bad + "\n" + good);
  EXPECT_TRUE(a.calls.empty());
  a = parse_hermes_tool_calls("Hi " + good + "\n" + bad);
  EXPECT_EQ(a.content, "Hi " + good + "\n" + bad);
  EXPECT_TRUE(a.calls.empty());
  a = parse_hermes_tool_calls("Hi " + good);
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].name, "f");
  EXPECT_EQ(a.calls[0].arguments, "{}");
  // Not calls: no name, a name that is not a string, arguments that are not an object, not an object at all.
  for (const char* body : {"{\"arguments\": {}}", "{\"name\": 3}", "{\"name\": \"f\", \"arguments\": [1]}", "[1]"}) {
    const std::string t = std::string("<tool_call>") + body + "</tool_call>";
    a = parse_hermes_tool_calls(t);
    EXPECT_TRUE(a.calls.empty()) << body;
    EXPECT_EQ(a.content, t);
  }
}

TEST(HermesToolCalls, NoCallsAndUnclosedLastBlock) {
  ParsedAnswer a = parse_hermes_tool_calls("Paris is sunny. <tool_ca");
  EXPECT_EQ(a.content, "Paris is sunny. <tool_ca");
  EXPECT_TRUE(a.calls.empty());
  // The model may end its turn without closing the block (vLLM's second pattern).
  a = parse_hermes_tool_calls("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"</\"}}\n");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.content, "");
  EXPECT_EQ(args_of(a.calls[0]).find("a")->as_string(), "</");
  // Arguments sent as a JSON string holding the object are taken as that string.
  a = parse_hermes_tool_calls("<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].arguments, "{\"a\": 1}");
}

TEST(HermesToolCalls, ReadAnswerModes) {
  const std::string two = "<tool_call>{\"name\": \"f\"}</tool_call><tool_call>{\"name\": \"g\"}</tool_call>";
  EXPECT_EQ(read_answer(two, ToolMode::automatic, true).calls.size(), 2u);
  EXPECT_EQ(read_answer(two, ToolMode::automatic, false).calls.size(), 1u);
  EXPECT_EQ(read_answer(two, ToolMode::text, true).content, two);
  EXPECT_TRUE(read_answer(two, ToolMode::text, true).calls.empty());
  const ParsedAnswer forced = read_answer("{\"name\": \"f\", \"arguments\": {\"q\": 1}}", ToolMode::forced, true);
  ASSERT_EQ(forced.calls.size(), 1u);
  EXPECT_EQ(forced.calls[0].name, "f");
  EXPECT_EQ(read_answer("{\"name\": \"f\", \"argu", ToolMode::forced, true).content, "{\"name\": \"f\", \"argu");
}

TEST(HermesToolCalls, IdsAreUnique) {
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) ids.insert(new_tool_call_id());
  EXPECT_EQ(ids.size(), 1000u);
}

}  // namespace
}  // namespace attnzoo::answers
