// JSON mode's mask (engine/json_constraint.h): the trie walk (and inside strings, the precomputed set of tokens a
// string takes as they are plus the walk over the others) allows exactly the tokens whose bytes the recognizer
// accepts one by one (checked token by token over a vocabulary of JSON pieces and random bytes, from recognizer
// states taken at every prefix of a document), and mask_row leaves those ids alone and sets every other to -inf.
#include "engine/json_constraint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "engine/json_schema.h"
#include "engine/json_schema_recognizer.h"
#include "loader/json.h"
#include "loader/json_try_parse.h"

namespace attnzoo {
namespace {

std::vector<std::string> vocabulary() {
  std::vector<std::string> v = {"", "{", "}", "[", "]", "\"", ":", ",", " ", "\n  ", "{\"", "\":", "\": \"", "\",",
                                "\"}", "}}", "]}", "\",\"", " \": \"", "0", "01", "-", "1.5", "e+", "true", "tr", "ue", "null", "false",
                                "\\", "\\u", "00e9", "\\n", "abc", "a\"b", "\xc3\xa9", "\xc3", "\xa9", "\xed\xa0\x80",
                                "      ", std::string(30, ' '), "\x01", "{}", "{\"a\":1}", "1,", "\"a\"", "\"\"", ""};
  std::mt19937 rng(3);
  const std::string alphabet = "{}[]\":,-.0123456789eEtrufalsn \\/\t\n\xc3\xa9\xe4";
  for (int i = 0; i < 2000; ++i) {
    std::string t;
    const int len = 1 + int(rng() % 5);
    for (int k = 0; k < len; ++k) t += alphabet[rng() % alphabet.size()];
    v.push_back(t);
  }
  v.push_back(v[40]);  // a repeated spelling: both ids allowed together
  return v;
}

TEST(JsonConstraint, TrieAllowsExactlyTheTokensTheRecognizerAccepts) {
  const auto vocab = vocabulary();
  const TokenTrie trie(vocab);
  ASSERT_EQ(trie.vocab_size(), int64_t(vocab.size()));
  // Inside strings most tokens take the precomputed path; the rest are walked.
  EXPECT_GT(trie.string_plain_tokens(), 100);
  EXPECT_LT(trie.string_plain_tokens(), int64_t(vocab.size()) - 100);
  const std::string doc = " {\"key\": [1.5e+3, -0, true, null, {\"s\": \"\\u00e9\xc3\xa9\\n\"}], \"\": {}}";
  JsonRecognizer state;
  std::vector<uint8_t> got;
  int64_t checked = 0, allowed_total = 0;
  for (size_t i = 0; i <= doc.size(); ++i) {
    const int64_t count = trie.allowed(state, got);
    std::vector<uint8_t> want(vocab.size(), 0);
    for (size_t id = 0; id < vocab.size(); ++id) {
      JsonRecognizer r = state;
      want[id] = !vocab[id].empty() && r.push(vocab[id]);
    }
    EXPECT_EQ(got, want) << "after " << i << " bytes: " << doc.substr(0, i);
    EXPECT_EQ(count, std::count(want.begin(), want.end(), 1));
    allowed_total += count;
    ++checked;
    if (i < doc.size()) ASSERT_TRUE(state.push(uint8_t(doc[i]))) << i;
  }
  EXPECT_TRUE(state.complete());
  EXPECT_EQ(trie.allowed(state, got), 0) << "nothing follows a complete object";
  // Neither all nor nothing on average: the walk prunes.
  EXPECT_GT(allowed_total, checked);
  EXPECT_LT(allowed_total, checked * int64_t(vocab.size()) / 2);
}

TEST(JsonConstraint, MaskRowKeepsOnlyTheAllowedIds) {
  std::vector<float> row = {0.5f, -1.f, 2.f, 3.f, 4.f, -7.f};
  const std::vector<uint8_t> allowed = {0, 1, 0, 0, 1, 0};
  mask_row(row, allowed);
  for (size_t i = 0; i < row.size(); ++i) {
    if (i == 1 || i == 4)
      EXPECT_FALSE(std::isinf(row[i])) << i;
    else
      EXPECT_TRUE(std::isinf(row[i]) && row[i] < 0) << i;
  }
  EXPECT_EQ(row[1], -1.f);
  EXPECT_EQ(row[4], 4.f);
}

// Numbers stay finite, normal doubles (json_lexeme.h's digit bounds), in JSON mode and under a schema: a sampled
// 1e400 or a 400-digit integer would be text that parsers read differently (attnzoo's own refuses it).
TEST(JsonConstraint, NumbersStayWithinADouble) {
  const auto schema = compile_json_schema(json::parse(R"({"type": "object", "properties": {"a": {"type": "number"}}})"));
  const auto integer = compile_json_schema(json::parse(R"({"type": "object", "properties": {"a": {"type": "integer"}}})"));
  const std::string nines(20, '9'), fraction(199, '0');
  struct Case { std::string number; bool whole; };
  // whole: the number as written is accepted; otherwise its last byte is the one refused.
  const std::vector<Case> cases = {
      {nines, true}, {nines + "9", false}, {"-" + nines, true}, {"-" + nines + "0", false},
      {"1e99", true}, {"1e100", false}, {"2E-99", true}, {"3e+999", false}, {"1.5e+12", true},
      {"0." + fraction + "1", true}, {"0." + fraction + "12", false}, {nines + "." + fraction + "9e99", true},
      {"-0." + fraction + "1e-99", true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.number);
    const std::string head = "{\"a\": ", body = head + c.number;
    JsonRecognizer mode;
    JsonSchemaRecognizer typed(*schema);
    const std::string prefix = body.substr(0, body.size() - 1);
    ASSERT_TRUE(mode.push(std::string_view(prefix)));
    ASSERT_TRUE(typed.push(std::string_view(prefix)));
    const uint8_t last = uint8_t(body.back());
    EXPECT_EQ(mode.push(last), c.whole);
    EXPECT_EQ(typed.push(last), c.whole);
    if (!c.whole) continue;
    ASSERT_TRUE(mode.push('}') && typed.push('}'));
    EXPECT_TRUE(mode.complete() && typed.complete());
    const auto v = json::try_parse(body + "}");
    ASSERT_TRUE(v.has_value()) << "the loader's parse refuses what the recognizer let through";
    const double d = v->find("a")->as_double();
    EXPECT_TRUE(std::isfinite(d) && (d != 0 || c.number.find_first_of("123456789") == std::string::npos));
  }
  JsonSchemaRecognizer whole(*integer);
  ASSERT_TRUE(whole.push(std::string_view("{\"a\": " + nines)));
  EXPECT_FALSE(whole.push('0'));
  EXPECT_TRUE(whole.push('}'));
}

TEST(JsonConstraint, RecognizerPushOfARejectedStringLeavesTheStateAlone) {
  JsonRecognizer r;
  ASSERT_TRUE(r.push(std::string_view("{\"a\": 1")));
  EXPECT_FALSE(r.push(std::string_view("2x")));  // '2' fits, 'x' does not: neither is kept
  EXPECT_TRUE(r.push(std::string_view("}")));
  EXPECT_TRUE(r.complete());
}

}  // namespace
}  // namespace attnzoo
