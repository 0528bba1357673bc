#pragma once
// GPT-2's reversible byte <-> character mapping: every byte becomes one printable character (printable Latin-1
// bytes stand for themselves, the other 68 take U+0100.. in byte order), so a byte string becomes a text the
// BPE vocabulary can spell.
#include <cstdint>
#include <string>
#include <string_view>

namespace attnzoo::tok::byte_level {

// The code point that stands for byte b.
uint32_t char_for_byte(uint8_t b);
// The byte a code point stands for, or -1 when the code point is not one of the 256 mapped characters.
int byte_for_char(uint32_t cp);

// Each byte of `bytes` replaced by its character (the result is valid UTF-8 whatever the input).
std::string encode(std::string_view bytes);
// Appends the bytes a (valid UTF-8) token spells. Returns false, appending nothing, when some character of the
// token is not a mapped one (such a token stands for its own UTF-8 bytes).
bool decode_token(std::string_view token, std::string& out);

}  // namespace attnzoo::tok::byte_level
