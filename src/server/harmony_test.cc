// gpt-oss's harmony answers read into reasoning_content / content / tool_calls (server/harmony.h) on fixed texts:
// analysis + final, calls with and without <|constrain|>, `to=` before the channel, several calls, preambles, cut
// messages, stray words, other recipients; every text streamed cut at every pair of offsets adds up to the whole
// (a call's deltas: announced at its header, its arguments as written, joining to the whole answer's);
// the request side (template detection, flags, the forced call's header and schema, the conversation's thinking)
// and the response objects, whole and streamed.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "loader/json.h"
#include "server/api_error.h"
#include "server/harmony.h"
#include "server/responses.h"
#include "server/tool_request.h"
#include "testing/stream_split_testing.h"
#include "testing/tool_request_testing.h"

namespace attnzoo::server {
namespace {

const std::string kCall = "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
                          "<|message|>{\"city\": \"Paris\",\n \"days\": 2}";

TEST(Harmony, AnalysisThenFinal) {
  const HarmonyAnswer a = read_harmony(
      "<|channel|>analysis<|message|>User asks 2+2.<|end|><|start|>assistant<|channel|>final<|message|>4", true);
  EXPECT_TRUE(a.has_reasoning);
  EXPECT_EQ(a.reasoning, "User asks 2+2.");
  EXPECT_EQ(a.content, "4");
  EXPECT_TRUE(a.calls.empty());
  // <|return|> written into the text (a server that does not stop there) ends the message the same way.
  const HarmonyAnswer r = read_harmony("<|channel|>final<|message|>4<|return|>", false);
  EXPECT_FALSE(r.has_reasoning);
  EXPECT_EQ(r.content, "4");
}

TEST(Harmony, CallWithConstrain) {
  const HarmonyAnswer a = read_harmony("<|channel|>analysis<|message|>Need the weather.<|end|>" + kCall, true);
  EXPECT_EQ(a.reasoning, "Need the weather.");
  EXPECT_EQ(a.content, "");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(a.calls[0].arguments, "{\"city\": \"Paris\",\n \"days\": 2}");  // as written, as vLLM streams it
  EXPECT_TRUE(a.calls[0].id.starts_with("call_"));
}

TEST(Harmony, CallWithoutConstrainAndRecipientBeforeChannel) {
  // The form gpt-oss's template writes into the history: the recipient in the role part, a bare "json".
  for (const std::string text : {
           std::string("<|start|>assistant to=functions.f<|channel|>commentary json<|message|>{\"a\": 1}"),
           std::string(" to=functions.f<|channel|>commentary json<|message|>{\"a\": 1}"),  // right after the prompt
           std::string("<|channel|>commentary to=functions.f json<|message|>{\"a\": 1}"),
           std::string("<|channel|>commentary to=functions.f<|message|>{\"a\": 1}<|call|>")}) {
    SCOPED_TRACE(text);
    const HarmonyAnswer a = read_harmony(text, true);
    ASSERT_EQ(a.calls.size(), 1u);
    EXPECT_EQ(a.calls[0].name, "f");
    EXPECT_EQ(a.calls[0].arguments, R"({"a": 1})");
    EXPECT_EQ(a.content, "");
    EXPECT_FALSE(a.has_reasoning);
  }
}

TEST(Harmony, SeveralCallsAndAPreamble) {
  const HarmonyAnswer a = read_harmony(
      "<|channel|>commentary<|message|>Checking two cities.<|end|>"
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"A\"}"
      "<|call|><|start|>assistant<|channel|>commentary to=functions.get_time json<|message|>{}<|call|>",
      false);
  EXPECT_EQ(a.content, "Checking two cities.");  // a preamble (commentary without recipient) is content
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(a.calls[0].arguments, R"({"city":"A"})");
  EXPECT_EQ(a.calls[1].name, "get_time");
  EXPECT_NE(a.calls[0].id, a.calls[1].id);
  // parallel_tool_calls false: the first call only, the preamble still content.
  const HarmonyAnswer one = read_harmony(
      "<|channel|>commentary<|message|>Checking two cities.<|end|>"
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"A\"}"
      "<|call|><|start|>assistant<|channel|>commentary to=functions.get_time json<|message|>{}<|call|>",
      false, true, /*parallel=*/false);
  EXPECT_EQ(one.content, "Checking two cities.");
  ASSERT_EQ(one.calls.size(), 1u);
  EXPECT_EQ(one.calls[0].name, "get_weather");
}

TEST(Harmony, MessagesOfOneFieldJoinWithNewlines) {
  const HarmonyAnswer a = read_harmony(
      "<|channel|>analysis<|message|>one<|end|><|start|>assistant<|channel|>analysis<|message|>two<|end|>"
      "<|start|>assistant<|channel|>commentary<|message|>pre<|end|><|start|>assistant<|channel|>final<|message|>ans",
      true);
  EXPECT_EQ(a.reasoning, "one\ntwo");
  EXPECT_EQ(a.content, "pre\nans");
}

TEST(Harmony, CutAnswersKeepWhatWasRead) {
  HarmonyAnswer a = read_harmony("<|channel|>analysis<|message|>half a thou", false);
  EXPECT_TRUE(a.has_reasoning);
  EXPECT_EQ(a.reasoning, "half a thou");
  EXPECT_EQ(a.content, "");
  a = read_harmony("<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>final<|message|>The ans", false);
  EXPECT_EQ(a.content, "The ans");
  // A call cut by max_tokens is no call: its body comes back as content.
  a = read_harmony("<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": ", false);
  EXPECT_TRUE(a.calls.empty());
  EXPECT_EQ(a.content, "{\"a\": ");
  // A header cut before its <|message|> says nothing; nor does a partial marker.
  a = read_harmony("<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>fin", false);
  EXPECT_EQ(a.reasoning, "x");
  EXPECT_EQ(a.content, "");
  a = read_harmony("<|channel|>final<|message|>ok<|en", false);
  EXPECT_EQ(a.content, "ok<|en");  // never completed: it was text
}

TEST(Harmony, StrayWordsAreContentOtherRecipientsDropped) {
  HarmonyAnswer a = read_harmony("Hello there", true);  // a model that never spoke harmony
  EXPECT_EQ(a.content, "Hello there");
  EXPECT_FALSE(a.has_reasoning);
  a = read_harmony("<|channel|>analysis<|message|>t<|end|>stray words<|start|>assistant<|channel|>final<|message|>x",
                   true);
  EXPECT_EQ(a.content, "stray words\nx");
  // A builtin tool (browser, python) this server does not run: dropped as vLLM drops it; analysis stays reasoning.
  a = read_harmony("<|channel|>commentary to=browser.search json<|message|>{\"query\": \"q\"}<|call|>", true);
  EXPECT_TRUE(a.calls.empty());
  EXPECT_EQ(a.content, "");
  a = read_harmony("<|channel|>analysis to=python code<|message|>print(1)<|call|>", true);
  EXPECT_EQ(a.reasoning, "print(1)");
  EXPECT_TRUE(a.calls.empty());
  // A message another role writes (a made-up tool result) is not the assistant's answer.
  a = read_harmony("<|start|>functions.f to=assistant<|channel|>commentary<|message|>\"42\"<|end|>"
                   "<|start|>assistant<|channel|>final<|message|>ok",
                   true);
  EXPECT_EQ(a.content, "ok");
}

TEST(Harmony, ArgumentsThatAreNotJsonAndCallsNotRead) {
  HarmonyAnswer a = read_harmony("<|channel|>commentary to=functions.f <|constrain|>json<|message|>{bad", true);
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].arguments, "{bad");  // passed on as written, JSON or not
  a = read_harmony("<|channel|>commentary to=functions.run code<|message|>{ \"x\" : 1 }", true);
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].arguments, "{ \"x\" : 1 }");  // another content type, the same
  // No tools (or tool_choice "none"): a call's body is content.
  a = read_harmony("<|channel|>commentary to=functions.f json<|message|>{\"a\": 1}", true, /*read_calls=*/false);
  EXPECT_TRUE(a.calls.empty());
  EXPECT_EQ(a.content, "{\"a\": 1}");
}

