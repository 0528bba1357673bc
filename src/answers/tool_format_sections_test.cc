// The DeepSeek-V3 / V3.1, Kimi-K2 and pythonic call formats: vLLM's deepseek_v3 / deepseek_v31 / kimi_k2
// parser rules on fixed texts (several calls, content before the section, broken JSON kept as content, a missing end
// marker, an answer cut inside a call), the format read off the published templates, and Python-made answers against
// vLLM's regular expressions (the forced openings, the history's arguments and the streamed chunks:
// server/tool_request_test.cc, server/responses_tool_sections_test.cc).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chat/value.h"
#include "core/error.h"
#include "loader/json.h"
#include "loader/json_writer.h"
#include "answers/tool_calls.h"
#include "answers/tool_format_sections.h"
#include "testing/tool_request_testing.h"

namespace attnzoo::answers {
namespace {

using testing::read_test_data;

std::string args(const ToolCall& c) {
  json::Writer w;
  w.value(json::parse(c.arguments));
  return w.take();
}

const std::string kB = std::string(kDeepSeekCallsBegin), kE = std::string(kDeepSeekCallsEnd),
                  kCB = std::string(kDeepSeekCallBegin), kCE = std::string(kDeepSeekCallEnd),
                  kSep = std::string(kDeepSeekSep);

std::string v3_call(const std::string& name, const std::string& json) {
  return kCB + "function" + kSep + name + "\n```json\n" + json + "\n```" + kCE;
}

TEST(DeepSeekV3ToolCalls, ContentAndTwoCalls) {
  const std::string text = "Let me check." + kB + v3_call("get_weather", R"({"city": "Paris"})") + "\n" +
                           v3_call("get_time", "{}") + kE;
  const ParsedAnswer a = parse_deepseek_v3_tool_calls(text);
  EXPECT_EQ(a.content, "Let me check.");
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(args(a.calls[0]), R"({"city":"Paris"})");
  EXPECT_EQ(a.calls[1].name, "get_time");
  EXPECT_EQ(a.calls[1].arguments, "{}");
  EXPECT_TRUE(a.calls[0].id.starts_with("call_"));
  EXPECT_NE(a.calls[0].id, a.calls[1].id);
}

TEST(DeepSeekV3ToolCalls, BrokenCutAndMissing) {
  // A block with broken JSON stays in the content, the good one is a call.
  const std::string broken = v3_call("f", R"({"a": )");
  ParsedAnswer a = parse_deepseek_v3_tool_calls(kB + broken + v3_call("g", R"({"b": 2})") + kE);
  EXPECT_EQ(a.content, broken);
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].name, "g");
  // No end markers at all (the model stopped after the object): still a call.
  a = parse_deepseek_v3_tool_calls("x" + kB + kCB + "function" + kSep + "f\n```json\n{\"a\": [1, 2]}\n```");
  EXPECT_EQ(a.content, "x");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(args(a.calls[0]), R"({"a":[1,2]})");
  // Cut inside the arguments (max_tokens): no call, the whole answer is content.
  const std::string cut = "x" + kB + kCB + "function" + kSep + "f\n```json\n{\"a\": [1, ";
  a = parse_deepseek_v3_tool_calls(cut);
  EXPECT_EQ(a.content, cut);
  EXPECT_TRUE(a.calls.empty());
  // No section, a section without a separator, the V3.1 shape: content.
  for (const std::string& t : {std::string("just text"), kB + kCB + "f{}" + kCE + kE,
                               kB + kCB + "f" + kSep + "{}" + kCE + kE}) {
    a = parse_deepseek_v3_tool_calls(t);
    EXPECT_EQ(a.content, t);
    EXPECT_TRUE(a.calls.empty());
  }
  // Text after the section that is not whitespace stays content (vLLM drops it).
  a = parse_deepseek_v3_tool_calls(kB + v3_call("f", "{}") + kE + " done");
  EXPECT_EQ(a.content, " done");
  EXPECT_EQ(a.calls.size(), 1u);
}

