#include "tokenizer/bpe_trainer.h"

#include <algorithm>
#include <queue>
#include <tuple>
#include <unordered_map>

#include "core/error.h"
#include "core/utf8.h"
#include "loader/json.h"
#include "tokenizer/byte_level.h"

namespace attnzoo::tok {
namespace {

using PairKey = uint64_t;
PairKey pair_key(uint32_t a, uint32_t b) { return uint64_t(a) << 32 | b; }

// A queued pair. `slot` indexes the list of words it merges in when it comes out on top.
struct QueueEntry {
  uint64_t count;
  uint32_t a, b;
  uint32_t slot;
};

// Max-heap order: the larger count first; on equal counts the smaller (a, b).
struct LowerPriority {
  bool operator()(const QueueEntry& x, const QueueEntry& y) const {
    if (x.count != y.count) return x.count < y.count;
    return std::tie(x.a, x.b) > std::tie(y.a, y.b);
  }
};

// Appends word index `i` unless it was the last one appended: words are visited one at a time, so this keeps
// each list free of repeats as a set would.
void add_word(std::vector<uint32_t>& words, uint32_t i) {
  if (words.empty() || words.back() != i) words.push_back(i);
}

// Replaces every (a, b) in `s`, left to right, by `merged`, reporting each neighbouring pair that disappears
// (-1) or appears (+1). The merged pair itself is not reported (the reference leaves its count as it is).
template <typename Change>
void merge_in_word(std::vector<uint32_t>& s, uint32_t a, uint32_t b, uint32_t merged, Change&& change) {
  size_t w = 0;
  for (size_t r = 0; r < s.size();) {
    if (s[r] == a && r + 1 < s.size() && s[r + 1] == b) {
      if (w > 0) {
        change(s[w - 1], a, -1);
        change(s[w - 1], merged, 1);
      }
      if (r + 2 < s.size()) {
        change(b, s[r + 2], -1);
        change(merged, s[r + 2], 1);
      }
      s[w++] = merged;
      r += 2;
    } else {
      s[w++] = s[r++];
    }
  }
  s.resize(w);
}

class Trainer {
 public:
  Trainer(WordCounts words, const BpeTrainerOptions& o) : options_(o) {
    for (const std::string& t : o.special_tokens) add_token(t);
    std::vector<uint32_t> alphabet;
    for (int b = 0; b < 256; ++b) alphabet.push_back(byte_level::char_for_byte(uint8_t(b)));
    std::sort(alphabet.begin(), alphabet.end());
    for (uint32_t cp : alphabet) {
      std::string s;
      utf8::append(s, cp);
      add_token(s);
    }
    words_.reserve(words.size());
    counts_.reserve(words.size());
    for (const auto& [word, count] : words) {
      std::vector<uint32_t> symbols;
      uint32_t cp;
      for (size_t i = 0; i < word.size();) {
        const size_t n = utf8::decode(word, i, &cp);
        if (n == 0) break;  // counted words are valid UTF-8
        // Characters outside the alphabet are left out, as the reference does (byte-level words have none).
        if (auto it = vocab_.find(std::string_view(word).substr(i, n)); it != vocab_.end())
          symbols.push_back(uint32_t(it->second));
        i += n;
      }
      words_.push_back(std::move(symbols));
      counts_.push_back(count);
    }
    words = {};  // the strings are not needed any more
  }

  TrainedBpe run(const TrainProgress& progress) {
    queue_initial_pairs();
    const size_t wanted = options_.vocab_size > tokens_.size() ? options_.vocab_size - tokens_.size() : 0;
    std::vector<std::tuple<uint32_t, uint32_t, uint32_t>> merges;  // (a, b, merged id) in merge order
    while (tokens_.size() < options_.vocab_size && !queue_.empty()) {
      QueueEntry top = queue_.top();
      queue_.pop();
      const uint64_t current = uint64_t(pair_counts_[pair_key(top.a, top.b)]);
      if (top.count != current) {  // stale: back in the queue with the count it has now
        top.count = current;
        queue_.push(top);
        continue;
      }
      if (top.count < 1 || top.count < options_.min_frequency) break;
      const uint32_t merged = add_token(tokens_[top.a] + tokens_[top.b]);
      merges.emplace_back(top.a, top.b, merged);
      apply_merge(top, merged);
      if (progress && (merges.size() % 64 == 0)) progress(merges.size(), wanted);
    }
    if (progress) progress(merges.size(), wanted);
    return result(merges);
  }

 private:
  // The token's id, adding it when new.
  uint32_t add_token(const std::string& token) {
    auto [it, added] = vocab_.emplace(token, int32_t(tokens_.size()));
    if (added) tokens_.push_back(token);
    return uint32_t(it->second);
  }

  uint32_t new_slot(std::vector<uint32_t> words) {
    if (free_slots_.empty()) {
      slots_.push_back(std::move(words));
      return uint32_t(slots_.size() - 1);
    }
    const uint32_t s = free_slots_.back();
    free_slots_.pop_back();
    slots_[s] = std::move(words);
    return s;
  }

  void queue_pairs(std::unordered_map<PairKey, std::vector<uint32_t>>& where) {
    for (auto& [key, words] : where) {
      const int64_t count = pair_counts_[key];
      if (count > 0) queue_.push(QueueEntry{uint64_t(count), uint32_t(key >> 32), uint32_t(key), new_slot(std::move(words))});
    }
    where.clear();
  }

