#include "tokenizer/gguf_vocab.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "loader/load_error.h"
#include "tokenizer/gguf_pre_tokenizer.h"
#include "tokenizer/merges_from_scores.h"

namespace attnzoo::tok {
namespace {

using Ids = std::vector<int32_t>;

// "Ġ" is the byte-level spelling of a space.
GgufVocab byte_level_vocab() {
  GgufVocab v;
  v.model = "gpt2";
  v.pre = "gpt-2";
  v.tokens = {"<|endoftext|>", "h", "i", "\xC4\xA0", "hi", "\xC4\xA0h", "\xC4\xA0hi", "<think>", "1", "2", "12"};
  v.token_types = {3, 1, 1, 1, 1, 1, 1, 4, 1, 1, 1};
  v.merges = {"\xC4\xA0 h", "\xC4\xA0h i", "h i", "1 2"};
  v.eos = 0;
  return v;
}

// A SentencePiece-style vocabulary: no merges, scores instead; bytes 0x41..0x43 as fallback tokens.
GgufVocab spm_vocab() {
  GgufVocab v;
  v.model = "llama";
  v.tokens = {"<unk>", "<s>", "</s>", "<0x41>", "<0x42>", "<0x43>", "\xE2\x96\x81", "a", "b", "ab", "\xE2\x96\x81" "ab"};
  v.scores = {0, 0, 0, 0, 0, 0, -1, -2, -3, -4, -5};
  v.token_types = {2, 3, 3, 6, 6, 6, 1, 1, 1, 1, 1};
  v.bos = 1;
  v.eos = 2;
  v.unk = 0;
  return v;
}

TEST(GgufVocab, ByteLevelVocabulary) {
  const auto t = tokenizer_from_gguf_vocab(byte_level_vocab());
  EXPECT_EQ(t->encode("hi hi"), (Ids{4, 6}));  // gpt-2 adds no BOS by default
  EXPECT_EQ(t->encode("hi<|endoftext|> hi<think>"), (Ids{4, 0, 6, 7}));
  EXPECT_EQ(t->decode(Ids{4, 6, 0}), "hi hi<|endoftext|>");
  EXPECT_EQ(t->decode(Ids{4, 6, 0}, true), "hi hi");
  EXPECT_TRUE(t->is_special(0));
  EXPECT_FALSE(t->is_special(7));
  EXPECT_EQ(t->eos_token_ids(), Ids{0});
  EXPECT_EQ(t->encode("12"), (Ids{10}));

  GgufVocab v = byte_level_vocab();
  v.pad = 4;  // a named token the file calls normal text stays ordinary
  EXPECT_EQ(tokenizer_from_gguf_vocab(v)->encode("hi hi"), (Ids{4, 6}));
  EXPECT_FALSE(tokenizer_from_gguf_vocab(v)->is_special(4));
  v.token_types.clear();  // without types, every named token is special, as transformers makes it
  EXPECT_EQ(tokenizer_from_gguf_vocab(v)->encode("hi hi"), (Ids{4, 3, 4}));
}

TEST(GgufVocab, PreTokenizerChoosesSplitsAndDefaults) {
  GgufVocab v = byte_level_vocab();
  v.pre = "smollm";  // digits one by one
  EXPECT_EQ(tokenizer_from_gguf_vocab(v)->encode("12"), (Ids{8, 9}));
  v.pre = "llama-bpe";  // BOS by default, once the vocabulary names one
  v.bos = 0;
  EXPECT_EQ(tokenizer_from_gguf_vocab(v)->encode("hi"), (Ids{0, 4}));
  v.add_bos = false;
  v.add_eos = true;
  EXPECT_EQ(tokenizer_from_gguf_vocab(v)->encode("hi"), (Ids{4, 0}));
  v.bos = -1;
  v.add_bos.reset();
  v.add_eos.reset();
  EXPECT_EQ(tokenizer_from_gguf_vocab(v)->encode("hi"), (Ids{4}));  // a default BOS without a BOS id is dropped
  // Every name's regexes compile and keep a plain word whole.
  const std::string names = known_gguf_pre_tokenizers();
  size_t count = 0;
  for (size_t start = 0; start < names.size(); ++count) {
    const size_t end = std::min(names.find(", ", start), names.size());
    v.pre = names.substr(start, end - start);
    EXPECT_NE(find_gguf_pre_tokenizer(v.pre), nullptr) << v.pre;
    EXPECT_EQ(tokenizer_from_gguf_vocab(v)->encode("hi"), (Ids{4})) << v.pre;
    start = end + 2;
  }
  EXPECT_GT(count, 50u);
  v.pre = "";  // llama.cpp's "default"
  EXPECT_EQ(tokenizer_from_gguf_vocab(v)->encode("hi"), (Ids{4}));
}

TEST(GgufVocab, SentencePieceVocabulary) {
  const auto t = tokenizer_from_gguf_vocab(spm_vocab());
  // BOS by default; "▁" before the text; "C" and "\x01" have no piece: "C" falls back to its byte token and "\x01"
  // (no byte token either) is dropped.
  EXPECT_EQ(t->encode("ab abC\x01"), (Ids{1, 10, 10, 5}));
  EXPECT_EQ(t->encode("ab", false), (Ids{10}));
  // "▁" before every run of text, after a special token too; two before a leading space (llama.cpp, and Llama 2's
  // tokenizer.json: Prepend("▁") + Replace(" ", "▁")).
  EXPECT_EQ(t->encode("<s>ab</s>", false), (Ids{1, 10, 2}));
  EXPECT_EQ(t->encode(" ab", false), (Ids{6, 10}));
  EXPECT_EQ(t->decode(Ids{1, 10, 10, 5}), "<s> ab abC");
  EXPECT_EQ(t->decode(Ids{10, 10, 5}), "ab abC");
  EXPECT_EQ(t->decode(Ids{10, 10, 5}, true), "ab abC");
  EXPECT_EQ(t->encode("<unk>", false), (Ids{0}));  // the named unknown token is special too
  EXPECT_EQ(t->eos_token_ids(), Ids{2});

  GgufVocab v = spm_vocab();
  v.add_space_prefix = false;  // tokenizer.ggml.add_space_prefix: spaces still become "▁", none is added
  const auto bare = tokenizer_from_gguf_vocab(v);
  EXPECT_EQ(bare->encode("ab", false), (Ids{9}));
  EXPECT_EQ(bare->encode(" ab", false), (Ids{10}));
  EXPECT_EQ(bare->decode(Ids{10}), " ab");  // and none is taken off
}

TEST(GgufVocab, MergesFromScoresRankByResultScoreThenLength) {
  // "abc" (best score) can be cut as a+bc or ab+c: the longer left part first, then ties keep vocabulary order.
  const std::vector<std::string> tokens = {"a", "b", "c", "bc", "ab", "abc"};
  const std::vector<float> scores = {0, 0, 0, -2, -1, 5};
  const auto merges = merges_from_scores(tokens, scores);
  using M = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(merges, (M{{"ab", "c"}, {"a", "bc"}, {"a", "b"}, {"b", "c"}}));
}

void expect_error(const std::function<void(GgufVocab&)>& edit, const std::string& key, GgufVocab v = byte_level_vocab()) {
  edit(v);
  try {
    tokenizer_from_gguf_vocab(v);
    ADD_FAILURE() << "no error for " << key;
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
  }
}

TEST(GgufVocab, RejectsBadMetadataNamingTheKey) {
  expect_error([](GgufVocab& v) { v.model = "bert"; }, "tokenizer.ggml.model");
  expect_error([](GgufVocab& v) { v.model.clear(); }, "tokenizer.ggml.model");
  expect_error([](GgufVocab& v) { v.tokens.clear(); }, "tokenizer.ggml.tokens");
  expect_error([](GgufVocab& v) { v.tokens[2] = "\xFF"; }, "tokenizer.ggml.tokens[2]");
  expect_error([](GgufVocab& v) { v.pre = "nope"; }, "tokenizer.ggml.pre");
  expect_error([](GgufVocab& v) { v.scores = {1.0f}; }, "tokenizer.ggml.scores");
  expect_error([](GgufVocab& v) {
    v.scores.assign(v.tokens.size(), 0.0f);
    v.scores[4] = std::numeric_limits<float>::quiet_NaN();
  }, "tokenizer.ggml.scores[4]");
  expect_error([](GgufVocab& v) { v.token_types = {1}; }, "tokenizer.ggml.token_type");
  expect_error([](GgufVocab& v) { v.token_types[3] = 7; }, "tokenizer.ggml.token_type[3]");
  expect_error([](GgufVocab& v) { v.merges.push_back("hi"); }, "tokenizer.ggml.merges[4]");
  expect_error([](GgufVocab& v) { v.merges.push_back("h "); }, "tokenizer.ggml.merges[4]");
  expect_error([](GgufVocab& v) { v.merges.push_back("h x"); }, "tokenizer.ggml.merges[4]");
  expect_error([](GgufVocab& v) { v.bos = 11; }, "tokenizer.ggml.bos_token_id");
  expect_error([](GgufVocab& v) { v.eot = -5; }, "tokenizer.ggml.eot_token_id");
  expect_error([](GgufVocab& v) { v.pad = int64_t(1) << 40; }, "tokenizer.ggml.padding_token_id");
  expect_error([](GgufVocab& v) { v.add_bos = true; }, "tokenizer.ggml.add_bos_token");
  expect_error([](GgufVocab& v) { v.eos = -1, v.add_eos = true; }, "tokenizer.ggml.add_eos_token");
  expect_error([](GgufVocab& v) { v.scores.clear(); }, "tokenizer.ggml.scores", spm_vocab());
  expect_error([](GgufVocab& v) { v.tokens[7] = std::string(70000, 'a'); }, "tokenizer.ggml.tokens", spm_vocab());
}

}  // namespace
}  // namespace attnzoo::tok
