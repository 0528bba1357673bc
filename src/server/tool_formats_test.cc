// The Llama 3.x JSON and Mistral [TOOL_CALLS] call formats beside Hermes: vLLM's llama3_json / mistral parser rules
// on fixed texts (what is a call, what stays content), the format read off the real templates, the forced call's
// prompt opening and schema per format, Mistral's 9-character ids, and the streamed form of each.
#include <gtest/gtest.h>

#include <cctype>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "loader/json.h"
#include "server/api_error.h"
#include "server/responses.h"
#include "server/tool_calls.h"
#include "server/tool_request.h"
#include "testing/tool_request_testing.h"

namespace attnzoo::server {
namespace {

using testing::read_test_data;

json::Value args_of(const ToolCall& c) { return json::parse(c.arguments); }

TEST(Llama3ToolCalls, OneCallWithParameters) {
  const ParsedAnswer a = parse_llama3_tool_calls(R"({"name": "get_weather", "parameters": {"city": "Paris"}})");
  EXPECT_EQ(a.content, "");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(args_of(a.calls[0]).find("city")->as_string(), "Paris");
  EXPECT_TRUE(a.calls[0].id.starts_with("call_"));
}

TEST(Llama3ToolCalls, PythonTagAndSemicolonSeparatedCalls) {
  const std::string text = "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"s\": \"};{\\\"\", \"n\": [1, {}]}}; "
                           "{\"name\": \"g\", \"arguments\": {\"x\": true}};";
  const ParsedAnswer a = parse_llama3_tool_calls(text);
  EXPECT_EQ(a.content, "");
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.calls[0].name, "f");
  EXPECT_EQ(args_of(a.calls[0]).find("s")->as_string(), "};{\"");  // braces inside a string do not end the object
  EXPECT_EQ(a.calls[1].name, "g");                                 // "arguments" is read as well (vLLM reads both)
  EXPECT_TRUE(args_of(a.calls[1]).find("x")->as_bool());
  EXPECT_EQ(read_answer(text, ToolMode::automatic, false, ToolFormat::llama3_json).calls.size(), 1u);
}

TEST(Llama3ToolCalls, AnythingElseIsContent) {
  for (const std::string t : {
           std::string("Sure. {\"name\": \"f\", \"parameters\": {}}"),  // not at the start: text, as in vLLM
           std::string("{\"name\": \"f\", \"parameters\": {\"a\": 1}"),  // never closed
           std::string("{\"name\": \"f\", \"parameters\": {}} and then"),  // text after a call
           std::string("{\"name\": \"f\", \"parameters\": {}}; {\"city\": 1}"),  // the second piece is no call
           std::string("{\"city\": \"Paris\"}"),                          // no name
           std::string("{\"name\": \"f\", \"parameters\": [1]}"),         // parameters not an object
           std::string("<|python_tag|>print(1)"),                          // a builtin tool's code
           std::string("Hello"), std::string("")}) {
    const ParsedAnswer a = parse_llama3_tool_calls(t);
    EXPECT_TRUE(a.calls.empty()) << t;
    EXPECT_EQ(a.content, t);
  }
}

TEST(MistralToolCalls, ContentAndAnArrayOfTwo) {
  const std::string text = "Let me look.[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}, "
                           "{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}]";
  const ParsedAnswer a = parse_mistral_tool_calls(text);
  EXPECT_EQ(a.content, "Let me look.");
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(args_of(a.calls[0]).find("city")->as_string(), "Oslo");
  EXPECT_EQ(a.calls[1].name, "get_time");
  for (const ToolCall& c : a.calls) {
    ASSERT_EQ(c.id.size(), 9u);
    for (char ch : c.id) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch))) << c.id;
  }
  EXPECT_NE(a.calls[0].id, a.calls[1].id);
  // v0.3's template writes a space before the array; one object without the array is a call too.
  EXPECT_EQ(parse_mistral_tool_calls("[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {}}]").calls.size(), 1u);
  EXPECT_EQ(parse_mistral_tool_calls("[TOOL_CALLS]{\"name\": \"f\", \"arguments\": {}}").calls.size(), 1u);
}

