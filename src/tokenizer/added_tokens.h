#pragma once
// Added (and special) tokens, found in the text before anything else runs: leftmost-longest matching, as the
// Aho-Corasick matcher of Hugging Face tokenizers does, with its single_word / lstrip / rstrip rules. Tokens with
// normalized=false match the raw text; the others match the normalized text of what is left.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/piece.h"

namespace attnzoo::tok {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
};

// Leftmost-longest matcher over a set of byte strings, in time linear in the text whatever the patterns (a
// token of 10k bytes must not make encoding quadratic). An Aho-Corasick automaton over the REVERSED patterns,
// run right to left, knows at every position s the longest pattern that starts there (the deepest pattern on
// the current state's suffix chain); the leftmost-longest scan then reads that table left to right.
class TokenMatcher {
 public:
  void add(std::string_view pattern, int32_t value);
  void finish();  // builds the failure links; call after the last add(), before scan()
  bool empty() const { return nodes_.size() <= 1; }

  struct Match {
    size_t start, end;
    int32_t value;
  };
  // For one text: find(from) is the longest pattern starting at the leftmost position >= from (start == npos
  // when there is none), as Hugging Face's LeftmostLongest Aho-Corasick reports it.
  class Scan {
   public:
    Match find(size_t from) const;

   private:
    friend class TokenMatcher;
    std::vector<uint32_t> length_;  // longest pattern starting at each byte (0: none)
    std::vector<int32_t> value_;
  };
  Scan scan(std::string_view text) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
    int32_t value = -1;
    uint32_t depth = 0;
    int32_t fail = 0;
    int32_t out = -1;  // the deepest node on the suffix chain that ends a pattern (-1: none)
  };
  int32_t child(int32_t node, unsigned char b) const;
  std::vector<Node> nodes_{Node{}};
  bool finished_ = true;
};

// Splits each piece that is not a token yet around the matches of `matcher` (values index into `tokens`).
void split_on_added(Pieces& pieces, const TokenMatcher& matcher, const std::vector<AddedToken>& tokens);

}  // namespace attnzoo::tok
