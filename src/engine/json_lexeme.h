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

// The digits a number's parts may have: every number generated is then a finite, normal double (at most about
// 1e119, at least 1e-299 unless 0), as I-JSON (RFC 7493) asks of interoperable JSON. RFC 8259's grammar alone
// allows 1e400, which a double cannot hold: parsers then disagree (infinity, an error), attnzoo's own refuses it.
// 20 integer digits hold every 64-bit integer.
constexpr uint8_t kMaxIntegerDigits = 20, kMaxFractionDigits = 200, kMaxExponentDigits = 2;

// The first byte of a number ('-' or a digit) as a state, with the digits its part has so far.
template <class Count>
Number number_start(uint8_t b, Count& digits) {
  digits = b == '-' ? 0 : 1;
  return b == '-' ? Number::minus : b == '0' ? Number::zero : Number::integer;
}

// What byte b does to a number in state s: kept (s moved on), ended (b is not the number's and the number may end
// before it), or refused. `digits` counts the current part's digits (number_start set it). integer_only: no
// fraction or exponent (a schema's "integer").
enum class NumberStep : uint8_t { kept, ended, refused };
template <class Count>
NumberStep number_byte(Number& s, Count& digits, uint8_t b, bool integer_only) {
  const bool digit = is_digit(b), e = b == 'e' || b == 'E';
  auto to = [&](Number next, Count count) {
    s = next;
    digits = count;
    return NumberStep::kept;
  };
  auto more = [&](Count most) {
    if (digits >= most) return NumberStep::refused;
    ++digits;
    return NumberStep::kept;
  };
  switch (s) {
    case Number::minus: return digit ? to(b == '0' ? Number::zero : Number::integer, 1) : NumberStep::refused;
    case Number::zero:
    case Number::integer:
      if (digit) return s == Number::integer ? more(kMaxIntegerDigits) : NumberStep::refused;
      if (b == '.' || e) return integer_only ? NumberStep::refused : to(e ? Number::exponent : Number::dot, 0);
      return NumberStep::ended;
    case Number::dot: return digit ? to(Number::fraction, 1) : NumberStep::refused;
    case Number::fraction:
      if (digit) return more(kMaxFractionDigits);
      return e ? to(Number::exponent, 0) : NumberStep::ended;
    case Number::exponent:
      if (b == '+' || b == '-') return to(Number::exponent_sign, 0);
      return digit ? to(Number::exponent_digits, 1) : NumberStep::refused;
    case Number::exponent_sign: return digit ? to(Number::exponent_digits, 1) : NumberStep::refused;
    case Number::exponent_digits: return digit ? more(kMaxExponentDigits) : NumberStep::ended;
  }
  return NumberStep::refused;
}

}  // namespace attnzoo::json_lexeme