// Small 3.x / Magistral: name[ARGS]{...} after each [TOOL_CALLS] ([CALL_ID] as the template writes it).
TEST(MistralToolCalls, NameArgsForm) {
  const ParsedAnswer a = parse_mistral_tool_calls(
      "Checking.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\"}[TOOL_CALLS]get_time[CALL_ID]a1B2c3D4e[ARGS]{}");
  EXPECT_EQ(a.content, "Checking.");
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(args_of(a.calls[0]).find("city")->as_string(), "Oslo");
  EXPECT_EQ(a.calls[1].name, "get_time");
  EXPECT_EQ(a.calls[1].arguments, "{}");
  for (const std::string t : {std::string("[TOOL_CALLS]get_weather{\"city\": 1}"),       // no [ARGS]
                              std::string("[TOOL_CALLS]get weather[ARGS]{}"),              // not a name
                              std::string("[TOOL_CALLS]f[ARGS]{}[TOOL_CALLS]g[ARGS][1]"),  // arguments not an object
                              std::string("[TOOL_CALLS][ARGS]{}")}) {
    const ParsedAnswer b = parse_mistral_tool_calls(t);
    EXPECT_TRUE(b.calls.empty()) << t;
    EXPECT_EQ(b.content, t);
  }
}

TEST(MistralToolCalls, BrokenJsonIsContent) {
  for (const std::string t : {std::string("[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}"),
                              std::string("Hi [TOOL_CALLS][{\"name\": \"f\", \"arguments\": 3}]"),
                              std::string("[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}, {\"x\": 1}]"),
                              std::string("[TOOL_CALLS][]"), std::string("no calls here"), std::string("[TOOL_CALL")}) {
    const ParsedAnswer a = parse_mistral_tool_calls(t);
    EXPECT_TRUE(a.calls.empty()) << t;
    EXPECT_EQ(a.content, t);
  }
}

TEST(MistralToolCalls, IdsAreUniqueAlphanumericNine) {
  std::set<std::string> ids;
  for (int i = 0; i < 20000; ++i) {
    const std::string id = new_tool_call_id(ToolFormat::mistral);
    ASSERT_EQ(id.size(), 9u);
    for (char ch : id) ASSERT_TRUE(std::isalnum(static_cast<unsigned char>(ch))) << id;
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 20000u);
}

TEST(ToolFormat, DetectedFromRealTemplates) {
  const std::vector<std::pair<std::string, ToolFormat>> cases = {
      {"Qwen-Qwen2.5-7B-Instruct.jinja", ToolFormat::hermes},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", ToolFormat::hermes},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", ToolFormat::llama3_json},
      {"meta-llama-Llama-3.2-3B-Instruct.jinja", ToolFormat::llama3_json},
      {"meta-llama-Llama-3.3-70B-Instruct.jinja", ToolFormat::llama3_json},
      {"mistralai-Mistral-7B-Instruct-v0.3.jinja", ToolFormat::mistral},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", ToolFormat::mistral},
      {"Mistral-Small-3.2-24B-Instruct-2506.jinja", ToolFormat::mistral},
      {"google-gemma-2-2b-it.jinja", ToolFormat::none},
      {"HuggingFaceTB-SmolLM2-135M-Instruct.jinja", ToolFormat::none}};
  for (const auto& [file, format] : cases) {
    const std::string src = read_test_data("chat_templates/" + file);
    ASSERT_FALSE(src.empty()) << file;
    EXPECT_EQ(detect_tool_format(src), format) << file;
  }
  EXPECT_EQ(parse_tool_call_parser("llama3_json"), ToolFormat::llama3_json);
  EXPECT_EQ(parse_tool_call_parser("mistral"), ToolFormat::mistral);
  EXPECT_EQ(parse_tool_call_parser("hermes"), ToolFormat::hermes);
  try {
    parse_tool_call_parser("granite");
    ADD_FAILURE();
  } catch (const ArgumentError& e) {
    EXPECT_STREQ(e.what(), "--tool-call-parser: \"granite\" is not one of hermes, llama3_json, mistral, openai, "
                           "deepseek_v3, deepseek_v31, kimi_k2, pythonic");
  }
}

using testing::accepts;
using testing::kTools;

