#pragma once
// Numeric bounds of a json_schema value (minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf), enforced
// while the number is written: a byte is accepted only if some completion of the digits so far lies in range, so no
// accepted prefix is a dead end.
//
// The digits so far fix the set of values a completion can take: "12" any of [12, 13), [120, 130), ... (numbers)
// or 12, 120..129, ... (integers); "12.3" [12.3, 12.4); "-" every value <= 0. Negatives are the same sets of
// magnitudes, tested against the mirrored range. All of it is exact integer arithmetic: a number's bounds are
// decimals (the shortest text that reads back as the schema's double), scaled by 2 * 10^scale to integers, and a
// value with more decimals than the bounds falls strictly between two scaled units (the factor 2 names that
// midpoint), where no bound can be. Exponents are refused where bounds are (the value's text stays comparable
// digit by digit).
//
// multipleOf is decimal, never floating point: the step is the shortest decimal that reads back as the schema's
// double (0.01 is exactly 1/100), and a value is a multiple when its own decimal text divided by the step is a whole
// number (0.3 is a multiple of 0.1, though 0.3 / 0.1 is not 3 in doubles). A multiple of a step with d decimals has
// at most d non-zero decimals, so with a step the candidates are whole numbers of units of 10^-scale (scale covers
// the step's decimals too) and the bounds become closed ranges of such units: the same test integers have.
#include <cstdint>
#include <string>

namespace attnzoo {

namespace json {
class Value;
}

// What a recognizer keeps of a bounded number: 16 bytes, as it is copied per vocabulary trie edge. Start from {}.
struct NumberSoFar {
  uint64_t whole;                 // the integer part's digits (saturating: past every bound anyway)
  uint64_t fraction : 40;         // the first `scale` (<= 12) fraction digits
  uint64_t fraction_digits : 8;   // written so far, saturating at 255 (past `scale` only `beyond` matters)
  uint64_t negative : 1;
  uint64_t beyond : 1;            // a non-zero fraction digit past the bounds' scale
};

struct NumberBounds {
  enum class Stage : uint8_t { minus, whole, dot, fraction };  // "-", digits, "12.", "12.3"

  bool integer = false;
  bool has_lo = false, has_hi = false;
  bool lo_open = false, hi_open = false;  // numbers: exclusive; integers are kept closed
  uint8_t scale = 0;                      // numbers: the bounds' decimals
  __int128 lo = 0, hi = 0;                // integers: the values; numbers: the values times 2 * 10^scale
  // multipleOf (0: none): integers, the smallest whole step whose multiples are the step's (2.5 -> 5); numbers,
  // the step in units of 10^-scale.
  __int128 step = 0;

  // Some completion of `n` at `stage` lies in range. `zero_whole`: the integer part is a lone "0" (no digit may
  // follow it).
  bool viable(const NumberSoFar& n, Stage stage, bool zero_whole) const;
  // `n`, ended now (stage whole or fraction), lies in range.
  bool holds(const NumberSoFar& n) const;

 private:
  bool viable_multiple(const NumberSoFar& n, Stage stage, bool zero_whole) const;
};

// Adds a digit to `n`'s integer part or (`in_fraction`) its fraction, under `b`'s scale.
void number_digit(NumberSoFar& n, bool in_fraction, uint8_t digit, const NumberBounds& b);

// The bounds of schema `s` (an object holding at least one of the keywords) for "integer" (`integer`) or
// "number"; throws ArgumentError "response_format: json_schema at <pointer>: ..." naming the keyword when it cannot
// be honoured (a bound of the wrong kind, a range no value (or multiple) lies in, a step with over 12 decimals).
NumberBounds parse_number_bounds(const json::Value& s, const std::string& pointer, bool integer);

// `s` (an object) holds one of the keywords parse_number_bounds reads.
bool has_number_bounds(const json::Value& s);

}  // namespace attnzoo
