#pragma once
// JSON mode's per-step mask: which vocabulary tokens keep a sample's text a prefix of one valid JSON object (or,
// for structured outputs, of one document valid against the request's schema: the same walk over another
// recognizer, JsonSchemaRecognizer).
//
// The vocabulary's byte strings go once into a trie (TokenTrie); a step walks it depth first from the sample's
// JsonRecognizer state, one recognizer copy per trie edge (the state is a few bytes), and prunes a subtree at the
// first byte the recognizer refuses, so the cost follows the tokens that fit rather than the vocabulary's bytes.
// Inside a string almost every token fits, so there the walk would visit the whole trie: instead the tokens that
// leave a string as it is (whole UTF-8 characters, no quote, backslash or control byte: most of a vocabulary) are
// one precomputed set, and only the others are walked, in a trie of their own. Inside a patterned / formatted
// string the quote-free tokens likewise come from per-DFA-state sets built on first use
// (engine/json_pattern_tokens.h), and only the tokens holding a quote are walked.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/json_pattern_tokens.h"
#include "engine/json_recognizer.h"
#include "engine/json_schema_recognizer.h"

namespace attnzoo {

namespace tok {
class Tokenizer;
}

class TokenTrie {
 public:
  // token_bytes[id]: what the token adds to the text; an empty entry is never allowed (special tokens, ids the
  // tokenizer does not know: a token that adds nothing would let a sample stall).
  explicit TokenTrie(std::span<const std::string> token_bytes);

  // allowed[id] = 1 for the ids whose every byte `state` accepts, else 0 (resized to the vocabulary); how many.
  // Flags rather than a list: the walk meets ids in byte order, and sorting a list of tens of thousands of them
  // every step would cost more than the walk. Recognizer: JsonRecognizer or JsonSchemaRecognizer (push(byte), and
  // in_string_text() / string_room(): where the string-plain tokens of at most string_room() characters fit).
  template <class Recognizer>
  int64_t allowed(const Recognizer& state, std::vector<uint8_t>& allowed) const;
  int64_t vocab_size() const { return vocab_; }
  int64_t string_plain_tokens() const { return num_string_plain_; }
  size_t longest_string_plain_token() const { return plain_upto_.size() - 1; }  // characters
  // Off: patterned strings walk the whole trie as before (to compare the two); on by default, with the sets' cap
  // (a new cap starts an empty cache; not while another thread masks).
  void use_pattern_sets(bool on, size_t max_bytes = PatternTokenCache::kMaxBytes) {
    use_pattern_sets_ = on;
    if (max_bytes == pattern_set_cap_) return;
    pattern_set_cap_ = max_bytes;
    pattern_sets_ = std::make_unique<PatternTokenCache>(max_bytes);
  }
  size_t pattern_set_bytes() const { return pattern_sets_->bytes(); }

 private:
  struct Trie {
    struct Node {
      uint32_t first_edge = 0, num_edges = 0;    // into edge_byte / edge_child
      uint32_t first_token = 0, num_tokens = 0;  // into tokens: the ids whose bytes end here
    };
    std::vector<Node> nodes;
    std::vector<uint8_t> edge_byte;
    std::vector<uint32_t> edge_child;
    std::vector<int32_t> tokens;

    Trie(std::span<const std::string> token_bytes, std::vector<int32_t> ids);
    template <class Recognizer>
    int64_t walk(const Recognizer& state, std::vector<uint8_t>& allowed) const;
    // The tokens whose bytes hold no quote and all move `pattern` on from `state` (a PatternTokenSet's build).
    std::vector<PatternTokenHit> pattern_walk(const StringPattern& pattern, uint16_t state) const;
  };
  template <class Recognizer>
  int64_t pattern_allowed(const Recognizer& state, const JsonSchemaRecognizer::PatternText& text,
                          std::vector<uint8_t>& allowed) const;

  int64_t vocab_ = 0;
  std::vector<uint8_t> string_plain_;  // flags: the ids that leave a string's state unchanged
  int64_t num_string_plain_ = 0;
  // The string-plain ids by their count of characters, and plain_upto_[c]: how many of them have at most c (for
  // strings with a maxLength, where only those that fit are allowed).
  std::vector<int32_t> plain_by_chars_;
  std::vector<uint32_t> plain_upto_;
  Trie all_, string_other_;  // every non-empty token; the non-empty ones not in string_plain_
  Trie quoted_;              // the tokens holding a quote: inside a patterned string, the ones walked
  bool use_pattern_sets_ = true;
  size_t pattern_set_cap_ = PatternTokenCache::kMaxBytes;
  std::unique_ptr<PatternTokenCache> pattern_sets_ = std::make_unique<PatternTokenCache>();
};

// What each of `vocab` ids adds to the text in the middle of a generation, as the engine's StreamDecoder shows it:
// the bytes decode_bytes gives after one context token, with special tokens skipped (so those come out empty),
// ids past the tokenizer's vocabulary empty too.
std::vector<std::string> token_bytes_in_context(const tok::Tokenizer& tokenizer, int64_t vocab);

// The row JSON mode samples from: `row` (already biased) with every id whose flag is 0 set to -inf.
void mask_row(std::span<float> row, std::span<const uint8_t> allowed);

}  // namespace attnzoo
