#pragma once
// Python str methods on UTF-8 text, by code point. Case mapping covers ASCII letters only; other characters keep
// their case (chat templates case-map role names and keywords, which are ASCII).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attnzoo::chat::text {

bool is_space(uint32_t cp);  // str.isspace's set
// The code point at byte i of s into *cp; returns its byte length (at least 1: a byte that begins no character,
// not reachable for validated text, is read as itself rather than looped on).
size_t next_char(const std::string& s, size_t i, uint32_t* cp);
// chars: nullopt strips whitespace; otherwise any code point in *chars.
std::string strip(const std::string& s, const std::optional<std::string>& chars, bool left, bool right);
// sep: nullopt splits on whitespace runs and drops empty pieces. maxsplit < 0: no limit.
std::vector<std::string> split(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit);
// How many pieces split / rsplit would give, without building them.
size_t split_count(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> rsplit(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> splitlines(const std::string& s, bool keepends = false);
std::string replace(const std::string& s, const std::string& old, const std::string& with, int64_t count);
// The byte size replace() would return (saturating), to check before building it.
uint64_t replaced_size(const std::string& s, const std::string& old, const std::string& with, int64_t count);
std::string upper(std::string s);
std::string lower(std::string s);
std::string capitalize(const std::string& s);
std::string title(const std::string& s);        // str.title()
std::string jinja_title(const std::string& s);  // Jinja's title filter: words start after spaces, -, (, {, [, <
size_t length(const std::string& s);            // code points
// Python's int(s) / float(s) syntax for text already stripped of whitespace: ASCII decimal digits, an optional
// sign, single underscores between digits, no base prefixes or hex floats (float also takes inf / infinity / nan
// in any case). The text with its underscores removed, for strtoll / strtod; nullopt when Python would refuse it.
std::optional<std::string> int_literal(const std::string& s);
std::optional<std::string> float_literal(const std::string& s);
// Runs of regex \w characters (Jinja's wordcount): exact for ASCII and Latin-1; above that, letters and digits
// count as word characters, and whitespace, general punctuation, arrows, symbols, box drawing, CJK punctuation,
// full-width punctuation and emoji do not.
size_t word_count(const std::string& s);
int64_t count(const std::string& s, const std::string& sub);
// Byte offset of sub found from the left (or right), or npos.
size_t find(const std::string& s, const std::string& sub, bool from_right);
// The code point at index i (which must be < length(s)), as UTF-8.
std::string char_at(const std::string& s, size_t i);
// Byte offset of code point index i (s.size() when i >= length(s)).
size_t byte_offset(const std::string& s, size_t i);
// Code point index of a byte offset.
int64_t char_index(const std::string& s, size_t byte_offset);

}  // namespace attnzoo::chat::text
