// The DeepSeek-V3 / V3.1, Kimi-K2 and pythonic call formats: vLLM's deepseek_v3 / deepseek_v31 / kimi_k2
// parser rules on fixed texts (several calls, content before the section, broken JSON kept as content, a missing end
// marker, an answer cut inside a call), the format read off the published templates, the forced opening and
// schema, the refusals of forced choices the formats cannot hold, the history's arguments, and the streamed form.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chat/value.h"
#include "core/error.h"
#include "loader/json.h"
#include "loader/json_writer.h"
#include "server/api_error.h"
#include "server/responses.h"
#include "server/tool_calls.h"
#include "server/tool_format_sections.h"
#include "server/tool_request.h"
#include "testing/tool_request_testing.h"

namespace attnzoo::server {
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
  for (const auto& [file, format] : cases) {
    const std::string src = read_test_data("chat_templates/" + file);
    ASSERT_FALSE(src.empty()) << file;
    EXPECT_EQ(detect_tool_format(src), format) << file;
  }
  for (const char* name : {"deepseek_v3", "deepseek_v31", "kimi_k2", "pythonic"})
    EXPECT_STREQ(tool_format_name(parse_tool_call_parser(name)), name);
  try {
    parse_tool_call_parser("granite");
    ADD_FAILURE();
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("kimi_k2"), std::string::npos) << e.what();
  }
}

std::string canonical(const json::Value& v) {
  json::Writer w;
  w.value(v);
  return w.take();
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
      EXPECT_EQ(a.calls[i].name, want[i].find("name")->as_string()) << t;
      EXPECT_EQ(canonical(json::parse(a.calls[i].arguments)), canonical(*want[i].find("arguments"))) << t;
      if (const json::Value* id = want[i].find("id")) EXPECT_EQ(a.calls[i].id, id->as_string()) << t;
      else EXPECT_TRUE(a.calls[i].id.starts_with("call_")) << t;
      ++calls;
    }
  }
  EXPECT_GT(calls, 300u);
}

using testing::accepts;
using testing::kTools;

ToolRequest forced(const std::string& choice, ToolFormat f, const std::string& tools = kTools) {
  return parse_tool_fields(json::parse("{\"tools\": " + tools + ", \"tool_choice\": " + choice + "}"), true, f);
}

TEST(ToolFormat, ForcedSectionCalls) {
  const std::string named = R"({"type": "function", "function": {"name": "get_weather"}})";
  ToolRequest r = forced(named, ToolFormat::deepseek_v3);
  EXPECT_EQ(r.forced_prefix, kB + kCB + "function" + kSep + "get_weather\n```json\n");
  EXPECT_EQ(r.forced_name, "get_weather");
  ASSERT_TRUE(r.schema);
  EXPECT_TRUE(accepts(*r.schema, R"({"city": "Rome"})"));
  EXPECT_FALSE(accepts(*r.schema, R"({"name": "get_weather", "arguments": {"city": "Rome"}})"));
  EXPECT_EQ(forced(named, ToolFormat::deepseek_v31).forced_prefix, kB + kCB + "get_weather" + kSep);
  r = forced(named, ToolFormat::kimi_k2);
  EXPECT_EQ(r.forced_prefix,
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>");
  ParsedAnswer a = read_answer(R"({"city": "Rome"})", ToolMode::forced, true, ToolFormat::kimi_k2, "get_weather");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].id, "functions.get_weather:0");
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(a.calls[0].arguments, R"({"city": "Rome"})");  // as the model wrote it
  a = read_answer(R"({"city": "Ro)", ToolMode::forced, true, ToolFormat::deepseek_v31, "get_weather");  // cut
  EXPECT_TRUE(a.calls.empty());
  EXPECT_EQ(a.content, R"({"city": "Ro)");
  // "required" with one tool is that tool; with several it is refused, naming the format.
  const std::string one = R"([{"type": "function", "function": {"name": "get_time"}}])";
  r = forced("\"required\"", ToolFormat::deepseek_v31, one);
  EXPECT_EQ(r.forced_name, "get_time");
  EXPECT_TRUE(accepts(*r.schema, "{}"));
  for (ToolFormat f : {ToolFormat::deepseek_v3, ToolFormat::deepseek_v31, ToolFormat::kimi_k2}) {
    try {
      forced("\"required\"", f);
      ADD_FAILURE();
    } catch (const ApiError& e) {
      EXPECT_EQ(std::string(e.param), "tool_choice");
      EXPECT_NE(std::string(e.what()).find(tool_format_name(f)), std::string::npos) << e.what();
    }
  }
  for (const std::string& choice : {named, std::string("\"required\"")}) {
    try {
      forced(choice, ToolFormat::pythonic);
      ADD_FAILURE();
    } catch (const ApiError& e) {
      EXPECT_EQ(std::string(e.param), "tool_choice");
      EXPECT_NE(std::string(e.what()).find("pythonic"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(forced("\"auto\"", ToolFormat::pythonic).mode, ToolMode::automatic);
}

TEST(ToolFormat, DeepSeekHistoryKeepsArgumentsText) {
  // DeepSeek's templates concatenate the arguments, so they stay text (as sent); other formats get the object.
  const json::Value msgs = json::parse(R"([{"role": "assistant", "content": null, "tool_calls": [{"id": "c1",
      "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}, {"type": "function",
      "function": {"name": "g", "arguments": {"b": 2}}}]}])");
  const auto arguments = [&](ToolFormat f, size_t i) {
    const chat::Value m = chat_messages(msgs, f);
    const chat::Value* call = &m.as_list()[0].as_dict().find("tool_calls")->as_list()[i];
    return *call->as_dict().find("function")->as_dict().find("arguments");
  };
  EXPECT_EQ(arguments(ToolFormat::deepseek_v3, 0).as_string(), "{\"a\": 1}");
  EXPECT_EQ(arguments(ToolFormat::deepseek_v31, 1).as_string(), "{\"b\":2}");
  EXPECT_FALSE(arguments(ToolFormat::kimi_k2, 0).is_string());
  const json::Value bad = json::parse(R"([{"role": "assistant", "tool_calls": [{"type": "function",
      "function": {"name": "f", "arguments": "[1]"}}]}])");
  EXPECT_THROW(chat_messages(bad, ToolFormat::deepseek_v3), ApiError);
}

