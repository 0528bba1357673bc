#include "tokenizer/bpe.h"

#include <cstdio>
#include <queue>
#include <stdexcept>

#include "core/utf8.h"

namespace attnzoo::tok {

Bpe::Bpe(Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options)
    : vocab_(std::move(vocab)), options_(std::move(options)) {
  int32_t max_id = -1;
  for (const auto& [token, id] : vocab_) max_id = std::max(max_id, id);
  by_id_.assign(size_t(max_id + 1), nullptr);
  for (const auto& [token, id] : vocab_) by_id_[size_t(id)] = &token;

  const std::string& prefix = options_.continuing_subword_prefix ? *options_.continuing_subword_prefix : std::string();
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const auto ia = vocab_.find(a), ib = vocab_.find(b);
    if (ia == vocab_.end() || ib == vocab_.end())
      throw std::invalid_argument("[" + std::to_string(rank) + "]: token '" + (ia == vocab_.end() ? a : b) +
                                  "' is not in the vocabulary");
    // With a continuing-subword prefix the right part loses its prefix when merged ("a" + "##b" -> "ab").
    const std::string merged =
        a + (!prefix.empty() && b.compare(0, prefix.size(), prefix) == 0 ? b.substr(prefix.size()) : b);
    const auto im = vocab_.find(merged);
    if (im == vocab_.end())
      throw std::invalid_argument("[" + std::to_string(rank) + "]: merged token '" + merged +
                                  "' is not in the vocabulary");
    // A pair listed twice keeps its last rank, as the reference implementation's map collection does.
    merges_.insert_or_assign(pair_key(ia->second, ib->second), MergeResult{uint32_t(rank), im->second});
  }
  if (options_.unk_token) {
    const auto it = vocab_.find(*options_.unk_token);
    if (it != vocab_.end()) unk_id_ = it->second;
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    const auto it = vocab_.find(std::string_view(name));
    byte_ids_[b] = it == vocab_.end() ? -1 : it->second;
  }
}

std::optional<int32_t> Bpe::token_to_id(std::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* Bpe::id_to_token(int32_t id) const {
  return id >= 0 && size_t(id) < by_id_.size() ? by_id_[size_t(id)] : nullptr;
}

void Bpe::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (auto id = token_to_id(word)) {
      out.push_back(*id);
      return;
    }
  }
  const bool cacheable = word.size() <= kCacheMaxWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    const auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = out.size();
  merge_word(word, out);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kCacheMaxEntries) cache_.clear();  // crude but bounded; a hit rate drop, not a leak
    cache_.emplace(std::string(word), std::vector<int32_t>(out.begin() + long(first), out.end()));
  }
}

void Bpe::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  // Symbols of the word as a doubly linked list over a vector; a merged-away symbol gets id -1.
  struct Symbol {
    int32_t id;
    int32_t prev, next;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  auto add = [&](int32_t id) {
    const int32_t n = int32_t(symbols.size());
    symbols.push_back({id, n - 1, -1});
    if (n > 0) symbols[size_t(n - 1)].next = n;
  };

  const std::string* prefix = options_.continuing_subword_prefix ? &*options_.continuing_subword_prefix : nullptr;
  const std::string* suffix = options_.end_of_word_suffix ? &*options_.end_of_word_suffix : nullptr;
  int32_t pending_unk = -1;  // an unknown not yet added (fuse_unk grows it)
  std::string scratch;
  for (size_t i = 0; i < word.size();) {
    const size_t n = utf8::char_length(static_cast<unsigned char>(word[i]));
    const bool is_first = i == 0, is_last = i + n >= word.size();
    std::string_view piece = word.substr(i, n);
    if ((prefix && !is_first) || (suffix && is_last)) {
      scratch.clear();
      if (prefix && !is_first) scratch += *prefix;
      scratch += piece;
      if (suffix && is_last) scratch += *suffix;
      piece = scratch;
    }
    i += n;
    if (auto id = token_to_id(piece)) {
      if (pending_unk >= 0) add(pending_unk), pending_unk = -1;
      add(*id);
      continue;
    }
    if (options_.byte_fallback) {
      bool all = true;
      for (unsigned char b : piece) all = all && byte_ids_[b] >= 0;
      if (all) {
        // As in Hugging Face tokenizers, a pending unknown is not flushed before byte tokens.
        for (unsigned char b : piece) add(byte_ids_[b]);
        continue;
      }
    }
    if (unk_id_) {
      if (pending_unk >= 0 && !options_.fuse_unk) add(pending_unk);
      pending_unk = *unk_id_;
    }
    // Without an unknown token the character is dropped, as the reference implementation does.
  }
  if (pending_unk >= 0) add(pending_unk);

  // Min-heap of candidate merges ordered by (rank, left position); stale entries are skipped when popped.
  struct Candidate {
    uint32_t rank;
    int32_t pos;
    int32_t id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto consider = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = symbols[size_t(left)].next;
    if (right < 0) return;
    const auto it = merges_.find(pair_key(symbols[size_t(left)].id, symbols[size_t(right)].id));
    if (it != merges_.end()) heap.push({it->second.rank, left, it->second.id});
  };
  for (int32_t k = 0; k + 1 < int32_t(symbols.size()); ++k) consider(k);

  while (!heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    Symbol& left = symbols[size_t(top.pos)];
    if (left.id < 0 || left.next < 0) continue;
    Symbol& right = symbols[size_t(left.next)];
    const auto it = merges_.find(pair_key(left.id, right.id));
    if (it == merges_.end() || it->second.id != top.id) continue;  // the pair changed since it was queued
    left.id = top.id;
    right.id = -1;
    left.next = right.next;
    if (right.next >= 0) symbols[size_t(right.next)].prev = top.pos;
    consider(left.prev);
    consider(top.pos);
  }
  for (int32_t k = symbols.empty() ? -1 : 0; k >= 0; k = symbols[size_t(k)].next) out.push_back(symbols[size_t(k)].id);
}

}  // namespace attnzoo::tok
