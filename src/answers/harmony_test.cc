// gpt-oss's harmony answers read into reasoning_content / content / tool_calls (answers/harmony.h) on fixed texts:
// analysis + final, calls with and without <|constrain|>, `to=` before the channel, several calls, preambles, cut
// messages, stray words, other recipients; every text streamed cut at every pair of offsets adds up to the whole
// (a call's deltas: announced at its header, its arguments as written, joining to the whole answer's);
// the template detection and the flags' names (the request and response sides: server/tool_request_test.cc,
// server/responses_harmony_test.cc).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "answers/harmony.h"
#include "core/error.h"
#include "loader/json.h"
#include "testing/harmony_testing.h"
#include "testing/stream_split_testing.h"
#include "testing/tool_request_testing.h"

namespace attnzoo::answers {
namespace {

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
  const HarmonyAnswer a = read_harmony("<|channel|>analysis<|message|>Need the weather.<|end|>" + testing::kHarmonyCall, true);
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

TEST(Harmony, StreamedCutAtEveryPairOfOffsetsEqualsWhole) {
  for (const std::string& text : testing::kHarmonyTexts)
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


}  // namespace
}  // namespace attnzoo::answers
