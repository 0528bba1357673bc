// The tool-calling fields of a chat request (server/tool_request.h): tools and tool_choice read into the mode, the
// schema and the forced opening per call format (Hermes, Llama 3.x JSON, Mistral, DeepSeek, Kimi, harmony), the
// refusals naming the field, "required" answers of several calls held to the format's own syntax, and OpenAI's
// messages as the template sees them (calls' arguments, harmony's thinking, DeepSeek's arguments text).
#include "server/tool_request.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "answers/harmony.h"
#include "answers/tool_calls.h"
#include "answers/tool_format_sections.h"
#include "chat/value.h"
#include "engine/json_sequence.h"
#include "loader/json.h"
#include "server/api_error.h"
#include "testing/tool_request_testing.h"

namespace attnzoo::server {
namespace {

using answers::ParsedAnswer;
using answers::ToolCall;
using answers::ToolFormat;
using answers::ToolMode;
using answers::harmony_call_header;
using answers::kDeepSeekCallBegin;
using answers::kDeepSeekCallsBegin;
using answers::kDeepSeekSep;
using answers::read_answer;
using answers::tool_format_name;

using testing::accepts;

json::Value args_of(const ToolCall& c) { return json::parse(c.arguments); }

const std::string kB = std::string(kDeepSeekCallsBegin), kCB = std::string(kDeepSeekCallBegin),
                  kSep = std::string(kDeepSeekSep);

const std::string kTools =
    R"([{"type": "function", "function": {"name": "get_weather", "description": "d", "parameters":
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
        {"type": "function", "function": {"name": "get_time"}}])";

std::string fields_error(const std::string& body, bool hermes = true) {
  try {
    parse_tool_fields(json::parse(body), true, hermes ? ToolFormat::hermes : ToolFormat::none);
  } catch (const ApiError& e) {
    return std::string(e.param) + ": " + e.what();
  }
  return "";
}

TEST(ToolFields, ModesAndSchemas) {
  ToolRequest r = parse_tool_fields(json::parse("{\"tools\": " + kTools + "}"), true, ToolFormat::hermes);
  EXPECT_EQ(r.mode, ToolMode::automatic);
  EXPECT_FALSE(r.schema);
  EXPECT_TRUE(r.tools.is_list());
  r = parse_tool_fields(json::parse("{\"tools\": " + kTools + ", \"tool_choice\": \"none\"}"), true,
                        ToolFormat::hermes);
  EXPECT_EQ(r.mode, ToolMode::text);
  EXPECT_TRUE(r.tools.is_list());  // still rendered
  r = parse_tool_fields(json::parse("{\"tools\": " + kTools +
                                    R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
                                    "parallel_tool_calls": false})"),
                        true, ToolFormat::hermes);
  EXPECT_EQ(r.mode, ToolMode::forced);
  EXPECT_FALSE(r.parallel);
  EXPECT_EQ(r.forced_prefix, "<tool_call>\n");
  ASSERT_TRUE(r.schema);
  r = parse_tool_fields(json::parse("{\"tools\": " + kTools + ", \"tool_choice\": \"required\"}"), true,
                        ToolFormat::hermes);
  EXPECT_EQ(r.mode, ToolMode::forced);
  EXPECT_TRUE(r.schema);
  EXPECT_EQ(parse_tool_fields(json::parse("{\"tools\": []}"), true, ToolFormat::none).mode, ToolMode::text);
}

