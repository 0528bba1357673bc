#pragma once
// Byte-level BPE training as Hugging Face `tokenizers`' BpeTrainer does it, merge for merge: the vocabulary starts
// with the special tokens, then the 256 byte characters in code-point order (ByteLevel.alphabet() as the initial
// alphabet); each step merges the most frequent adjacent pair, ties going to the pair of smaller ids (first id,
// then second). Pair counts are kept with, per queued pair, the words holding it; a max-heap with lazy
// invalidation (an entry whose count went stale is re-queued with the current one) picks the next merge, so a
// step costs the words it touches, not the corpus.
//
// The reference's bookkeeping is followed where it shows in the result: a queue entry merges only in the words
// it lists, the merged pair's own count is not cleared, and a merge whose token already exists (reached by
// another split of the same string) keeps that token's id; the file then lists such a pair at its last rank.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/bpe_word_counts.h"

namespace attnzoo::tok {

struct BpeTrainerOptions {
  size_t vocab_size = 30000;                // special tokens, the 256 byte characters and the merges together
  uint64_t min_frequency = 0;               // a pair seen fewer times is not merged (training stops there)
  std::vector<std::string> special_tokens;  // ids 0.. in this order (repeats dropped)
  bool add_prefix_space = false;            // ByteLevel's option, for training and in the written file
};

struct TrainedBpe {
  std::vector<std::string> vocab;                            // id -> token
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order, as tokenizer.json lists them
  std::vector<std::string> special_tokens;                   // those in `vocab`, ids 0..
  bool add_prefix_space = false;
};

// `progress(done, total)` is called now and then with merges done and merges wanted.
using TrainProgress = std::function<void(size_t done, size_t total)>;

// Throws ArgumentError for a vocab_size of 0 or a special token that is empty or not valid UTF-8. `words` is
// taken by value and freed once turned into token ids (move it in: merging then needs no second copy).
TrainedBpe train_bpe(WordCounts words, const BpeTrainerOptions& options, const TrainProgress& progress = {});

// The tokenizer.json text: BPE model, ByteLevel pre-tokenizer and decoder, the special tokens as added tokens,
// laid out as `tokenizers` serializes a tokenizer it trained.
std::string trained_tokenizer_json(const TrainedBpe& bpe);

}  // namespace attnzoo::tok
