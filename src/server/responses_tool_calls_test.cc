// Tool calls as OpenAI response objects (server/responses.h over answers/tool_calls.h): Hermes, Llama 3.x JSON and
// Mistral answers whole and streamed (text before a call goes out as it comes, a partial marker is held, a call goes
// out as it is written), finish_reason tool_calls.
#include "server/responses.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "answers/tool_calls.h"
#include "loader/json.h"

namespace attnzoo::server {
namespace {

using answers::ToolCall;
using answers::ToolFormat;
using answers::ToolMode;

json::Value args_of(const ToolCall& c) { return json::parse(c.arguments); }

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