TEST(ToolFormat, ForcedCallPerFormat) {
  const auto forced = [](const std::string& choice, ToolFormat f, std::string_view src = {}) {
    return parse_tool_fields(json::parse("{\"tools\": " + kTools + ", \"tool_choice\": " + choice + "}"), true, f,
                             src);
  };
  const std::string named = R"({"type": "function", "function": {"name": "get_weather"}})";
  ToolRequest r = forced(named, ToolFormat::llama3_json);
  EXPECT_EQ(r.forced_prefix, "");
  ASSERT_TRUE(r.schema);
  EXPECT_TRUE(accepts(*r.schema, R"({"name": "get_weather", "parameters": {"city": "Rome"}})"));
  EXPECT_FALSE(accepts(*r.schema, R"({"name": "get_weather", "arguments": {"city": "Rome"}})"));
  const ParsedAnswer a = read_answer(R"({"name": "get_weather", "parameters": {"city": "Rome"}})", ToolMode::forced,
                                     true, ToolFormat::llama3_json);
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(args_of(a.calls[0]).find("city")->as_string(), "Rome");
  r = forced("\"required\"", ToolFormat::llama3_json);
  EXPECT_TRUE(accepts(*r.schema, R"({"name": "get_time", "parameters": {}})"));
  EXPECT_FALSE(accepts(*r.schema, R"({"name": "get_weather", "parameters": {}})"));  // city is required

  r = forced(named, ToolFormat::mistral, "{{- \"[TOOL_CALLS][\" }}");
  EXPECT_EQ(r.forced_prefix, "[TOOL_CALLS][");
  EXPECT_TRUE(accepts(*r.schema, R"({"name": "get_weather", "arguments": {"city": "Rome"}})"));
  EXPECT_EQ(forced(named, ToolFormat::mistral, "{{- \"[TOOL_CALLS] [\" }}").forced_prefix, "[TOOL_CALLS] [");
  const ParsedAnswer m = read_answer(R"({"name": "get_weather", "arguments": {}})", ToolMode::forced, true,
                                     ToolFormat::mistral);
  ASSERT_EQ(m.calls.size(), 1u);
  EXPECT_EQ(m.calls[0].id.size(), 9u);
  EXPECT_EQ(forced(named, ToolFormat::hermes).forced_prefix, "<tool_call>\n");
  try {
    forced(named, ToolFormat::none);
    ADD_FAILURE();
  } catch (const ApiError& e) {
    EXPECT_EQ(std::string(e.param), "tools");
  }
}

struct Streamed {
  std::vector<std::string> contents;  // per delta
  std::vector<std::string> names;
  std::string reason;
};

Streamed stream(ToolFormat format, const std::vector<std::string>& pieces) {
  ResponseContext ctx{Endpoint::chat_completions, "chatcmpl-1", 0, "m", nullptr, ToolMode::automatic, true};
  ctx.tool_format = format;
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
    if (const json::Value* calls = choice.find("delta")->find("tool_calls"))
      for (const json::Value& call : calls->as_array())  // a call's first delta names it
        if (const json::Value* name = call.find("function")->find("name")) out.names.push_back(name->as_string());
    if (!choice.find("finish_reason")->is_null()) out.reason = choice.find("finish_reason")->as_string();
  }
  return out;
}

TEST(ToolFormat, StreamedLlama3) {
  // A '{' or <|python_tag|> start is held to the end; any other start streams from the first byte that rules a call
  // out (a lone "<|py" could still be the tag).
  Streamed s =
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
  Streamed s = stream(ToolFormat::mistral, {"Sure", ". [TOOL", "_CALLS][{\"name\": \"f\", \"arguments\": {}}, ",
                                            "{\"name\": \"g\", \"arguments\": {}}]", ""});
  EXPECT_EQ(s.contents, (std::vector<std::string>{"Sure", ". ", "", "", ""}));
  EXPECT_EQ(s.names, (std::vector<std::string>{"f", "g"}));
  EXPECT_EQ(s.reason, "tool_calls");
  s = stream(ToolFormat::mistral, {"a [TOOL", "S]", ""});
  EXPECT_EQ(s.contents, (std::vector<std::string>{"a ", "[TOOLS]", ""}));
  EXPECT_TRUE(s.names.empty());
}

TEST(ToolFormat, FullResponseMistral) {
  ResponseContext ctx{Endpoint::chat_completions, "chatcmpl-1", 0, "m", nullptr, ToolMode::automatic, true};
  ctx.tool_format = ToolFormat::mistral;
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
