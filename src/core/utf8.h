#pragma once
// UTF-8 helpers for every reader of text (the JSON parser, the tokenizer, chat templates). Text from files and
// callers is untrusted: decoding never reads past the end and reports invalid sequences instead of guessing; lossy
// conversion follows the Unicode "maximal subpart" practice (one U+FFFD per maximal invalid subsequence), as
// Rust's String::from_utf8_lossy and Python's bytes.decode(errors="replace") do, so our decode output matches
// theirs byte for byte.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace attnzoo::utf8 {

constexpr uint32_t kReplacement = 0xFFFD;

// Length of the valid UTF-8 sequence starting at s[i] (1..4), or 0 when the bytes there are not a complete valid
// sequence. On success *cp holds the code point.
size_t decode(std::string_view s, size_t i, uint32_t* cp);

// Length of the valid prefix of an invalid sequence starting at s[i]: how many bytes one U+FFFD replaces (>= 1).
size_t invalid_length(std::string_view s, size_t i);

// Appends the UTF-8 encoding of cp (cp must be a scalar value).
void append(std::string& out, uint32_t cp);

bool is_valid(std::string_view s);

// s with every maximal invalid subsequence replaced by U+FFFD.
std::string lossy(std::string_view s);

// Number of trailing bytes of s that form the start of a valid sequence still missing its last bytes
// (0..3): what a streaming decoder must hold back.
size_t incomplete_tail(std::string_view s);

// Byte length of the character starting at s[i] in already-valid UTF-8.
inline size_t char_length(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

}  // namespace attnzoo::utf8
