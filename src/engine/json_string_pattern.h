#pragma once
// json_schema's `pattern` for strings: a regular expression subset compiled to a byte-level DFA over the string's
// raw text, walked one byte at a time by JsonSchemaRecognizer (its state: one DFA state number). Only states from
// which an accepting one is reachable are kept, so no accepted prefix is a dead end.
//
// The subset (ECMA-262 as JSON Schema uses it): literals (any UTF-8 character, or `\uXXXX`), `.` (any character
// but line breaks), classes `[a-z0-9_]` / `[^...]` of ASCII characters and ranges, `\d \w \s \D \W \S`, escaped
// punctuation and `\n \t \r`, groups `( )` / `(?: )`, alternation `|`, `? * + {m} {m,} {m,n}` (greedy or lazy:
// the same language), anchors `^` / `$` at the start / end of a top-level branch (each branch its own: `^a|b$` is
// `(^a)|(b$)`, as ECMA-262 reads it). `\d \w \s` are ASCII; their negations, and negated classes holding any of
// them, write ASCII only, so Python's re (Unicode meanings) agrees on what is written. As JSON Schema has it the
// pattern matches anywhere in the string: a branch without `^` / `$` may have any characters before / after it.
// The value is written without escapes, so it never holds `"`, `\` or control characters (a pattern that needs them
// matches nothing here and is refused). Anything else (backreferences, lookarounds, `\b`, Unicode classes) is
// refused by name.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace attnzoo {

struct StringPattern {
  static constexpr uint16_t kDead = 0xFFFF;
  static constexpr size_t kMaxStates = 2048;
  std::vector<std::array<uint16_t, 256>> next;  // per state and byte: the next state, kDead where refused
  std::vector<uint8_t> accepting;
  uint16_t start = 0;
};

// Compiles `regex`; throws ArgumentError "response_format: json_schema at #<pointer>: ..." naming what the subset
// lacks, or a pattern no unescaped string matches, or one past kMaxStates.
StringPattern compile_string_pattern(const std::string& regex, const std::string& pointer);

// Keeps only the states an accepting one is reachable from (every transition into another becomes kDead), so a walk
// never enters a dead end; false when the start state is not kept (no string is accepted).
bool prune_dead_ends(StringPattern& p);

}  // namespace attnzoo
