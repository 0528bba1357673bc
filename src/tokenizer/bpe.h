#pragma once
// The BPE model: a word (one pre-tokenized piece) starts as its characters and merges adjacent symbols by merge
// rank, lowest first (leftmost first among equal ranks), through a min-heap over a linked list of symbols, so a
// word of n characters costs O(n log n) however long it is. Results for short words are cached.
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace attnzoo::tok {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};
using Vocab = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

struct BpeOptions {
  std::optional<std::string> unk_token;
  std::optional<std::string> continuing_subword_prefix;
  std::optional<std::string> end_of_word_suffix;
  bool fuse_unk = false;
  bool byte_fallback = false;  // characters outside the vocabulary become <0xXX> byte tokens
  bool ignore_merges = false;  // a word that is itself in the vocabulary is one token, whatever the merges say
};

class Bpe {
 public:
  // Throws std::invalid_argument naming the merge (by index) whose parts or result are not in the vocabulary.
  Bpe(Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options);

  // Appends the ids of one word (valid UTF-8).
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  const std::string* id_to_token(int32_t id) const;
  const Vocab& vocab() const { return vocab_; }

 private:
  struct MergeResult {
    uint32_t rank;
    int32_t id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) { return uint64_t(uint32_t(a)) << 32 | uint32_t(b); }

  void merge_word(std::string_view word, std::vector<int32_t>& out) const;

  Vocab vocab_;
  std::vector<const std::string*> by_id_;  // id -> token (nullptr for holes)
  std::unordered_map<uint64_t, MergeResult> merges_;
  BpeOptions options_;
  std::optional<int32_t> unk_id_;
  int32_t byte_ids_[256];  // <0xXX> token ids for byte fallback, -1 when absent

  static constexpr size_t kCacheMaxWordBytes = 256;
  static constexpr size_t kCacheMaxEntries = 1 << 16;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace attnzoo::tok
