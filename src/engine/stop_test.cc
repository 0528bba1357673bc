#include "engine/stop.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo {
namespace {

// Feeds pieces one at a time; returns the emitted text and whether a stop string fired.
std::pair<std::string, bool> run(std::vector<std::string> stops, const std::vector<std::string>& pieces) {
  StopStringMatcher m(std::move(stops));
  std::string out;
  for (const auto& p : pieces) {
    auto step = m.push(p);
    out += step.text;
    if (step.stopped) return {out, true};
  }
  return {out + m.flush(), false};
}

TEST(StopStrings, TrimsTheStopStringAndWhatFollows) {
  EXPECT_EQ(run({"END"}, {"hello ", "wor", "ld EN", "D and more"}), std::make_pair(std::string("hello world "), true));
  EXPECT_EQ(run({"\n\n"}, {"a\n", "\nb"}), std::make_pair(std::string("a"), true));
  EXPECT_EQ(run({"stop"}, {"xxstopyy"}), std::make_pair(std::string("xx"), true));
}

TEST(StopStrings, NearMissesAreReleased) {
  StopStringMatcher m({"END"});
  auto s = m.push("abcE");
  EXPECT_EQ(s.text, "abc");  // "E" could begin "END": held back
  s = m.push("N");
  EXPECT_EQ(s.text, "");
  s = m.push("x");
  EXPECT_EQ(s.text, "ENx");
  EXPECT_FALSE(s.stopped);
  EXPECT_EQ(m.flush(), "");
  EXPECT_EQ(run({"END"}, {"E", "N"}), std::make_pair(std::string("EN"), false));
}

TEST(StopStrings, TagOverlapIsTheLongestTailThatMayStillBecomeTheMarker) {
  EXPECT_EQ(tag_overlap("answer<|ret", "<|return|>"), 5u);
  EXPECT_EQ(tag_overlap("answer<", "<|return|>"), 1u);
  EXPECT_EQ(tag_overlap("<|return|>", "<|return|>"), 0u);  // a whole marker is found, not held
  EXPECT_EQ(tag_overlap("answer", "<|return|>"), 0u);
  EXPECT_EQ(tag_overlap("", "<|return|>"), 0u);
  EXPECT_EQ(tag_overlap("aab", "aabx"), 3u);
}

TEST(StopStrings, EarliestOfSeveralWins) {
  EXPECT_EQ(run({"world", "lo w"}, {"hello world"}), std::make_pair(std::string("hel"), true));
  EXPECT_EQ(run({}, {"a", "b"}), std::make_pair(std::string("ab"), false));
  EXPECT_THROW(StopStringMatcher({""}), ArgumentError);
}

// A minimum length (vLLM's min_tokens): no stop string ends in the text of the first tokens, whole or not, but one
// that begins there and ends after them counts, as vLLM's detokenizer checks from min_tokens' text on.
TEST(StopStrings, NoStopStringEndsInTextThatCannotEnd) {
  StopStringMatcher m({"END", "ab"});
  auto s = m.push("xxENDab", /*can_end=*/false);
  EXPECT_FALSE(s.stopped);
  EXPECT_EQ(s.text, "xxENDab");
  s = m.push("yyE", false);
  EXPECT_EQ(s.text, "yy");  // "E" may still begin a stop string that ends later
  s = m.push("ND!", true);
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.text, "");
  StopStringMatcher whole({"ab"});
  EXPECT_EQ(whole.push("cab", false).text, "cab");
  s = whole.push("zab", true);
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.text, "z");
  StopStringMatcher tail({"abc"});
  EXPECT_EQ(tail.push("xab", false).text, "x");
  EXPECT_FALSE(tail.push("d", true).stopped);
  EXPECT_EQ(tail.flush(), "");
  StopStringMatcher held({"abc"});
  EXPECT_EQ(held.push("ab", false).text, "");
  EXPECT_EQ(held.flush(), "ab");  // once flushed, nothing of it is held against later text
  EXPECT_TRUE(held.push("abc", true).stopped);
}

class EosFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("attnzoo_eos_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const char* name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  std::filesystem::path dir_;
};

TEST_F(EosFiles, GenerationConfigWinsAndListsWork) {
  write("config.json", R"({"eos_token_id": 2})");
  EXPECT_EQ(load_eos_token_ids(dir_.string()), std::vector<int32_t>{2});
  write("generation_config.json", R"({"eos_token_id": [128001, 128009], "do_sample": true})");
  EXPECT_EQ(load_eos_token_ids(dir_.string()), (std::vector<int32_t>{128001, 128009}));
  write("generation_config.json", R"({"bos_token_id": 1})");  // no eos there: fall back to config.json
  EXPECT_EQ(load_eos_token_ids(dir_.string()), std::vector<int32_t>{2});
  write("config.json", R"({"text_config": {"eos_token_id": 106}})");
  EXPECT_EQ(load_eos_token_ids(dir_.string()), std::vector<int32_t>{106});
  write("config.json", R"({"eos_token_id": null})");
  EXPECT_TRUE(load_eos_token_ids(dir_.string()).empty());
  write("config.json", R"({"eos_token_id": "two"})");
  EXPECT_ANY_THROW(load_eos_token_ids(dir_.string()));
}

TEST_F(EosFiles, DefaultEosIdsJoinTheCheckpointTheTokenizerAndTheEndOfTurn) {
  write("tokenizer.json", R"({"added_tokens": [{"id": 3, "content": "</s>", "special": true}],
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "</s>": 3}, "merges": []}})");
  write("tokenizer_config.json", R"({"eos_token": "</s>"})");
  const auto tokenizer = tok::Tokenizer::load(dir_.string());
  EXPECT_EQ(default_eos_ids(dir_.string(), tokenizer.get()), std::vector<int32_t>{3});  // no config names one
  EXPECT_TRUE(default_eos_ids(dir_.string(), nullptr).empty());
  write("config.json", R"({"eos_token_id": 2})");
  write("generation_config.json", R"({"eos_token_id": [1, 2]})");
  // The tokenizer here was loaded before the configs named their ids: its own EOS joins theirs.
  EXPECT_EQ(default_eos_ids(dir_.string(), tokenizer.get()), (std::vector<int32_t>{1, 2, 3}));
  const std::vector<int32_t> end_of_turn{0, 2};
  EXPECT_EQ(default_eos_ids(dir_.string(), nullptr, end_of_turn), (std::vector<int32_t>{0, 1, 2}));
  write("config.json", R"({"eos_token_id": "two"})");
  std::filesystem::remove(dir_ / "generation_config.json");
  EXPECT_ANY_THROW(default_eos_ids(dir_.string(), tokenizer.get()));  // a malformed file is an error, not "none"
}

}  // namespace
}  // namespace attnzoo