  void queue_initial_pairs() {
    std::unordered_map<PairKey, std::vector<uint32_t>> where;
    for (uint32_t i = 0; i < words_.size(); ++i) {
      const std::vector<uint32_t>& s = words_[i];
      for (size_t k = 0; k + 1 < s.size(); ++k) {
        const PairKey key = pair_key(s[k], s[k + 1]);
        pair_counts_[key] += int64_t(counts_[i]);
        add_word(where[key], i);
      }
    }
    queue_pairs(where);
  }

  // Merges the pair in the words its queue entry lists and queues the pairs the merge formed.
  void apply_merge(const QueueEntry& top, uint32_t merged) {
    std::vector<uint32_t> words = std::move(slots_[top.slot]);
    slots_[top.slot] = {};
    free_slots_.push_back(top.slot);
    for (uint32_t i : words) {
      const int64_t count = int64_t(counts_[i]);
      merge_in_word(words_[i], top.a, top.b, merged, [&](uint32_t x, uint32_t y, int change) {
        const PairKey key = pair_key(x, y);
        pair_counts_[key] += change * count;
        if (change > 0) add_word(formed_[key], i);
      });
    }
    queue_pairs(formed_);
  }

  TrainedBpe result(const std::vector<std::tuple<uint32_t, uint32_t, uint32_t>>& merges) const {
    TrainedBpe out;
    out.vocab = tokens_;
    out.add_prefix_space = options_.add_prefix_space;
    for (const std::string& t : options_.special_tokens)
      if (std::find(out.special_tokens.begin(), out.special_tokens.end(), t) == out.special_tokens.end())
        out.special_tokens.push_back(t);
    // A pair merged twice keeps its last rank: the reference stores merges in a map keyed by the pair.
    std::unordered_map<PairKey, size_t> last;
    for (size_t r = 0; r < merges.size(); ++r) last[pair_key(std::get<0>(merges[r]), std::get<1>(merges[r]))] = r;
    for (size_t r = 0; r < merges.size(); ++r) {
      const auto [a, b, merged] = merges[r];
      if (last[pair_key(a, b)] == r) out.merges.emplace_back(tokens_[a], tokens_[b]);
    }
    return out;
  }

  const BpeTrainerOptions& options_;
  Vocab vocab_;
  std::vector<std::string> tokens_;
  std::vector<std::vector<uint32_t>> words_;  // each word as token ids
  std::vector<uint64_t> counts_;
  std::unordered_map<PairKey, int64_t> pair_counts_;
  std::priority_queue<QueueEntry, std::vector<QueueEntry>, LowerPriority> queue_;
  std::vector<std::vector<uint32_t>> slots_;  // word lists of queued entries
  std::vector<uint32_t> free_slots_;
  std::unordered_map<PairKey, std::vector<uint32_t>> formed_;  // pairs a merge formed, and where
};

}  // namespace

TrainedBpe train_bpe(WordCounts words, const BpeTrainerOptions& options, const TrainProgress& progress) {
  require(options.vocab_size > 0, "vocab_size", "must be positive");
  for (const std::string& t : options.special_tokens) {
    require(!t.empty(), "special_tokens", "an empty special token");
    require(utf8::is_valid(t), "special_tokens", "a special token is not valid UTF-8");
  }
  return Trainer(std::move(words), options).run(progress);
}

std::string trained_tokenizer_json(const TrainedBpe& bpe) {
  std::string out = "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [";
  for (size_t i = 0; i < bpe.special_tokens.size(); ++i) {
    const std::string& t = bpe.special_tokens[i];
    const size_t id = size_t(std::find(bpe.vocab.begin(), bpe.vocab.end(), t) - bpe.vocab.begin());
    out += std::string(i ? "," : "") + "\n    {\"id\": " + std::to_string(id) + ", \"content\": " + json::quote(t) +
           ", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, \"special\": true}";
  }
  const std::string prefix = bpe.add_prefix_space ? "true" : "false";
  out += std::string(bpe.special_tokens.empty() ? "" : "\n  ") + "],\n  \"normalizer\": null,\n";
  out += "  \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": " + prefix +
         ", \"trim_offsets\": true, \"use_regex\": true},\n";
  out += "  \"post_processor\": null,\n";
  out += "  \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": true, \"use_regex\": true},\n";
  out += "  \"model\": {\n    \"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, \"continuing_subword_prefix\": null,"
         " \"end_of_word_suffix\": null, \"fuse_unk\": false, \"byte_fallback\": false, \"ignore_merges\": false,\n"
         "    \"vocab\": {";
  for (size_t id = 0; id < bpe.vocab.size(); ++id)
    out += std::string(id ? "," : "") + "\n      " + json::quote(bpe.vocab[id]) + ": " + std::to_string(id);
  out += "\n    },\n    \"merges\": [";
  for (size_t r = 0; r < bpe.merges.size(); ++r)
    out += std::string(r ? "," : "") + "\n      [" + json::quote(bpe.merges[r].first) + ", " +
           json::quote(bpe.merges[r].second) + "]";
  out += "\n    ]\n  }\n}\n";
  return out;
}

}  // namespace attnzoo::tok