TEST(Harmony, ForcedHeaderReadsAsACall) {
  EXPECT_EQ(harmony_call_header("get_weather"),
            "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>");
  const HarmonyAnswer a = read_harmony(harmony_call_header("get_weather") + "{\"city\": \"Rome\"}", true);
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(read_harmony(std::string(kHarmonyFinalHeader) + "{\"k\": 1}", true).content, "{\"k\": 1}");
}

const std::vector<std::string> kTexts = {
    "<|channel|>analysis<|message|>a < b<|end|><|start|>assistant<|channel|>final<|message|>x <| y|> done",
    "<|channel|>analysis<|message|>hm<|end|>" + kCall,
    "<|channel|>commentary<|message|>pre<|end|><|start|>assistant to=functions.f<|channel|>commentary json"
    "<|message|>{}<|call|><|start|>assistant<|channel|>commentary to=functions.g json<|message|>{\"b\":[1]}",
    "Hello <world>",
    "<|channel|>analysis<|message|>t<|end|>stray<|start|>assistant<|channel|>final<|message|>fin<|return|>",
    "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": "};

TEST(Harmony, StreamedCutAtEveryPairOfOffsetsEqualsWhole) {
  for (const std::string& text : kTexts)
    for (bool stopped : {true, false}) {
      const HarmonyAnswer want = read_harmony(text, stopped);
      // Cut inside a call: announced, the call stays (its body then comes back as content too).
      const bool cut_call = !stopped && read_harmony(text, true).calls.size() > want.calls.size();
      testing::for_each_split(text, size_t(-1), [&](const std::vector<std::string>& pieces, const std::string& where) {
        SCOPED_TRACE(text + " " + where);
        HarmonyReader r;
        std::string reasoning, content;
        std::vector<ToolCall> calls;  // as a client joins the deltas
        const auto take = [&](const HarmonyReader::Piece& p) {
          reasoning += p.reasoning;
          content += p.content;
          for (const ToolCallDelta& d : p.calls) {
            if (d.first) {
              ASSERT_EQ(d.index, calls.size());
              calls.push_back({d.id, d.name, d.arguments});
            } else {
              ASSERT_LT(d.index, calls.size());
              ASSERT_FALSE(d.arguments.empty());
              calls[d.index].arguments += d.arguments;
            }
          }
        };
        for (const std::string& piece : pieces) take(r.feed(piece));
        take(r.finish(stopped));
        ASSERT_EQ(reasoning, want.reasoning);
        ASSERT_EQ(content, want.content);
        ASSERT_EQ(calls.size(), want.calls.size() + (cut_call ? 1 : 0));
        ASSERT_EQ(r.calls().size(), want.calls.size());
        for (size_t i = 0; i < want.calls.size(); ++i) {
          ASSERT_EQ(calls[i].name, want.calls[i].name);
          ASSERT_EQ(calls[i].arguments, want.calls[i].arguments);
          ASSERT_EQ(calls[i].id, r.calls()[i].id);
          ASSERT_EQ(r.calls()[i].arguments, want.calls[i].arguments);
        }
        if (cut_call) ASSERT_EQ(calls.back().arguments, read_harmony(text, true).calls.back().arguments);
      });
    }
}

TEST(Harmony, StreamSendsBodiesAsTheyComeAndHoldsOnlyPossibleMarkers) {
  HarmonyReader r;
  EXPECT_EQ(r.feed("<|channel|>analysis").reasoning, "");  // a header says nothing yet
  EXPECT_EQ(r.feed("<|message|>thinking hard").reasoning, "thinking hard");
  EXPECT_EQ(r.feed(" <|e").reasoning, " ");  // "<|e" may begin <|end|>
  EXPECT_EQ(r.feed("x").reasoning, "<|ex");  // it did not
  HarmonyReader::Piece p = r.feed("<|end|><|start|>assistant<|channel|>final<|message|>Hi");
  EXPECT_EQ(p.reasoning, "");
  EXPECT_EQ(p.content, "Hi");
}

// A call streams as vLLM streams harmony calls: announced (index, id, name) once its header is whole, then its body
// as it comes, a possible marker held back; reasoning before it streams as before; parallel calls take 0, 1.
TEST(Harmony, CallsStreamAsTheyAreWritten) {
  HarmonyReader r;
  HarmonyReader::Piece p =
      r.feed("<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>commentary to=functions.f json");
  EXPECT_EQ(p.reasoning, "hm");
  EXPECT_TRUE(p.calls.empty());  // the header is not whole yet
  p = r.feed("<|message|>{\"a\"");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_TRUE(p.calls[0].first);
  EXPECT_EQ(p.calls[0].index, 0u);
  EXPECT_EQ(p.calls[0].name, "f");
  EXPECT_EQ(p.calls[0].arguments, "{\"a\"");
  const std::string id = p.calls[0].id;
  p = r.feed(": 1}<|ca");  // "<|ca" may begin <|call|>
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_FALSE(p.calls[0].first);
  EXPECT_EQ(p.calls[0].arguments, ": 1}");
  p = r.feed("ll|><|start|>assistant to=functions.g<|channel|>commentary json<|message|>{}");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_TRUE(p.calls[0].first);
  EXPECT_EQ(p.calls[0].index, 1u);
  EXPECT_EQ(p.calls[0].arguments, "{}");
  p = r.finish(true);
  EXPECT_TRUE(p.calls.empty());
  ASSERT_EQ(r.calls().size(), 2u);
  EXPECT_EQ(r.calls()[0].id, id);
  EXPECT_EQ(r.calls()[0].arguments, "{\"a\": 1}");
  EXPECT_EQ(r.calls()[1].name, "g");
  // parallel_tool_calls false: the second call message is neither announced nor a call.
  HarmonyReader one(true, false);
  p = one.feed("<|channel|>commentary to=functions.f<|message|>{}<|call|><|start|>assistant<|channel|>commentary "
               "to=functions.g<|message|>{\"b\": 2}<|call|>");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "f");
  EXPECT_EQ(one.calls().size(), 1u);
}