struct Streamed {
  std::vector<std::string> contents;
  std::vector<std::string> ids, names;
  std::vector<std::vector<std::string>> fragments;  // per chunk, the argument text each of its deltas carried
  std::string reason;
};

Streamed stream(ToolFormat format, const std::vector<std::string>& pieces, ToolMode mode = ToolMode::automatic,
                const std::string& forced_name = {}) {
  ResponseContext ctx{Endpoint::chat_completions, "chatcmpl-1", 0, "m", nullptr, mode, true};
  ctx.tool_format = format;
  ctx.tool_forced_name = forced_name;
  StreamWriter w(ctx, 1, false, false);
  Streamed out;
  for (size_t i = 0; i < pieces.size(); ++i) {
    SampleDelta d;
    d.text = pieces[i];
    if (i + 1 == pieces.size()) d.finish_reason = FinishReason::stop;
    const std::string e = w.chunk(d);
    const json::Value c = json::parse(e.substr(6, e.size() - 8));
    const json::Value& choice = c.find("choices")->as_array()[0];
    const json::Value* t = choice.find("delta")->find("content");
    out.contents.push_back(t ? t->as_string() : "");
    out.fragments.emplace_back();
    if (const json::Value* calls = choice.find("delta")->find("tool_calls"))
      for (const json::Value& call : calls->as_array()) {
        if (const json::Value* id = call.find("id")) {  // a call's first delta: id, type and name
          out.ids.push_back(id->as_string());
          out.names.push_back(call.find("function")->find("name")->as_string());
        }
        out.fragments.back().push_back(call.find("function")->find("arguments")->as_string());
      }
    if (!choice.find("finish_reason")->is_null()) out.reason = choice.find("finish_reason")->as_string();
  }
  return out;
}

TEST(ToolFormat, StreamedSectionsAndPythonic) {
  // Content streams until a possible start of the section's marker; a call goes out once its head is whole and its
  // arguments' '{' has come, then the arguments as they are written.
  Streamed s = stream(ToolFormat::kimi_k2,
                      {"Sure", ". <|tool_calls_sec", "tion_begin|><|tool_call_begin|>functions.f:0",
                       "<|tool_call_argument_begin|>{\"a\": ", "1, \"b\"", ": 2}<|tool_call_end|>", ""});
  EXPECT_EQ(s.contents, (std::vector<std::string>{"Sure", ". ", "", "", "", "", ""}));
  EXPECT_EQ(s.ids, (std::vector<std::string>{"functions.f:0"}));
  EXPECT_EQ(s.fragments, (std::vector<std::vector<std::string>>{
                             {}, {}, {}, {"{\"a\": "}, {"1, \"b\""}, {": 2}"}, {}}));
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
