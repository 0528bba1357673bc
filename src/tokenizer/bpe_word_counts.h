#pragma once
// The word counts BPE training starts from: every line of the training files (its line ending included, as
// `tokenizers` reads files for training) pre-tokenized by the ByteLevel pre-tokenizer (GPT-2's regex, then bytes
// as characters), each distinct piece counted. Files are read in blocks of bounded size, so only the table of
// distinct words (and the longest line) is ever held in memory, however large the files.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe.h"

namespace attnzoo::tok {

class PreTokenizer;

using WordCounts = std::unordered_map<std::string, uint64_t, StringHash, std::equal_to<>>;

class WordCounter {
 public:
  explicit WordCounter(bool add_prefix_space);
  ~WordCounter();
  WordCounter(const WordCounter&) = delete;
  WordCounter& operator=(const WordCounter&) = delete;

  // Counts the words of one sequence (valid UTF-8; ArgumentError otherwise).
  void add_sequence(std::string_view text);
  // Counts every line of `path`. `on_bytes(n)` is called after each block with the bytes it held. Throws
  // ArgumentError naming the file (and the line for text that is not valid UTF-8).
  void add_file(const std::string& path, const std::function<void(uint64_t)>& on_bytes = {});

  const WordCounts& counts() const { return counts_; }
  WordCounts take() { return std::move(counts_); }

 private:
  void count_words(std::string_view text);  // `text` known to be valid UTF-8

  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  WordCounts counts_;
};

}  // namespace attnzoo::tok
