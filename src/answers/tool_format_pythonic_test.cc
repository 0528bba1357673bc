// vLLM's pythonic call format: Python literals read into JSON arguments on fixed texts, the answers that must stay
// content, and 240 random call lists against what Python's ast reads from them (python/tests/test_pythonic_fixture.py).
#include <gtest/gtest.h>

#include <string>

#include "answers/tool_format_pythonic.h"
#include "loader/json.h"
#include "loader/json_writer.h"
#include "testing/tool_request_testing.h"

namespace attnzoo::answers {
namespace {

using testing::read_test_data;

TEST(PythonicToolCalls, LiteralsBecomeJson) {
  ParsedAnswer a = parse_pythonic_tool_calls(
      "[get_weather(city='Paris', days=3, hourly=True, ratio=-1.5e2, tags=[\"a\", 'b\\'c'], extra={'k': None}),"
      " get_time()]\n");
  EXPECT_EQ(a.content, "");
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(a.calls[0].arguments).find("ratio")->as_double(), -150.0);
  const json::Value v = json::parse(a.calls[0].arguments);
  EXPECT_EQ(v.find("city")->as_string(), "Paris");
  EXPECT_EQ(v.find("days")->as_int(), 3);
  EXPECT_TRUE(v.find("hourly")->as_bool());
  EXPECT_EQ(v.find("tags")->as_array()[1].as_string(), "b'c");
  EXPECT_TRUE(v.find("extra")->find("k")->is_null());
  EXPECT_EQ(a.calls[1].name, "get_time");
  EXPECT_EQ(a.calls[1].arguments, "{}");
  a = parse_pythonic_tool_calls("[f(s=\"\\u00e9\\n\", t='''x\"y''')]");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(json::parse(a.calls[0].arguments).find("s")->as_string(), "\xc3\xa9\n");
  EXPECT_EQ(json::parse(a.calls[0].arguments).find("t")->as_string(), "x\"y");
}

TEST(PythonicToolCalls, AnythingElseIsContent) {
  for (const std::string t :
       {"Sure: [f(a=1)]", "[f(a=1)] and more", "[f(1)]", "[f(a=x)]", "[f(a=1, a=2)]", "[]", "[f(a=1)", "[f(a='x)]",
        "[f(a=g())]", "[f(a=(1, 2))]", "[a.b(c=1)]", "f(a=1)", "[f(a=1+2)]", "[f(a={1: 2})]", "[f(a=01)]"}) {
    const ParsedAnswer a = parse_pythonic_tool_calls(t);
    EXPECT_EQ(a.content, t) << t;
    EXPECT_TRUE(a.calls.empty()) << t;
  }
  EXPECT_TRUE(may_be_pythonic_calls(" \n"));
  EXPECT_TRUE(may_be_pythonic_calls(" [get"));
  EXPECT_FALSE(may_be_pythonic_calls("Hi ["));
}

TEST(PythonicToolCalls, MatchesPythonsAst) {
  // python/tests/test_pythonic_fixture.py: random call lists written by repr() / json.dumps, and broken variants,
  // with the calls Python's ast reads out of them (null: no call).
  const std::string text = read_test_data("pythonic_tool_calls.json");
  ASSERT_FALSE(text.empty());
  const json::Value cases = json::parse(text);
  size_t calls = 0;
  for (const json::Value& c : cases.as_array()) {
    const std::string& t = c.find("text")->as_string();
    const ParsedAnswer a = parse_pythonic_tool_calls(t);
    const json::Value* want = c.find("calls");
    if (want->is_null()) {
      EXPECT_TRUE(a.calls.empty()) << t;
      EXPECT_EQ(a.content, t);
      continue;
    }
    ASSERT_EQ(a.calls.size(), want->as_array().size()) << t;
    EXPECT_EQ(a.content, "") << t;
    for (size_t i = 0; i < a.calls.size(); ++i) {
      testing::expect_fixture_call(a.calls[i], want->as_array()[i], t);
      ++calls;
    }
  }
  EXPECT_GT(calls, 300u);
}

// Streamed a byte at a time, a long name and its call come out as the whole text reads them; the name is read on
// from where the last feed left it (re-reading it from its start made such a name quadratic: seconds for this one).
TEST(PythonicToolCalls, StreamedNamesGrowByteByByte) {
  const std::string name(200000, 'f');
  const std::string text = "[ " + name + "_2 (city='Paris', n=3), g()]";
  PythonicCallStream stream;
  for (size_t n = 1; n <= text.size(); ++n) stream.feed(std::string_view(text).substr(0, n));
  ASSERT_EQ(stream.calls().size(), 2u);
  EXPECT_EQ(stream.calls()[0].name, name + "_2");
  EXPECT_EQ(stream.calls()[0].arguments, R"({"city":"Paris","n":3})");
  EXPECT_EQ(stream.calls()[1].name, "g");
  EXPECT_EQ(stream.calls()[1].arguments, "{}");
}

}  // namespace
}  // namespace attnzoo::answers
