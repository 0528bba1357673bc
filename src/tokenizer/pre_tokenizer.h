#pragma once
// Pre-tokenizers from tokenizer.json: Split (String or Regex pattern, every split behavior, invert), ByteLevel
// (add_prefix_space, use_regex), Digits, Metaspace, Whitespace, WhitespaceSplit and Sequence. Each splits the
// pieces that are not added tokens yet; empty pieces are dropped, as Hugging Face tokenizers drop them.
#include <memory>
#include <string>

#include "loader/json.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/piece.h"
#include "tokenizer/regex.h"

namespace attnzoo::tok {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void apply(Pieces& pieces) const = 0;
};

enum class SplitBehavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

// Splits `text` at the matches of `re` following `behavior` (after flipping match/non-match when `invert`).
// Returns the byte ranges of the resulting non-empty pieces.
std::vector<std::pair<size_t, size_t>> split_text(const Regex& re, std::string_view text, SplitBehavior behavior,
                                                  bool invert);

// The GPT-2 pattern ByteLevel uses when use_regex is true.
extern const char* const kGpt2Pattern;

std::unique_ptr<PreTokenizer> read_pre_tokenizer(const json::Value& v, const std::string& path, const JsonFields& f);

}  // namespace attnzoo::tok
