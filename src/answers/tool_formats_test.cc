// The Llama 3.x JSON and Mistral [TOOL_CALLS] call formats beside Hermes: vLLM's llama3_json / mistral parser rules
// on fixed texts (what is a call, what stays content), the format read off the real templates, Mistral's 9-character
// ids (the forced call per format and the streamed form: server/tool_request_test.cc,
// server/responses_tool_calls_test.cc).
#include <gtest/gtest.h>

#include <cctype>
#include <set>
#include <string>
#include <vector>

#include "answers/tool_calls.h"
#include "core/error.h"
#include "loader/json.h"
#include "testing/tool_request_testing.h"

namespace attnzoo::answers {
namespace {


using testing::args_of;

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
  testing::expect_detected(cases);
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


}  // namespace
}  // namespace attnzoo::answers