TEST(ToolFields, RefusalsNameTheField) {
  EXPECT_NE(fields_error("{\"tools\": " + kTools + "}", false).find("tools: "), std::string::npos);
  EXPECT_NE(fields_error("{\"tools\": {}}").find("tools: "), std::string::npos);
  EXPECT_NE(fields_error(R"({"tools": [{"type": "retrieval"}]})").find("tools[0]"), std::string::npos);
  EXPECT_NE(fields_error(R"({"tools": [{"type": "function", "function": {"name": "a b"}}]})").find("function.name"),
            std::string::npos);
  EXPECT_NE(fields_error(R"({"tools": [{"type": "function", "function": {"name": "a", "parameters":
      {"type": "object", "properties": {"x": {"type": "string", "not": {}}}}}}]})")
                .find("tools[0].function.parameters at #/properties/x: \"not\" is not supported"),
            std::string::npos);
  EXPECT_NE(fields_error(R"({"tools": [{"type": "function", "function": {"name": "a"}},
                                       {"type": "function", "function": {"name": "a"}}]})")
                .find("listed twice"),
            std::string::npos);
  EXPECT_NE(fields_error("{\"tools\": " + kTools +
                         R"(, "tool_choice": {"type": "function", "function": {"name": "x"}}})")
                .find("tool_choice: no tool is named \"x\""),
            std::string::npos);
  EXPECT_NE(fields_error("{\"tools\": " + kTools + ", \"tool_choice\": \"always\"}").find("tool_choice"),
            std::string::npos);
  EXPECT_NE(fields_error("{\"tool_choice\": \"required\"}").find("tool_choice: needs tools"), std::string::npos);
  EXPECT_NE(fields_error("{\"tools\": " + kTools + ", \"parallel_tool_calls\": 1}").find("parallel_tool_calls"),
            std::string::npos);
  EXPECT_EQ(fields_error("{\"tool_choice\": \"none\"}"), "");
}

// At most kMaxTools tools; past it a 400 naming tools, before any of their schemas is compiled.
TEST(ToolFields, ToolsAreAtMostKMaxTools) {
  const auto tools = [](size_t count) {
    std::string list;
    for (size_t i = 0; i < count; ++i)
      list += (i ? ", " : "") + std::string(R"({"type": "function", "function": {"name": "f)") + std::to_string(i) +
              R"(", "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}}})";
    return "{\"tools\": [" + list + "]}";
  };
  EXPECT_EQ(fields_error(tools(kMaxTools)), "");
  EXPECT_EQ(fields_error(tools(kMaxTools + 1)), "tools: tools: at most 128 tools, got 129");
}

// The tools' schemas share one schema's compile budget: each of these two fits alone (10,000 pattern states of the
// 16,384 one schema may use), the second beside the first is refused naming it.
TEST(ToolFields, ToolsShareOneSchemaBudget) {
  std::string properties;
  for (const char* p : {"a", "b", "c", "d", "e"})
    properties += std::string(properties.empty() ? "" : ", ") + "\"" + p +
                  R"(": {"type": "string", "pattern": "^x{1000}y{999}$"})";  // 2,000 states
  const auto tool = [&](const std::string& name) {
    return R"({"type": "function", "function": {"name": ")" + name +
           R"(", "parameters": {"type": "object", "properties": {)" + properties + "}}}}";
  };
  EXPECT_EQ(fields_error("{\"tools\": [" + tool("one") + "]}"), "");
  const std::string both = fields_error("{\"tools\": [" + tool("one") + ", " + tool("two") + "]}");
  EXPECT_NE(both.find("tools[1].function.parameters at #/properties/"), std::string::npos) << both;
  EXPECT_NE(both.find("patterns need more than 16384 DFA states in all"), std::string::npos)
      << both;
  // Formats' DFAs are shared by the process: any number of tools may use them.
  std::string dated;
  for (size_t i = 0; i < kMaxTools; ++i)
    dated += (i ? ", " : "") + std::string(R"({"type": "function", "function": {"name": "f)") + std::to_string(i) +
             R"(", "parameters": {"type": "object", "properties": {"d": {"type": "string", "format": "date-time"}}}}})";
  EXPECT_EQ(fields_error("{\"tools\": [" + dated + "]}"), "");
}

