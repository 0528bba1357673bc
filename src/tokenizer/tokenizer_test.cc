#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include "loader/load_error.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/regex.h"
#include "tokenizer/stream_decoder.h"

namespace attnzoo::tok {
namespace {

// A byte-level tokenizer written by hand: "Ġ" is the space byte, "Ã" and "©" the two bytes of "é".
const char* kTokenizerJson = R"({
  "added_tokens": [{"id": 9, "content": "<eos>", "special": true, "normalized": false,
                    "single_word": false, "lstrip": false, "rstrip": false}],
  "normalizer": {"type": "NFC"},
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": " ?\\p{L}+|\\s+"}, "behavior": "Isolated", "invert": false},
    {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]},
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<eos>", "type_id": 0}}],
    "special_tokens": {"<eos>": {"id": "<eos>", "ids": [9], "tokens": ["<eos>"]}}},
  "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "vocab": {"h": 0, "i": 1, "Ġ": 2, "Ã": 3, "©": 4, "hi": 5, "Ġh": 6, "Ġhi": 7,
                                    "Ã©": 8, "<eos>": 9},
            "merges": ["Ġ h", ["Ġh", "i"], ["h", "i"], ["Ã", "©"]]}
})";

std::shared_ptr<const Tokenizer> hand_made() { return Tokenizer::from_json(kTokenizerJson, "hand.json"); }

TEST(Tokenizer, EncodesDecodesAndAddsSpecialTokens) {
  const auto t = hand_made();
  EXPECT_EQ(t->encode("hi hi", false), (std::vector<int32_t>{5, 7}));
  EXPECT_EQ(t->encode("hi hi"), (std::vector<int32_t>{5, 7, 9}));
  EXPECT_EQ(t->encode("hi<eos>hi", false), (std::vector<int32_t>{5, 9, 5}));
  // NFC first: "e" + combining acute would become "é"; "é" itself is two bytes that merge into one token.
  EXPECT_EQ(t->encode("\xC3\xA9", false), (std::vector<int32_t>{8}));
  EXPECT_EQ(t->encode("e\xCC\x81", false), (std::vector<int32_t>{8}));
  EXPECT_EQ(t->decode(std::vector<int32_t>{5, 7, 9}), "hi hi<eos>");
  EXPECT_EQ(t->decode(std::vector<int32_t>{5, 7, 9}, true), "hi hi");
  EXPECT_EQ(t->decode(std::vector<int32_t>{3}), "\xEF\xBF\xBD");  // half of é: U+FFFD
  EXPECT_EQ(t->decode_bytes(std::vector<int32_t>{3}), "\xC3");
  EXPECT_EQ(t->decode(std::vector<int32_t>{5, 1234}), "hi");  // unknown ids are skipped
  EXPECT_EQ(t->vocab_size(), 10u);
  EXPECT_EQ(t->token_to_id("Ġhi"), 7);
  EXPECT_EQ(t->id_to_token(9), "<eos>");
  EXPECT_TRUE(t->is_special(9));
  EXPECT_THROW(t->encode("bad \xFF"), ArgumentError);
}

TEST(Tokenizer, StreamDecoderHoldsBackPartialCharacters) {
  const auto t = hand_made();
  StreamDecoder s(t);
  EXPECT_EQ(s.push(5), "hi");
  EXPECT_EQ(s.push(3), "");  // first byte of é
  EXPECT_EQ(s.push(4), "\xC3\xA9");
  EXPECT_EQ(s.push(7), " hi");
  EXPECT_EQ(s.push(3), "");
  EXPECT_EQ(s.push(5), "\xEF\xBF\xBDhi");  // the lone lead byte can no longer complete
  EXPECT_EQ(s.push(3), "");
  EXPECT_EQ(s.finish(), "\xEF\xBF\xBD");
}

TEST(Regex, FollowsOnigIterationForEmptyMatches) {
  // Empty matches split the text, but never right after the previous match: a | b | xx | c.
  const Regex re("x*", false);
  const auto pieces = split_text(re, "abxxc", SplitBehavior::isolated, false);
  ASSERT_EQ(pieces.size(), 4u);
  EXPECT_EQ(pieces[1], (std::pair<size_t, size_t>{1, 2}));
  EXPECT_EQ(pieces[2], (std::pair<size_t, size_t>{2, 4}));
}

