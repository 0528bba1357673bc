#pragma once
// minLength / maxLength beside a string's pattern or format DFA (engine/json_string_pattern.h): the length bound
// intersected with the DFA, so that no accepted prefix is a dead end. Lengths are characters (code points, as
// JSON Schema and Python's len count them): such a string is written without escapes, so each byte that is not a
// UTF-8 continuation begins one.
//
// Per DFA state, a bitset over k: some accepted completion has exactly k more characters. A prefix of `len`
// characters in state s is viable iff a k in [minLength - len, maxLength - len] is set. Only k up to
// top = min(maxLength, minLength + states) are kept: a completion of k >= minLength - len + states characters
// passes one character boundary state twice, and cutting that loop out (at most `states` characters) leaves a
// completion still long enough, so when the range is wider than `states` the first `states` lengths decide.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/json_string_pattern.h"

namespace attnzoo {

struct StringLengths {
  // states x lengths: 512 KiB of table per string at most (and 8 times that a request: engine/json_schema.cc)
  static constexpr size_t kMaxBits = size_t(1) << 22;

  uint32_t min = 0, max = 0xFFFFFFFF;  // characters; max 0xFFFFFFFF: unbounded
  uint32_t top = 0;                    // the largest k kept
  size_t words = 0;                    // 64-bit words per state
  std::vector<uint64_t> bits;          // state s, k: bits[s * words + k / 64] >> (k % 64)

  // A string of `len` characters that reached DFA state `state` can still be completed within the bounds.
  bool viable(uint16_t state, uint32_t len) const;
};

// The bounds' table for `pattern`; throws ArgumentError "response_format: json_schema at #<pointer>: ..." when no
// string within the bounds matches, or the table would pass kMaxBits.
StringLengths string_lengths(const StringPattern& pattern, uint32_t min, uint32_t max, const std::string& pointer);

}  // namespace attnzoo
