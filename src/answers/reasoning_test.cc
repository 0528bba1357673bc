// The qwen3 / deepseek_r1 reasoning split (vLLM's rules, answers/reasoning.h) on fixed texts, the same split fed
// in pieces cut at every offset, and the parsers' names (the response fields: server/responses_reasoning_test.cc).
#include "answers/reasoning.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "loader/json.h"
#include "testing/stream_split_testing.h"

namespace attnzoo::answers {
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

}  // namespace
}  // namespace attnzoo::answers
