// The qwen3 / deepseek_r1 reasoning split (vLLM's rules, server/reasoning.h) on fixed texts, the same split fed
// in pieces cut at every offset, and the reasoning fields of whole and streamed chat answers.
#include "server/reasoning.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "loader/json.h"
#include "server/responses.h"
#include "testing/stream_split_testing.h"

namespace attnzoo::server {
namespace {

using P = ReasoningParser;

struct Case {
  P parser;
  std::string text;
  bool has_reasoning;
  std::string reasoning, content;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {P::qwen3, "<think>\nStep 1.\n</think>\n\nThe answer is 4.", true, "\nStep 1.\n", "\n\nThe answer is 4."},
      {P::qwen3, "The answer is 4.", false, "", "The answer is 4."},
      // No end tag: qwen3 calls it all content, tags included.
      {P::qwen3, "<think>cut short", false, "", "<think>cut short"},
      {P::qwen3, "stray </think> only", false, "", "stray </think> only"},
      {P::qwen3, "<think>a</think>", true, "a", ""},
      {P::qwen3, "<think></think>  ", true, "", "  "},
      {P::qwen3, "pre<think>r</think>c<think>x</think>", true, "r", "prec<think>x</think>"},
      {P::qwen3, "<thinking><think>r</think>c", true, "r", "<thinking>c"},
      {P::qwen3, "<think>a<think>b</think>c", true, "a<think>b", "c"},
      {P::deepseek_r1, "<think>a<think>b</think>c", true, "a<think>b", "c"},
      {P::deepseek_r1, "Step 1.\n</think>\n\n4", true, "Step 1.\n", "\n\n4"},
      {P::deepseek_r1, "<think>\nStep 1.\n</think>4", true, "\nStep 1.\n", "4"},
      // No end tag: deepseek_r1 calls it all reasoning.
      {P::deepseek_r1, "still thinking", true, "still thinking", ""},
      {P::deepseek_r1, "<think>still", true, "still", ""},
      {P::deepseek_r1, "</think>", true, "", ""},
      {P::deepseek_r1, "", true, "", ""},
      {P::deepseek_r1, "a</think>b<think>c</think>", true, "a", "b<think>c</think>"},
      {P::deepseek_r1, "a<thi</think>b", true, "a<thi", "b"},
      {P::none, "<think>x</think>y", false, "", "<think>x</think>y"},
  };
  return c;
}

TEST(Reasoning, FixedTexts) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(std::string(reasoning_parser_name(c.parser)) + ": " + c.text);
    const ReasoningSplit s = split_reasoning(c.text, c.parser);
    EXPECT_EQ(s.has_reasoning, c.has_reasoning);
    EXPECT_EQ(s.reasoning, c.reasoning);
    EXPECT_EQ(s.content, c.content);
  }
}

ReasoningStream::Piece stream(P parser, const std::vector<std::string>& pieces, bool& closed) {
  ReasoningStream s(parser);
  ReasoningStream::Piece all;
  for (const std::string& p : pieces) {
    ReasoningStream::Piece got = s.feed(p);
    // Nothing that may still be a tag goes out: no piece ends inside a tag it could still complete.
    all.reasoning += got.reasoning;
    all.content += got.content;
  }
  closed = s.closed();
  ReasoningStream::Piece rest = s.finish();
  all.reasoning += rest.reasoning;
  all.content += rest.content;
  return all;
}

TEST(Reasoning, StreamedCutAtEveryOffsetEqualsWhole) {
  for (const Case& c : cases()) {
    if (c.parser == P::none) continue;
    testing::for_each_split(c.text, size_t(-1), [&](const std::vector<std::string>& pieces, const std::string& where) {
      SCOPED_TRACE(c.text + " cut " + where);
      bool closed = false;
      const ReasoningStream::Piece got = stream(c.parser, pieces, closed);
      if (c.parser == P::qwen3 && !c.has_reasoning && c.text.find(kThinkOpen) != std::string::npos) {
        // vLLM's one streamed difference: the open block went out as reasoning, the whole answer is content.
        EXPECT_FALSE(closed);
        return;
      }
      EXPECT_EQ(got.reasoning, c.reasoning);
      EXPECT_EQ(got.content, c.content);
    });
  }
}

TEST(Reasoning, OneByteAtATimeHoldsOnlyPossibleTags) {
  ReasoningStream s(P::qwen3);
  std::string content, reasoning;
  const std::string text = "x<think>ab</thinking></think>y";
  for (size_t i = 0; i < text.size(); ++i) {
    ReasoningStream::Piece p = s.feed(text.substr(i, 1));
    content += p.content;
    reasoning += p.reasoning;
    const std::string fed = text.substr(0, i + 1);
    if (fed == "x<thi") EXPECT_EQ(content + "|" + reasoning, "x|");  // "<thi" may be <think>: held
    if (fed == "x<think>ab</th") EXPECT_EQ(content + "|" + reasoning, "x|ab");  // "</th" may be </think>
  }
  // "</thinking>" could not be the end tag once its 8th byte came: it went out as reasoning before the end.
  EXPECT_EQ(reasoning, "ab</thinking>");
  EXPECT_EQ(content, "xy");
  EXPECT_TRUE(s.finish().content.empty());
}