TEST(DeepSeekV31ToolCalls, CallsBrokenAndCut) {
  ParsedAnswer a = parse_deepseek_v31_tool_calls("normal text" + kB + kCB + "foo" + kSep + R"({"x":1})" + kCE + kCB +
                                                 "bar" + kSep + R"({"y": {"z": "<｜tool▁call▁end｜>"}})" + kCE + kE);
  // The end marker inside a string ends the block (as vLLM's regex does); the JSON is not whole there, so the second
  // block comes back as content, all of its text kept.
  EXPECT_EQ(a.content, "normal text" + kCB + "bar" + kSep + R"({"y": {"z": ")" + kCE + R"("}})" + kCE);
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].name, "foo");
  EXPECT_EQ(a.calls[0].arguments, R"({"x":1})");
  a = parse_deepseek_v31_tool_calls(kB + kCB + "foo" + kSep + R"({"x": 1})" + kCE + kCB + "bar" + kSep +
                                    R"({"y": 2})");  // the last call and the section never closed
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.content, "");
  EXPECT_EQ(a.calls[1].name, "bar");
  EXPECT_EQ(args(a.calls[1]), R"({"y":2})");
  const std::string cut = kB + kCB + "foo" + kSep + R"({"x": )";
  a = parse_deepseek_v31_tool_calls(cut);
  EXPECT_EQ(a.content, cut);
  EXPECT_TRUE(a.calls.empty());
  const std::string not_object = kB + kCB + "foo" + kSep + "[1]" + kCE + kE;
  a = parse_deepseek_v31_tool_calls(not_object);
  EXPECT_EQ(a.content, not_object);
  EXPECT_TRUE(a.calls.empty());
}

TEST(KimiK2ToolCalls, IdsNamesAndContent) {
  const std::string text =
      "I'll look.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
      "{\"city\": \"Paris\"}<|tool_call_end|><|tool_call_begin|> get_time:1 <|tool_call_argument_begin|>{}"
      "<|tool_call_end|><|tool_calls_section_end|>";
  ParsedAnswer a = parse_kimi_k2_tool_calls(text);
  EXPECT_EQ(a.content, "I'll look.");
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.calls[0].id, "functions.get_weather:0");
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(args(a.calls[0]), R"({"city":"Paris"})");
  EXPECT_EQ(a.calls[1].id, "get_time:1");
  EXPECT_EQ(a.calls[1].name, "get_time");
  // An id without ":IDX", broken JSON: that block stays content; none left: all of it is content.
  const std::string bad = "<|tool_call_begin|>functions.f<|tool_call_argument_begin|>{}<|tool_call_end|>";
  a = parse_kimi_k2_tool_calls("<|tool_calls_section_begin|>" + bad +
                               "<|tool_call_begin|>functions.g:1<|tool_call_argument_begin|>{\"a\": 1}");
  EXPECT_EQ(a.content, bad);
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].name, "g");
  const std::string cut = "x<|tool_calls_section_begin|><|tool_call_begin|>functions.g:0<|tool_call_argument_begin|>"
                          "{\"a\": ";
  a = parse_kimi_k2_tool_calls(cut);
  EXPECT_EQ(a.content, cut);
  EXPECT_TRUE(a.calls.empty());
}

TEST(ToolFormat, SectionAndPythonicDetectedFromRealTemplates) {
  const std::vector<std::pair<std::string, ToolFormat>> cases = {
      {"deepseek-ai-DeepSeek-V3.jinja", ToolFormat::deepseek_v3},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", ToolFormat::deepseek_v3},
      {"deepseek-ai-DeepSeek-V3.1.jinja", ToolFormat::deepseek_v31},
      {"moonshotai-Kimi-K2.jinja", ToolFormat::kimi_k2},
      {"vllm-llama3.2-pythonic.jinja", ToolFormat::pythonic},
      {"meta-llama-Llama-3.2-3B-Instruct.jinja", ToolFormat::llama3_json}};
  testing::expect_detected(cases);
  for (const char* name : {"deepseek_v3", "deepseek_v31", "kimi_k2", "pythonic"})
    EXPECT_STREQ(tool_format_name(parse_tool_call_parser(name)), name);
  try {
    parse_tool_call_parser("granite");
    ADD_FAILURE();
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("kimi_k2"), std::string::npos) << e.what();
  }
}

TEST(SectionToolCalls, MatchVllmRegexes) {
  // python/tests/test_section_calls_fixture.py: random closed answers in each format with the content and calls
  // vLLM's deepseek_v3 / deepseek_v31 / kimi_k2 regular expressions and Python's json read from them.
  const std::string text = read_test_data("section_tool_calls.json");
  ASSERT_FALSE(text.empty());
  const json::Value cases = json::parse(text);
  size_t calls = 0;
  for (const json::Value& c : cases.as_array()) {
    const std::string& format = c.find("format")->as_string();
    const std::string& t = c.find("text")->as_string();
    const ToolFormat f = parse_tool_call_parser(format);
    const ParsedAnswer a = read_answer(t, ToolMode::automatic, true, f);
    EXPECT_EQ(a.content, c.find("content")->as_string()) << t;
    const json::Array& want = c.find("calls")->as_array();
    ASSERT_EQ(a.calls.size(), want.size()) << t;
    for (size_t i = 0; i < want.size(); ++i) {
      testing::expect_fixture_call(a.calls[i], want[i], t);
      ++calls;
    }
  }
  EXPECT_GT(calls, 300u);
}

}  // namespace
}  // namespace attnzoo::answers
