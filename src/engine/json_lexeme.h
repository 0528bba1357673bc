#pragma once
// The pieces of JSON's grammar (RFC 8259) that JSON mode's recognizer and the json_schema recognizer read alike:
// character classes, a string's escape, a UTF-8 character's first byte, and a number, one byte at a time. Each
// recognizer keeps its own modes for these; the number's eight states sit in its Mode enum in JsonNumber's order,
// so a mode converts by an offset.
#include <cstdint>

namespace attnzoo::json_lexeme {

inline bool is_ws(uint8_t b) { return b == ' ' || b == '\t' || b == '\n' || b == '\r'; }
inline bool is_digit(uint8_t b) { return b >= '0' && b <= '9'; }
inline bool is_hex(uint8_t b) { return is_digit(b) || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F'); }

// After '\' in a string: 'u' begins four hex digits, a one-letter escape ends it, anything else is refused.
enum class Escape : uint8_t { unicode, done, refused };
inline Escape escape_byte(uint8_t b) {
  if (b == 'u') return Escape::unicode;
  const bool letter = b == '"' || b == '\\' || b == '/' || b == 'b' || b == 'f' || b == 'n' || b == 'r' || b == 't';
  return letter ? Escape::done : Escape::refused;
}

// A string's byte b >= 0x80 that begins a UTF-8 character: how many continuation bytes follow and the range the
// first of them must fall in (RFC 3629's table: what keeps out overlong forms, UTF-16 surrogates and code points
// past U+10FFFF); continuation 0: b cannot begin a character. Later continuation bytes are 0x80-0xBF.
struct Utf8Lead {
  uint8_t continuation, lo, hi;
};
inline Utf8Lead utf8_lead(uint8_t b) {
  if (b >= 0xC2 && b <= 0xDF) return {1, 0x80, 0xBF};
  if (b >= 0xE0 && b <= 0xEF) return {2, uint8_t(b == 0xE0 ? 0xA0 : 0x80), uint8_t(b == 0xED ? 0x9F : 0xBF)};
  if (b >= 0xF0 && b <= 0xF4) return {3, uint8_t(b == 0xF0 ? 0x90 : 0x80), uint8_t(b == 0xF4 ? 0x8F : 0xBF)};
  return {0, 0, 0};
}

enum class Number : uint8_t {
  minus,          // "-": a digit must follow
  zero,           // an integer part "0": no more digits
  integer,        // integer digits after a non-zero first one
  dot,            // ".": a digit must follow
  fraction,       // fraction digits
  exponent,       // "e": a sign or digit must follow
  exponent_sign,  // "e+" / "e-": a digit must follow
  exponent_digits,
};

// Where a number may end: the byte after it then belongs to what follows the value.
inline bool number_may_end(Number s) {
  return s == Number::zero || s == Number::integer || s == Number::fraction || s == Number::exponent_digits;
}

// What byte b does to a number in state s: kept (s moved on), ended (b is not the number's and the number may end
// before it), or refused. integer_only: no fraction or exponent (a schema's "integer").
enum class NumberStep : uint8_t { kept, ended, refused };
inline NumberStep number_byte(Number& s, uint8_t b, bool integer_only) {
  const bool digit = is_digit(b), e = b == 'e' || b == 'E';
  auto to = [&s](Number next) {
    s = next;
    return NumberStep::kept;
  };
  switch (s) {
    case Number::minus: return digit ? to(b == '0' ? Number::zero : Number::integer) : NumberStep::refused;
    case Number::zero:
    case Number::integer:
      if (digit) return s == Number::integer ? NumberStep::kept : NumberStep::refused;
      if (b == '.' || e) return integer_only ? NumberStep::refused : to(e ? Number::exponent : Number::dot);
      return NumberStep::ended;
    case Number::dot: return digit ? to(Number::fraction) : NumberStep::refused;
    case Number::fraction:
      if (digit) return NumberStep::kept;
      return e ? to(Number::exponent) : NumberStep::ended;
    case Number::exponent:
      if (b == '+' || b == '-') return to(Number::exponent_sign);
      return digit ? to(Number::exponent_digits) : NumberStep::refused;
    case Number::exponent_sign: return digit ? to(Number::exponent_digits) : NumberStep::refused;
    case Number::exponent_digits: return digit ? NumberStep::kept : NumberStep::ended;
  }
  return NumberStep::refused;
}

}  // namespace attnzoo::json_lexeme