// The repository's copy of the published template, from the repository root or the build folder (ctest).
std::string gpt_oss_template() { return testing::read_test_data("chat_templates/openai-gpt-oss-120b.jinja"); }

TEST(HarmonyRequest, DetectedAndNamedAsVllmNamesThem) {
  const std::string src = gpt_oss_template();
  ASSERT_FALSE(src.empty());
  EXPECT_EQ(detect_tool_format(src), ToolFormat::openai);
  EXPECT_EQ(parse_tool_call_parser("openai"), ToolFormat::openai);
  EXPECT_EQ(parse_reasoning_parser("openai_gptoss"), ReasoningParser::openai_gptoss);
  EXPECT_STREQ(reasoning_parser_name(ReasoningParser::openai_gptoss), "openai_gptoss");
  EXPECT_STREQ(tool_format_name(ToolFormat::openai), "openai");
}

using testing::accepts;
using testing::kTools;

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

ResponseContext harmony_context(ToolMode mode, bool include = true, std::string prefix = "") {
  ResponseContext ctx;
  ctx.endpoint = Endpoint::chat_completions;
  ctx.id = "chatcmpl-1";
  ctx.model = "m";
  ctx.tool_mode = mode;
  ctx.tool_format = ToolFormat::openai;
  ctx.include_reasoning = include;
  ctx.harmony = true;
  ctx.harmony_prefix = std::move(prefix);
  return ctx;
}