TEST(Regex, SplitBehaviors) {
  const Regex re("b", false);
  using R = std::vector<std::pair<size_t, size_t>>;
  EXPECT_EQ(split_text(re, "abbc", SplitBehavior::removed, false), (R{{0, 1}, {3, 4}}));
  EXPECT_EQ(split_text(re, "abbc", SplitBehavior::merged_with_previous, false), (R{{0, 2}, {2, 3}, {3, 4}}));
  EXPECT_EQ(split_text(re, "abbc", SplitBehavior::merged_with_next, false), (R{{0, 1}, {1, 2}, {2, 4}}));
  EXPECT_EQ(split_text(re, "abbc", SplitBehavior::contiguous, false), (R{{0, 1}, {1, 3}, {3, 4}}));
  EXPECT_EQ(split_text(re, "abbc", SplitBehavior::removed, true), (R{{1, 2}, {2, 3}}));
}

// Each malformed variant must fail with a LoadError naming the file and the field.
void expect_load_error(const std::string& json, const std::string& field) {
  try {
    Tokenizer::from_json(json, "bad.json");
    FAIL() << "accepted: " << json;
  } catch (const LoadError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("bad.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find(field), std::string::npos) << msg;
  }
}

std::string with(const std::string& from, const std::string& to) {
  std::string s = kTokenizerJson;
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

TEST(Tokenizer, MalformedFilesNameTheField) {
  expect_load_error("{", "invalid JSON");
  expect_load_error("[]", "(top level)");
  expect_load_error("{}", "model: missing");
  expect_load_error(with("\"type\": \"BPE\"", "\"type\": \"Unigram\""), "model.type");
  expect_load_error(with("\"h\": 0,", "\"h\": \"zero\","), "model.vocab.h");
  expect_load_error(with("\"h\": 0,", "\"h\": -4,"), "model.vocab.h");
  expect_load_error(with("\"Ġ h\"", "\"Ġ q\""), "model.merges[0]");
  expect_load_error(with("\"Ġ h\"", "\"Ġh\""), "model.merges[0]");
  expect_load_error(with("[\"h\", \"i\"]", "[\"h\"]"), "model.merges[2]");
  expect_load_error(with(" ?\\\\p{L}+|\\\\s+", "(?<bad"), "pre_tokenizer.pretokenizers[0].pattern.Regex");
  expect_load_error(with("\"Isolated\"", "\"Sideways\""), "pre_tokenizer.pretokenizers[0].behavior");
  expect_load_error(with("{\"type\": \"NFC\"}", "{\"type\": \"Precompiled\"}"), "normalizer.type");
  expect_load_error(with("{\"type\": \"NFC\"}", "{\"kind\": \"NFC\"}"), "normalizer.type");
  expect_load_error(with("\"ids\": [9]", "\"ids\": [\"9\"]"), "post_processor.special_tokens.<eos>.ids[0]");
  expect_load_error(with("{\"type\": \"ByteLevel\"}", "{\"type\": \"Strip\"}"), "decoder.content");
  expect_load_error(with("\"id\": 9,", "\"id\": 1e30,"), "added_tokens[0].id");
  // PCRE2 start-of-pattern options would switch off the JIT or change limits for every encode.
  expect_load_error(with(" ?\\\\p{L}+|\\\\s+", "(*NO_JIT) ?\\\\p{L}+"), "pre_tokenizer.pretokenizers[0].pattern.Regex");
  expect_load_error(with(" ?\\\\p{L}+|\\\\s+", "(*LIMIT_MATCH=1)x"), "pre_tokenizer.pretokenizers[0].pattern.Regex");
}

// A pattern that backtracks catastrophically stops at PCRE2's limits; the error names the field and is an
// ArgumentError (Python ValueError), not a bare runtime_error.
TEST(Tokenizer, RegexLimitErrorNamesTheField) {
  const auto t = Tokenizer::from_json(with(" ?\\\\p{L}+|\\\\s+", "(\\\\w+\\\\s?)+$"), "slow.json");
  std::string text;
  for (int i = 0; i < 40; ++i) text += "ab ";
  text += "!";
  try {
    t->encode(text, false);
    FAIL() << "no error";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("pre_tokenizer.pretokenizers[0].pattern.Regex"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("PCRE2 error"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attnzoo::tok