// A call's arguments text in the history is parsed within the body's value limit (openai_request.h).
TEST(ToolMessages, ArgumentsTextIsBoundedLikeTheBody) {
  std::string zeros;
  for (int i = 0; i < 200; ++i) zeros += i ? ",0" : "0";
  const std::string messages = R"([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments":
      "{\"a\": [)" + zeros + R"(]}"}}]}])";
  EXPECT_NO_THROW(chat_messages(json::parse(messages), ToolFormat::hermes, false, 1000));
  try {
    chat_messages(json::parse(messages), ToolFormat::hermes, false, 100);
    ADD_FAILURE();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "messages");
    EXPECT_NE(std::string(e.what()).find("messages[0].tool_calls[0].function.arguments: more than 100 JSON values"),
              std::string::npos)
        << e.what();
  }
}

TEST(ToolMessages, CallsAndResults) {
  const chat::Value m = chat_messages(json::parse(R"([
      {"role": "user", "content": "weather?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}])"));
  const chat::List& list = m.as_list();
  ASSERT_EQ(list.size(), 3u);
  EXPECT_TRUE(list[1].as_dict().find("content")->is_none());
  const chat::Value& call = list[1].as_dict().find("tool_calls")->as_list()[0];
  const chat::Value& args = call.as_dict().find("function")->as_dict().find("arguments")->as_dict().items[0].second;
  EXPECT_EQ(args.as_string(), "Paris");
  EXPECT_EQ(list[2].as_dict().find("tool_call_id")->as_string(), "call_1");
  EXPECT_THROW(chat_messages(json::parse(R"([{"role": "assistant", "tool_calls": [{"function":
      {"name": "f", "arguments": "{oops"}}]}])")),
               ApiError);
  EXPECT_THROW(chat_messages(json::parse(R"([{"role": "user", "tool_calls": []}])")), ApiError);
}

// Each malformed call or result in the history is a 400 naming the message, the call and the field at fault.
TEST(ToolMessages, ErrorsNameTheField) {
  const auto error = [](const std::string& messages) -> std::string {
    try {
      chat_messages(json::parse(messages));
    } catch (const ApiError& e) {
      EXPECT_EQ(e.param, "messages");
      return e.what();
    }
    return "";
  };
  const std::string head = R"([{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": )";
  EXPECT_NE(error(head + R"({"id": "x"}}])").find("messages[1].tool_calls: must be a list"), std::string::npos);
  EXPECT_NE(error(head + R"([{"type": "function"}]}])").find("messages[1].tool_calls[0]: needs a function object"),
            std::string::npos);
  EXPECT_NE(error(head + R"([{"type": "code", "function": {"name": "f"}}]}])").find("tool_calls[0].type"),
            std::string::npos);
  EXPECT_NE(error(head + R"([{"function": {"name": 3}}]}])").find("tool_calls[0].function.name: must be a string"),
            std::string::npos);
  EXPECT_NE(error(head + R"([{"function": {"name": "f", "arguments": "[1]"}}]}])")
                .find("tool_calls[0].function.arguments: must be a JSON object"),
            std::string::npos);
  EXPECT_NE(error(R"([{"role": "tool", "tool_call_id": 7, "content": "sunny"}])")
                .find("messages[0].tool_call_id: must be a string"),
            std::string::npos);
  EXPECT_NE(error(R"([{"role": "user", "tool_calls": []}])").find("messages[0].tool_calls: only assistant"),
            std::string::npos);
}