json::Value whole(const ResponseContext& ctx, const std::string& text, FinishReason reason = FinishReason::stop) {
  Choice c;
  c.text = text;
  c.finish_reason = reason;
  return json::parse(full_response(ctx, {c}, Usage{}, false)).find("choices")->as_array()[0];
}

TEST(HarmonyResponses, MessageFields) {
  json::Value c = whole(harmony_context(ToolMode::automatic), "<|channel|>analysis<|message|>hm<|end|>" + kCall);
  const json::Value* m = c.find("message");
  EXPECT_EQ(m->find("reasoning_content")->as_string(), "hm");
  EXPECT_TRUE(m->find("content")->is_null());
  ASSERT_EQ(m->find("tool_calls")->as_array().size(), 1u);
  EXPECT_EQ(c.find("finish_reason")->as_string(), "tool_calls");
  // Cut: no call, "length".
  c = whole(harmony_context(ToolMode::automatic), kCall, FinishReason::length);
  EXPECT_EQ(c.find("message")->find("tool_calls"), nullptr);
  EXPECT_EQ(c.find("finish_reason")->as_string(), "length");
  // No reasoning: null; include_reasoning false: no field.
  c = whole(harmony_context(ToolMode::text), "<|channel|>final<|message|>4");
  EXPECT_EQ(c.find("message")->find("content")->as_string(), "4");
  EXPECT_TRUE(c.find("message")->find("reasoning_content")->is_null());
  c = whole(harmony_context(ToolMode::text, false), "<|channel|>analysis<|message|>hm<|end|>");
  EXPECT_EQ(c.find("message")->find("reasoning_content"), nullptr);
  // A forced call: the prompt's header first, then the sampled arguments.
  c = whole(harmony_context(ToolMode::forced, true, harmony_call_header("get_weather")), "{\"city\": \"Rome\"}");
  ASSERT_EQ(c.find("message")->find("tool_calls")->as_array().size(), 1u);
  EXPECT_EQ(c.find("finish_reason")->as_string(), "tool_calls");
}

