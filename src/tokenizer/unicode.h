#pragma once
// The Unicode operations the normalizers need, on valid UTF-8: the four normalization forms (tables derived
// from Python's unicodedata, Unicode 14; Hangul done algorithmically), per-character full lowercase (as Rust's
// char::to_lowercase, no context-dependent final sigma), and the White_Space property.
#include <cstdint>
#include <string>
#include <string_view>

namespace attnzoo::tok::unicode {

enum class Form { nfc, nfd, nfkc, nfkd };

std::string normalize(std::string_view text, Form form);
std::string lowercase(std::string_view text);
bool is_white_space(uint32_t cp);
// Canonical combining class (0 for starters).
uint8_t combining_class(uint32_t cp);

}  // namespace attnzoo::tok::unicode
