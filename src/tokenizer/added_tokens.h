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

// Leftmost-longest matcher over a set of byte strings: a byte trie walked from each candidate start.
class TokenMatcher {
 public:
  void add(std::string_view pattern, int32_t value);
  bool empty() const { return nodes_.size() <= 1; }
  // The longest pattern starting at the leftmost possible position >= from: {start, end, value}; start == npos
  // when there is none.
  struct Match {
    size_t start, end;
    int32_t value;
  };
  Match find(std::string_view text, size_t from) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
    int32_t value = -1;
  };
  int32_t child(int32_t node, unsigned char b) const;
  std::vector<Node> nodes_{Node{}};
  bool first_byte_[256] = {};
};

// Splits each piece that is not a token yet around the matches of `matcher` (values index into `tokens`).
void split_on_added(Pieces& pieces, const TokenMatcher& matcher, const std::vector<AddedToken>& tokens);

}  // namespace attnzoo::tok
