#pragma once
// json_schema's `format` for strings, each a small automaton over the string's characters (written plainly: no
// escapes inside a formatted string), so a value is checked as it is written and no accepted prefix is a dead end:
//   date       RFC 3339 full-date YYYY-MM-DD: months 01-12, days within the month (February 29 in leap years
//              only), years 0001-9999 (Python's date has no year 0).
//   time       RFC 3339 full-time HH:MM:SS[.f](Z|+HH:MM|-HH:MM), as JSON Schema requires (the offset is not
//              optional): hours 00-23, minutes / seconds 00-59 (no leap second 60), 1 to 6 fraction digits,
//              upper-case Z.
//   date-time  a date, "T", a time (upper-case T).
//   uuid       8-4-4-4-12 hex digits, either case (any version).
//   ipv4       a dotted quad, each part 0-255 without leading zeros.
//   email      a practical subset of RFC 5321: a dot-atom local part of 1-64 characters (letters, digits and
//              !#$%&'*+/=?^_`{|}~- ; no leading, trailing or doubled dot), "@", a domain of at least two labels
//              (letters, digits, inner hyphens; 1-63 characters each; 253 at most in all). No quoted local parts,
//              IP-literal domains or non-ASCII addresses.
//   duration   ISO 8601 as JSON Schema's appendix writes it: P, then nW, or date parts nY nM nD in order and / or
//              T with nH nM nS in order (at least one part everywhere; whole numbers of up to 9 digits).
#include <cstdint>
#include <string_view>

namespace attnzoo {

enum class StringFormat : uint8_t { none, date, time, date_time, uuid, ipv4, email, duration };

// What a recognizer keeps of a formatted string (6 bytes; copied per vocabulary trie edge). Start from
// format_start.
struct FormatSoFar {
  uint16_t wide;  // date: the year; email: the domain's labels; duration: the parts written
  uint8_t at;     // where in the format (see json_string_format.cc)
  uint8_t field;  // the current field's value or length
  uint8_t aux;    // date: the month; email: the length so far; duration: digits in the number
  uint8_t last;   // the byte before (email)
};

// `name` as json_schema spells it (StringFormat::none when unknown), and the supported names for messages.
StringFormat string_format(std::string_view name);
inline constexpr std::string_view kStringFormats = "date, time, date-time, uuid, ipv4, email, duration";

// Byte b (a character of the string, never its closing quote) continues a value of format f: `s` moved on.
bool format_byte(StringFormat f, FormatSoFar& s, uint8_t b);
// The string may close here.
bool format_may_end(StringFormat f, const FormatSoFar& s);
// A formatted string's first state (after its opening quote).
FormatSoFar format_start(StringFormat f);

}  // namespace attnzoo
