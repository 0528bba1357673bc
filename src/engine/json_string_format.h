#pragma once
// json_schema's `format` for strings, checked as the value is written (plainly: no escapes inside a formatted
// string) so that no accepted prefix is a dead end. All but email are patterns (engine/json_string_pattern.h) whose
// DFAs are compiled once per process and shared; email's length limits would take a DFA past its state cap (the
// domain's 253 characters times its labels' 63), so it is a small automaton here, with no per-state token sets:
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
#include <memory>
#include <string_view>

#include "engine/json_string_pattern.h"

namespace attnzoo {

enum class StringFormat : uint8_t { none, date, time, date_time, uuid, ipv4, email, duration };

// `name` as json_schema spells it (StringFormat::none when unknown), and the supported names for messages.
StringFormat string_format(std::string_view name);
inline constexpr std::string_view kStringFormats = "date, time, date-time, uuid, ipv4, email, duration";

// The format's DFA (shared, compiled at first use); null for email and none.
std::shared_ptr<const StringPattern> format_pattern(StringFormat f);

// What a recognizer keeps of an email address under way (6 bytes; copied per vocabulary trie edge). Start from {}.
struct EmailSoFar {
  uint16_t wide;  // the domain's labels
  uint8_t at;     // 0 the local part, 1 the domain
  uint8_t field;  // the current atom / label's length
  uint8_t aux;    // the part's length so far
  uint8_t last;   // the byte before
};

// Byte b (a character of the string, never its closing quote) continues an email address: `s` moved on.
bool email_byte(EmailSoFar& s, uint8_t b);
// The string may close here.
bool email_may_end(const EmailSoFar& s);
// minLength / maxLength beside email: an address that has `len` characters and reached `s` can still close with
// a length in [min, max]. The lengths its completions can add are one or two intervals (a label at 63 characters
// closes, or goes on with "." and another label: 0 or 2 more, never 1), so this is arithmetic, no table.
bool email_viable(const EmailSoFar& s, uint32_t len, uint32_t min, uint32_t max);

}  // namespace attnzoo