TEST(HarmonyRequest, NamedChoiceOpensTheCallAndHoldsTheArguments) {
  const auto fields = [](const std::string& tools, const std::string& choice) {
    return parse_tool_fields(json::parse("{\"tools\": " + tools + ", \"tool_choice\": " + choice + "}"), true,
                             ToolFormat::openai);
  };
  ToolRequest r = fields(kTools, R"({"type": "function", "function": {"name": "get_weather"}})");
  EXPECT_EQ(r.mode, ToolMode::forced);
  EXPECT_EQ(r.forced_prefix, harmony_call_header("get_weather"));
  ASSERT_TRUE(r.schema);
  EXPECT_TRUE(accepts(*r.schema, R"({"city": "Rome"})"));  // the parameters alone: the header names the function
  EXPECT_FALSE(accepts(*r.schema, R"({"name": "get_weather", "arguments": {"city": "Rome"}})"));
  // "required" with one tool is that tool; with several it is refused, naming tool_choice.
  const std::string one = R"([{"type": "function", "function": {"name": "get_time"}}])";
  EXPECT_EQ(fields(one, "\"required\"").forced_prefix, harmony_call_header("get_time"));
  try {
    fields(kTools, "\"required\"");
    ADD_FAILURE();
  } catch (const ApiError& e) {
    EXPECT_EQ(std::string(e.param), "tool_choice");
    EXPECT_NE(std::string(e.what()).find("required"), std::string::npos);
  }
  EXPECT_EQ(fields(kTools, "\"auto\"").mode, ToolMode::automatic);
  EXPECT_EQ(fields(kTools, "\"none\"").mode, ToolMode::text);
}

TEST(HarmonyRequest, ConversationCarriesThinkingAndLeavesNullContentOut) {
  const json::Value msgs = json::parse(R"([{"role": "user", "content": "hi"},
      {"role": "assistant", "content": null, "reasoning_content": "look it up",
       "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "42"}])");
  const chat::Value h = chat_messages(msgs, ToolFormat::openai, true);
  const chat::Value& a = h.as_list()[1];
  EXPECT_EQ(a.as_dict().find("thinking")->as_string(), "look it up");
  EXPECT_EQ(a.as_dict().find("content"), nullptr);
  EXPECT_EQ(a.as_dict().find("reasoning_content"), nullptr);
  // Other templates see the fields as sent.
  const chat::Value plain = chat_messages(msgs, ToolFormat::none, false);
  EXPECT_TRUE(plain.as_list()[1].as_dict().find("content")->is_none());
  EXPECT_EQ(plain.as_list()[1].as_dict().find("thinking"), nullptr);
  EXPECT_THROW(chat_messages(json::parse(R"([{"role": "assistant", "content": "x", "reasoning_content": 3}])"),
                             ToolFormat::openai, true),
               ApiError);
}

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

// "required" with several calls (the reading side: answers/tool_stream_test.cc): per format, the request's schema
// and sequence accept the format's own syntax for two calls, each held to its tool's parameters; parallel_tool_calls
// false and a named choice keep one call.
TEST(RequiredCalls, SeveralCallsInEachFormatsSyntax) {
  const auto request = [&](ToolFormat f, const std::string& extra) {
    return parse_tool_fields(
        json::parse("{\"tools\": " + testing::kRequiredTools + ", \"tool_choice\": \"required\"" + extra + "}"), true, f);
  };
  for (const testing::TwoCalls& w : testing::kRequiredTwoCalls) {
    const std::string what = tool_format_name(w.format);
    const ToolRequest r = request(w.format, "");
    ASSERT_TRUE(r.schema && r.sequence) << what;
    JsonSequenceRecognizer ok(*r.schema, r.sequence.get());
    EXPECT_TRUE(ok.push(w.text)) << what;
    EXPECT_TRUE(ok.can_end()) << what;
    JsonSequenceRecognizer bad(*r.schema, r.sequence.get());
    EXPECT_FALSE(bad.push(w.bad)) << what;  // get_weather without its required city
    const ToolRequest one = request(w.format, ", \"parallel_tool_calls\": false");
    EXPECT_TRUE(one.schema && !one.sequence) << what;
    const ToolRequest named = parse_tool_fields(
        json::parse("{\"tools\": " + testing::kRequiredTools +
                    R"(, "tool_choice": {"type": "function", "function": {"name": "get_time"}}})"),
        true, w.format);
    EXPECT_TRUE(named.schema && !named.sequence) << what;
  }
}

}  // namespace
}  // namespace attnzoo::server
