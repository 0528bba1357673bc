#pragma once
// A compiled PCRE2 pattern for the tokenizers' regexes (written for Oniguruma: \p{L}, \p{N}, (?i:...),
// look-ahead), compiled with UTF + UCP so classes and \s are Unicode-aware, and JIT-compiled when the library
// supports it. Matching follows the iteration of the Rust `onig` crate that Hugging Face tokenizers use, empty
// matches included, so splits land at the same places.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace attnzoo::tok {

class Regex {
 public:
  // literal: match `pattern` as plain text. Throws std::runtime_error with PCRE2's message and offset.
  // `field` names the pattern's origin (a tokenizer.json path) in match-time errors.
  Regex(const std::string& pattern, bool literal, std::string field = "regex");
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Every match [start, end) in byte offsets, left to right; `text` must be valid UTF-8. A match that PCRE2
  // gives up on (its backtracking limits: a catastrophic pattern) throws ArgumentError naming the field.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The text before, between and after the matches, each flagged with whether it is a match: together they tile
// `text` (empty pieces included, as the Hugging Face splitter produces them).
std::vector<std::pair<std::pair<size_t, size_t>, bool>> split_by_matches(const Regex& re, std::string_view text);

}  // namespace attnzoo::tok
