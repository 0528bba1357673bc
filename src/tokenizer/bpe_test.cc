#include "tokenizer/bpe.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace attnzoo::tok {
namespace {

Vocab vocab_of(std::initializer_list<const char*> tokens) {
  Vocab v;
  int32_t id = 0;
  for (const char* t : tokens) v.emplace(t, id++);
  return v;
}

std::vector<int32_t> run(const Bpe& bpe, std::string_view word) {
  std::vector<int32_t> out;
  bpe.tokenize(word, out);
  return out;
}

TEST(Bpe, MergesByRankNotByPosition) {
  // ids:            0    1    2    3     4     5
  const Bpe bpe(vocab_of({"a", "b", "c", "bc", "ab", "abc"}), {{"b", "c"}, {"a", "b"}, {"a", "bc"}}, {});
  // "abc": (b,c) has rank 0 and wins over (a,b) rank 1, then (a,bc) -> abc.
  EXPECT_EQ(run(bpe, "abc"), (std::vector<int32_t>{5}));
  EXPECT_EQ(run(bpe, "ab"), (std::vector<int32_t>{4}));
  EXPECT_EQ(run(bpe, "cab"), (std::vector<int32_t>{2, 4}));
  EXPECT_EQ(run(bpe, "abc"), (std::vector<int32_t>{5}));  // again, from the cache
}

TEST(Bpe, EqualRanksMergeLeftmostFirst) {
  const Bpe bpe(vocab_of({"a", "aa"}), {{"a", "a"}}, {});
  EXPECT_EQ(run(bpe, "aaa"), (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(run(bpe, "aaaa"), (std::vector<int32_t>{1, 1}));
  // A long run stays O(n log n) and correct: 10001 a's -> 5000 "aa" + one "a".
  const auto ids = run(bpe, std::string(10001, 'a'));
  ASSERT_EQ(ids.size(), 5001u);
  EXPECT_EQ(ids.back(), 0);
}

TEST(Bpe, UnknownByteFallbackAndIgnoreMerges) {
  BpeOptions unk;
  unk.unk_token = "<unk>";
  const Bpe with_unk(vocab_of({"<unk>", "a"}), {}, unk);
  EXPECT_EQ(run(with_unk, "a\xC3\xA9\xC3\xA9" "a"), (std::vector<int32_t>{1, 0, 0, 1}));
  unk.fuse_unk = true;
  const Bpe fused(vocab_of({"<unk>", "a"}), {}, unk);
  EXPECT_EQ(run(fused, "a\xC3\xA9\xC3\xA9" "a"), (std::vector<int32_t>{1, 0, 1}));

  BpeOptions fallback;
  fallback.byte_fallback = true;
  const Bpe bytes(vocab_of({"a", "<0xC3>", "<0xA9>"}), {}, fallback);
  EXPECT_EQ(run(bytes, "a\xC3\xA9"), (std::vector<int32_t>{0, 1, 2}));

  BpeOptions ignore;
  ignore.ignore_merges = true;
  // "abc" is in the vocabulary, so it is one token even though no merge chain builds it.
  const Bpe ig(vocab_of({"a", "b", "c", "ab", "abc"}), {{"a", "b"}}, ignore);
  EXPECT_EQ(run(ig, "abc"), (std::vector<int32_t>{4}));
  EXPECT_EQ(run(ig, "abcab"), (std::vector<int32_t>{3, 2, 3}));
}

TEST(Bpe, ContinuingSubwordPrefix) {
  BpeOptions opt;
  opt.continuing_subword_prefix = "##";
  const Bpe bpe(vocab_of({"a", "##b", "##c", "ab", "abc", "##bc"}), {{"a", "##b"}, {"ab", "##c"}}, opt);
  EXPECT_EQ(run(bpe, "abc"), (std::vector<int32_t>{4}));
}

TEST(Bpe, MergesMustReferToKnownTokens) {
  EXPECT_THROW(Bpe(vocab_of({"a", "b"}), {{"a", "x"}}, {}), std::invalid_argument);
  EXPECT_THROW(Bpe(vocab_of({"a", "b"}), {{"a", "b"}}, {}), std::invalid_argument);  // "ab" missing
}

}  // namespace
}  // namespace attnzoo::tok