TEST(Reasoning, ParserNames) {
  EXPECT_EQ(parse_reasoning_parser("qwen3"), P::qwen3);
  EXPECT_EQ(parse_reasoning_parser("deepseek_r1"), P::deepseek_r1);
  try {
    parse_reasoning_parser("granite");
    FAIL();
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("--reasoning-parser"), std::string::npos);
  }
}

ResponseContext chat_context(P parser, ToolMode mode = ToolMode::text, bool include = true) {
  ResponseContext ctx;
  ctx.endpoint = Endpoint::chat_completions;
  ctx.id = "chatcmpl-1";
  ctx.model = "m";
  ctx.tool_mode = mode;
  ctx.reasoning = parser;
  ctx.include_reasoning = include;
  return ctx;
}

json::Value whole(const ResponseContext& ctx, const std::string& text) {
  Choice c;
  c.text = text;
  c.finish_reason = FinishReason::stop;
  return json::parse(full_response(ctx, {c}, Usage{}, false)).find("choices")->as_array()[0];
}

TEST(ReasoningResponses, WholeAnswer) {
  const json::Value m = *whole(chat_context(P::qwen3), "<think>hm</think>\n\n4").find("message");
  EXPECT_EQ(m.find("reasoning_content")->as_string(), "hm");
  EXPECT_EQ(m.find("content")->as_string(), "\n\n4");
  // Empty content is null beside the reasoning.
  EXPECT_TRUE(whole(chat_context(P::deepseek_r1), "hm").find("message")->find("content")->is_null());
  EXPECT_TRUE(whole(chat_context(P::qwen3), "4").find("message")->find("reasoning_content")->is_null());
  // include_reasoning false: no field at all.
  EXPECT_EQ(whole(chat_context(P::qwen3, ToolMode::text, false), "<think>hm</think>4").find("message")->find(
                "reasoning_content"),
            nullptr);
  // No parser: the tags stay in the content, no reasoning field.
  const json::Value plain = *whole(chat_context(P::none), "<think>hm</think>4").find("message");
  EXPECT_EQ(plain.find("content")->as_string(), "<think>hm</think>4");
  EXPECT_EQ(plain.find("reasoning_content"), nullptr);
}

TEST(ReasoningResponses, ToolCallsAreReadFromTheContentOnly) {
  const std::string call = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>";
  const json::Value c = whole(chat_context(P::qwen3, ToolMode::automatic), "<think>maybe " + call + "</think>" + call);
  const json::Value& m = *c.find("message");
  EXPECT_EQ(m.find("reasoning_content")->as_string(), "maybe " + call);
  ASSERT_EQ(m.find("tool_calls")->as_array().size(), 1u);
  EXPECT_TRUE(m.find("content")->is_null());
  EXPECT_EQ(c.find("finish_reason")->as_string(), "tool_calls");
}

// The SSE chunks of one choice fed `pieces`, read back into the reasoning, content and calls they carry.
struct Streamed {
  std::string reasoning, content;
  size_t calls = 0;
  bool reasoning_after_content = false;
};

Streamed stream_answer(const ResponseContext& ctx, const std::vector<std::string>& pieces) {
  StreamWriter w(ctx, 1, false, false);
  Streamed out;
  for (size_t i = 0; i < pieces.size(); ++i) {
    SampleDelta d;
    d.index = 0;
    d.text = pieces[i];
    if (i + 1 == pieces.size()) d.finish_reason = FinishReason::stop;
    std::string sse = w.chunk(d);
    const json::Value v = json::parse(sse.substr(6));
    const json::Value& delta = *v.find("choices")->as_array()[0].find("delta");
    if (const json::Value* r = delta.find("reasoning_content")) {
      out.reasoning_after_content = out.reasoning_after_content || !out.content.empty();
      out.reasoning += r->as_string();
    }
    if (const json::Value* c = delta.find("content")) out.content += c->as_string();
    if (const json::Value* t = delta.find("tool_calls"))  // a call's first delta carries its id
      for (const json::Value& c : t->as_array()) out.calls += c.find("id") != nullptr;
  }
  return out;
}

TEST(ReasoningResponses, StreamedEqualsWholeAtEveryCut) {
  const std::string call = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
  const std::string text = "<think>a <tool_call> b</think>Sure." + call;
  for (P parser : {P::qwen3, P::deepseek_r1})
    for (size_t a = 1; a < text.size(); ++a) {
      SCOPED_TRACE(std::to_string(a));
      const ResponseContext ctx = chat_context(parser, ToolMode::automatic);
      const Streamed s = stream_answer(ctx, {text.substr(0, a), text.substr(a)});
      const json::Value m = *whole(ctx, text).find("message");
      EXPECT_EQ(s.reasoning, m.find("reasoning_content")->as_string());
      EXPECT_EQ(s.content, m.find("content")->as_string());
      EXPECT_EQ(s.calls, m.find("tool_calls")->as_array().size());
      EXPECT_FALSE(s.reasoning_after_content);
    }
}

}  // namespace
}  // namespace attnzoo::server
