// Sequences of schema documents (engine/json_sequence.h), the shape of a "required" tool_choice with several calls:
// each format's separators accepted byte by byte, each document held to its own branch of a tagged union, the
// text allowed to end exactly after a whole document or after `end`, and the degenerate sequence (none, or one
// document without `end`) reading exactly as JsonSchemaRecognizer does.
#include "engine/json_sequence.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "engine/json_schema_union.h"
#include "loader/json.h"

namespace attnzoo {
namespace {

std::shared_ptr<const JsonSchema> calls() {
  const auto call = [](const std::string& name, const std::string& arguments) {
    return compile_json_schema(json::parse(R"({"type": "object", "properties": {"name": {"const": ")" + name +
                                           R"("}, "arguments": )" + arguments +
                                           R"(}, "required": ["name", "arguments"]})"));
  };
  return tagged_union({call("f", R"({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})"),
                       call("g", R"({"type": "object", "properties": {"b": {"type": "boolean"}}, "required": ["b"]})")});
}

// Bytes taken; whether the text may end there (can_end) and must (complete).
struct Outcome {
  size_t taken;
  bool can_end, complete;
};
Outcome run(const JsonSchema& s, const JsonSequence* seq, const std::string& text) {
  JsonSequenceRecognizer r(s, seq);
  size_t n = 0;
  while (n < text.size() && r.push(uint8_t(text[n]))) ++n;
  return {n, r.can_end(), r.complete()};
}

const std::string kF = R"({"name": "f", "arguments": {"a": 1}})";
const std::string kG = R"({"name": "g", "arguments": {"b": true}})";

TEST(JsonSequence, HermesBlocks) {
  const auto s = calls();
  const JsonSequence seq{"\n</tool_call>\n<tool_call>\n", "\n</tool_call>", 0};
  const std::string sep = seq.separator;
  for (const std::string& text : {kF, kF + "\n</tool_call>", kF + sep + kG, kG + sep + kF + sep + kG + "\n</tool_call>"}) {
    const Outcome r = run(*s, &seq, text);
    EXPECT_EQ(r.taken, text.size()) << text;
    EXPECT_TRUE(r.can_end) << text;
    EXPECT_FALSE(r.complete) << text;  // no limit: another block may always follow
  }
  // Each call is held to its own tool's arguments: g's arguments after f's name are refused, the second call too.
  const std::string wrong = kF + sep + R"({"name": "g", "arguments": {"a")";
  EXPECT_EQ(run(*s, &seq, wrong).taken, wrong.size() - 2);  // refused at the key's "a"
  // Nothing else between calls, no end in the middle of one, no second call without the separator.
  for (const std::string& text : {kF + "\n\n", kF + " ", kF + kG, kF + "\n</tool_call>x"}) {
    const Outcome r = run(*s, &seq, text);
    EXPECT_LT(r.taken, text.size()) << text;
  }
  EXPECT_FALSE(run(*s, &seq, kF.substr(0, kF.size() - 1)).can_end);
  EXPECT_FALSE(run(*s, &seq, kF + sep).can_end);  // a block opened must hold a call
  EXPECT_FALSE(run(*s, &seq, kF + "\n</tool").can_end);
}

TEST(JsonSequence, LimitsAndOtherFormats) {
  const auto s = calls();
  // Two at most: after the second only `end`, and then the text is complete.
  const JsonSequence two{", ", "]", 2};
  EXPECT_EQ(run(*s, &two, kF + ", " + kG + ", ").taken, (kF + ", " + kG).size());
  const Outcome closed = run(*s, &two, kF + ", " + kG + "]");
  EXPECT_TRUE(closed.complete);
  const Outcome open = run(*s, &two, kF + "]");
  EXPECT_TRUE(open.complete);  // "]" cannot begin ", ": nothing may follow
  // Llama 3.x: "; " between, no end text.
  const JsonSequence llama{"; ", "", 0};
  const std::string text = kF + "; " + kG;
  const Outcome l = run(*s, &llama, text);
  EXPECT_EQ(l.taken, text.size());
  EXPECT_TRUE(l.can_end);
  EXPECT_FALSE(l.complete);
  // One document, no end: exactly the schema's recognizer (complete as the object closes).
  const JsonSequence one{"; ", "", 1};
  for (const JsonSequence* q : {&one, static_cast<const JsonSequence*>(nullptr)}) {
    const Outcome r = run(*s, q, kF + "; " + kG);
    EXPECT_EQ(r.taken, kF.size());
    EXPECT_TRUE(r.complete);
  }
}

TEST(JsonSequence, AmbiguousLiteralsAreRefused) {
  EXPECT_THROW(validate_sequence(JsonSequence{"", "]", 0}), ArgumentError);
  EXPECT_THROW(validate_sequence(JsonSequence{", ", ", ]", 0}), ArgumentError);
  EXPECT_NO_THROW(validate_sequence(JsonSequence{"\n</a>\n<a>", "\n</a>", 0}));
}

}  // namespace
}  // namespace attnzoo