TEST(HarmonyResponses, StreamedChunksAddUpToTheWholeAnswer) {
  const std::string text = kTexts[2];
  for (size_t a = 1; a < text.size(); ++a) {
    SCOPED_TRACE(std::to_string(a));
    const ResponseContext ctx = harmony_context(ToolMode::automatic);
    StreamWriter w(ctx, 1, false, false);
    std::string reasoning, content;
    size_t calls = 0;
    std::vector<std::string> arguments;
    std::string reason;
    const std::vector<std::string> pieces = {text.substr(0, a), text.substr(a)};
    for (size_t i = 0; i < pieces.size(); ++i) {
      SampleDelta d;
      d.text = pieces[i];
      if (i + 1 == pieces.size()) d.finish_reason = FinishReason::stop;
      const std::string e = w.chunk(d);
      const json::Value v = json::parse(e.substr(6));
      const json::Value& ch = v.find("choices")->as_array()[0];
      const json::Value& delta = *ch.find("delta");
      if (const json::Value* r = delta.find("reasoning_content")) reasoning += r->as_string();
      if (const json::Value* c = delta.find("content")) content += c->as_string();
      if (const json::Value* t = delta.find("tool_calls"))
        for (const json::Value& call : t->as_array()) {
          const size_t index = size_t(call.find("index")->as_int());
          if (call.find("id")) {  // the first delta names the call
            ASSERT_EQ(index, calls++);
            arguments.emplace_back();
          }
          ASSERT_LT(index, arguments.size());
          arguments[index] += call.find("function")->find("arguments")->as_string();
        }
      if (!ch.find("finish_reason")->is_null()) reason = ch.find("finish_reason")->as_string();
    }
    const json::Value m = *whole(ctx, text).find("message");
    EXPECT_EQ(content, m.find("content")->is_null() ? "" : m.find("content")->as_string());
    EXPECT_EQ(reasoning, "");
    EXPECT_EQ(calls, m.find("tool_calls")->as_array().size());
    EXPECT_EQ(calls, 2u);
    for (size_t c = 0; c < calls; ++c)
      EXPECT_EQ(arguments[c], m.find("tool_calls")->as_array()[c].find("function")->find("arguments")->as_string());
    EXPECT_EQ(reason, "tool_calls");
  }
}

// A forced call: its header is the prompt's end, so the first chunk announces it, with the arguments it brings.
TEST(HarmonyResponses, ForcedCallStreamsFromTheFirstChunk) {
  const ResponseContext ctx = harmony_context(ToolMode::forced, true, harmony_call_header("get_weather"));
  StreamWriter w(ctx, 1, false, false);
  const std::vector<std::string> pieces = {"{\"city\": ", "\"Rome\"}"};
  std::vector<std::vector<std::string>> fragments;
  std::string reason;
  for (size_t i = 0; i < pieces.size(); ++i) {
    SampleDelta d;
    d.text = pieces[i];
    if (i + 1 == pieces.size()) d.finish_reason = FinishReason::stop;
    const std::string e = w.chunk(d);
    const json::Value v = json::parse(e.substr(6));
    const json::Value& ch = v.find("choices")->as_array()[0];
    fragments.emplace_back();
    for (const json::Value& call : ch.find("delta")->find("tool_calls")->as_array()) {
      EXPECT_EQ(call.find("index")->as_int(), 0);
      EXPECT_EQ(call.find("id") != nullptr, i == 0);
      if (i == 0) EXPECT_EQ(call.find("function")->find("name")->as_string(), "get_weather");
      fragments.back().push_back(call.find("function")->find("arguments")->as_string());
    }
    if (!ch.find("finish_reason")->is_null()) reason = ch.find("finish_reason")->as_string();
  }
  EXPECT_EQ(fragments, (std::vector<std::vector<std::string>>{{"{\"city\": "}, {"\"Rome\"}"}}));
  EXPECT_EQ(reason, "tool_calls");
}

TEST(HarmonyResponses, ParallelToolCallsFalseSendsTheFirstCallOnly) {
  ResponseContext ctx = harmony_context(ToolMode::automatic);
  ctx.parallel_tool_calls = false;
  const json::Value c = whole(ctx, kTexts[2]);
  const std::vector<json::Value>& calls = c.find("message")->find("tool_calls")->as_array();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].find("function")->find("name")->as_string(), "f");
  StreamWriter w(ctx, 1, false, false);
  SampleDelta d;
  d.text = kTexts[2];
  d.finish_reason = FinishReason::stop;
  const json::Value v = json::parse(w.chunk(d).substr(6));
  const json::Value& ch = v.find("choices")->as_array()[0];
  ASSERT_EQ(ch.find("delta")->find("tool_calls")->as_array().size(), 1u);
  EXPECT_EQ(ch.find("finish_reason")->as_string(), "tool_calls");
}

}  // namespace
}  // namespace attnzoo::server
