#include "tokenizer/bpe_trainer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo::tok {
namespace {

using Merges = std::vector<std::pair<std::string, std::string>>;

TrainedBpe train(const WordCounts& words, size_t merges, std::vector<std::string> special = {}, uint64_t min_frequency = 0) {
  BpeTrainerOptions o;
  o.vocab_size = special.size() + 256 + merges;
  o.special_tokens = std::move(special);
  o.min_frequency = min_frequency;
  return train_bpe(words, o);
}

TEST(BpeTrainer, SpecialTokensFirstThenTheByteAlphabetInCodePointOrder) {
  BpeTrainerOptions o;
  o.vocab_size = 2 + 256;  // the repeated "<s>" takes no id
  o.special_tokens = {"<s>", "</s>", "<s>"};
  const TrainedBpe b = train_bpe({{"ab", 1}}, o);
  ASSERT_EQ(b.vocab.size(), 2u + 256u);
  EXPECT_EQ(b.vocab[0], "<s>");
  EXPECT_EQ(b.vocab[1], "</s>");
  EXPECT_EQ(b.vocab[2], "!");              // U+0021, the smallest printable byte
  EXPECT_EQ(b.vocab[2 + 255], "\xC5\x83");  // U+0143, byte 0xAD's stand-in, the largest
  EXPECT_EQ(b.special_tokens, (std::vector<std::string>{"<s>", "</s>"}));
  EXPECT_TRUE(b.merges.empty());
}

TEST(BpeTrainer, MostFrequentPairFirstTiesToTheSmallerIds) {
  // (c,d) is seen 3 times, (a,b) and (x,y) twice: (c,d), then (a,b) before (x,y) since 'a' < 'x'.
  const TrainedBpe b = train({{"xy", 2}, {"ab", 2}, {"cd", 3}}, 3);
  EXPECT_EQ(b.merges, (Merges{{"c", "d"}, {"a", "b"}, {"x", "y"}}));
  EXPECT_EQ(b.vocab.back(), "xy");
  // Counts are weighted by the word's count and add up over words.
  const TrainedBpe c = train({{"ab", 1}, {"zab", 1}, {"yz", 3}}, 2);
  EXPECT_EQ(c.merges, (Merges{{"y", "z"}, {"a", "b"}}));
}

TEST(BpeTrainer, OverlappingPairsAndNewPairsFollowTheMerges) {
  // "aaaa": (a,a) three times -> [aa, aa], then (aa,aa) once.
  const TrainedBpe b = train({{"aaaa", 1}}, 5);
  EXPECT_EQ(b.merges, (Merges{{"a", "a"}, {"aa", "aa"}}));  // then nothing is left to merge
  EXPECT_EQ(b.vocab.size(), 256u + 2u);
}

TEST(BpeTrainer, MinFrequencyStopsTraining) {
  const TrainedBpe b = train({{"ab", 5}, {"cd", 2}}, 10, {}, 3);
  EXPECT_EQ(b.merges, (Merges{{"a", "b"}}));
}

TEST(BpeTrainer, WrittenFileLoadsAndEncodesTrainedWordsAsOneToken) {
  WordCounter counter(false);
  counter.add_sequence("hello hello hello world world\n");
  const TrainedBpe b = train(counter.counts(), 20, {"<|endoftext|>"});
  const auto t = Tokenizer::from_json(trained_tokenizer_json(b), "trained");
  EXPECT_EQ(t->vocab_size(), b.vocab.size());
  EXPECT_EQ(t->encode("hello"), (std::vector<int32_t>{*t->token_to_id("hello")}));
  EXPECT_EQ(t->encode("<|endoftext|> world"), (std::vector<int32_t>{0, *t->token_to_id("\xC4\xA0world")}));
  EXPECT_TRUE(t->is_special(0));
  EXPECT_EQ(t->decode(t->encode("héllo wörld\n")), "héllo wörld\n");
}

TEST(BpeTrainer, BadOptionsAreArgumentErrors) {
  BpeTrainerOptions o;
  o.vocab_size = 0;
  EXPECT_THROW(train_bpe({}, o), ArgumentError);
  o.vocab_size = 300;
  o.special_tokens = {""};
  EXPECT_THROW(train_bpe({}, o), ArgumentError);
  o.special_tokens = {"\xFF"};
  EXPECT_THROW(train_bpe({}, o), ArgumentError);
}

class WordCounterFile : public ::testing::Test {
 protected:
  std::string path_ = (std::filesystem::temp_directory_path() /
                       ("attnzoo_bpe_words_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + ".txt"))
                          .string();
  void TearDown() override { std::filesystem::remove(path_); }
  void write(const std::string& text) { std::ofstream(path_, std::ios::binary) << text; }
};

TEST_F(WordCounterFile, LinesAcrossReadBlocksCountAsWholeLines) {
  // Lines of 1000 bytes do not divide the 1 MiB read block: some straddle two blocks. The last has no newline.
  std::string text;
  for (int i = 0; i < 1200; ++i) text += "w" + std::to_string(i % 7) + std::string(995, 'x') + " \n";
  text += "tail";
  write(text);
  WordCounter from_file(false), by_line(false);
  from_file.add_file(path_);
  for (size_t start = 0; start < text.size();) {
    const size_t nl = text.find('\n', start);
    const size_t end = nl == std::string::npos ? text.size() : nl + 1;
    by_line.add_sequence(std::string_view(text).substr(start, end - start));
    start = end;
  }
  EXPECT_EQ(from_file.counts(), by_line.counts());
  EXPECT_EQ(from_file.counts().at("tail"), 1u);
}

TEST_F(WordCounterFile, InvalidUtf8NamesTheLine) {
  write("fine\nstill fine\nbad \xC3(\n");
  WordCounter counter(false);
  try {
    counter.add_file(path_);
    FAIL() << "no error";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(counter.add_file(path_ + ".missing"), ArgumentError);
}

}  // namespace
}  // namespace attnzoo::tok
