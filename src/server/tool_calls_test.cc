// Reading Hermes <tool_call> blocks out of answers (vLLM's hermes parser semantics, one malformed block kept as
// content instead of dropping every call), the tool fields of a request, and the streamed form of the calls.
#include "server/tool_calls.h"

#include <gtest/gtest.h>

#include <set>
#include <tuple>
#include <vector>
#include <string>

#include "loader/json.h"
#include "server/api_error.h"
#include "server/responses.h"
#include "server/tool_request.h"

namespace attnzoo::server {
namespace {

json::Value args_of(const ToolCall& c) { return json::parse(c.arguments); }

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

// Streaming: text before the tag goes out as it comes, a partial tag is held, a call goes out as it is written.
TEST(ToolStream, ContentThenCalls) {
  ResponseContext ctx{Endpoint::chat_completions, "chatcmpl-1", 0, "m", nullptr, ToolMode::automatic, true};
  StreamWriter w(ctx, 1, false, false);
  std::string all;
  for (const char* piece :
       {"Sure", ". <tool", "_call>\n{\"name\": \"f\", ", "\"arguments\": {\"a\": 1}}\n</tool_call>"}) {
    SampleDelta d;
    d.text = piece;
    all += w.chunk(d);
  }
  SampleDelta last;
  last.finish_reason = FinishReason::stop;
  all += w.chunk(last);
  std::string content, tool_calls, arguments, reason;
  for (size_t at = all.find("data: "); at != std::string::npos; at = all.find("data: ", at + 1)) {
    const json::Value c = json::parse(all.substr(at + 6, all.find("\n\n", at) - at - 6));
    const json::Value& choice = c.find("choices")->as_array()[0];
    const json::Value& delta = *choice.find("delta");
    if (const json::Value* t = delta.find("content")) content += t->as_string();
    if (const json::Value* t = delta.find("tool_calls")) {
      // vLLM's shapes: the first delta has id, type and name; later ones only arguments.
      const json::Value& c = (*t).as_array()[0];
      EXPECT_EQ(c.find("index")->as_int(), 0);
      if (const json::Value* name = c.find("function")->find("name")) {
        EXPECT_TRUE(tool_calls.empty());
        EXPECT_EQ(c.find("type")->as_string(), "function");
        tool_calls = name->as_string();
      } else {
        EXPECT_EQ(c.find("id"), nullptr);
      }
      arguments += c.find("function")->find("arguments")->as_string();
    }
    if (!choice.find("finish_reason")->is_null()) reason = choice.find("finish_reason")->as_string();
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
    ResponseContext ctx{Endpoint::chat_completions, "chatcmpl-1", 0, "m", nullptr, mode, true};
    StreamWriter w(ctx, 1, false, false);
    std::vector<std::string> contents;
    std::string reason;
    int calls = 0;
    for (size_t i = 0; i < pieces.size(); ++i) {
      SampleDelta d;
      d.text = pieces[i];
      if (i + 1 == pieces.size()) d.finish_reason = end;
      const std::string e = w.chunk(d);
      const json::Value c = json::parse(e.substr(6, e.size() - 8));
      const json::Value& choice = c.find("choices")->as_array()[0];
      const json::Value* t = choice.find("delta")->find("content");
      contents.push_back(t ? t->as_string() : "");
      if (const json::Value* t = choice.find("delta")->find("tool_calls"))
        for (const json::Value& c : t->as_array()) calls += c.find("id") != nullptr;
      if (!choice.find("finish_reason")->is_null()) reason = choice.find("finish_reason")->as_string();
    }
    return std::make_tuple(contents, calls, reason);
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
  ResponseContext ctx{Endpoint::chat_completions, "chatcmpl-1", 0, "m", nullptr, ToolMode::automatic, true};
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

}  // namespace
}  // namespace attnzoo::server
