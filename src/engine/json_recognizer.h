#pragma once
// A byte-at-a-time recognizer of one JSON object (RFC 8259, an object at the top level as OpenAI's JSON mode
// requires): a pushdown automaton whose whole state is a few bytes and a 64-bit container stack, so JSON mode can
// copy it freely while it tries every vocabulary token's bytes (engine/json_constraint.h).
//
// push(b) accepts b iff the bytes so far, b included, are still a prefix of some valid document within the
// recognizer's bounds: nesting depth at most kMaxDepth, at most kMaxWhitespace whitespace bytes in a row outside
// strings (as llama.cpp's JSON grammar bounds them, so a model cannot loop on spaces), and numbers a double holds
// (json_lexeme.h: at most 20 integer, 200 fraction and 2 exponent digits). Strings must be
// valid UTF-8 (no overlong forms, no encoded surrogates); control bytes in strings are refused, as RFC 8259 says.
// Once the top-level object closes the document is complete and no further byte is accepted.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace attnzoo {

class JsonRecognizer {
 public:
  static constexpr int kMaxDepth = 64;
  static constexpr int kMaxWhitespace = 20;

  // False leaves the state unchanged.
  bool push(uint8_t byte);
  // All of `bytes`, or false with the state unchanged.
  bool push(std::string_view bytes) {
    JsonRecognizer next = *this;
    for (char c : bytes)
      if (!next.push(uint8_t(c))) return false;
    *this = next;
    return true;
  }
  bool complete() const { return mode_ == Mode::done; }
  // Between characters of a string (no escape or multi-byte character under way): where a token made of whole
  // characters with no quote, backslash or control byte leaves the state exactly as it is.
  bool in_string_text() const { return mode_ == Mode::string; }
  // Characters a string may still take (JsonSchemaRecognizer's question; TokenTrie takes either): no bound here.
  size_t string_room() const { return SIZE_MAX; }

 private:
  enum class Mode : uint8_t {
    start,          // before the top-level '{'
    object_open,    // after '{': a key or '}'
    key,            // after ',' in an object: a key
    colon,          // after a key
    value,          // after ':' or ',' in an array
    array_open,     // after '[': a value or ']'
    after_value,    // ',' or the innermost container's closer
    string,         // inside a string (key_ says which kind)
    escape,         // after '\'
    unicode,        // after "\u": aux_ hex digits still to come
    utf8,           // inside a multi-byte character: aux_ continuation bytes to come, the next in [lo_, hi_]
    minus,          // "-": a digit must follow
    zero,           // an integer part "0": no more digits
    integer,        // integer digits after a non-zero first one
    dot,            // "." : a digit must follow
    fraction,       // fraction digits
    exponent,       // "e": a sign or digit must follow
    exponent_sign,  // "e+" / "e-": a digit must follow
    exponent_digits,
    literal,        // inside true / false / null: literal_ names which, aux_ bytes of it matched
    done,
  };

  bool open(bool object);
  bool close(bool object);
  bool end_value();  // a value just ended: after_value, or done when it was the top-level object
  bool begin_value(uint8_t byte);
  bool after_number(uint8_t byte);  // the byte that ended a number, read as after_value reads it
  bool string_byte(uint8_t byte);
  bool whitespace();

  uint64_t stack_ = 0;  // bit d: the container at depth d is an object
  uint8_t depth_ = 0;
  Mode mode_ = Mode::start;
  uint8_t aux_ = 0, lo_ = 0, hi_ = 0, literal_ = 0, ws_ = 0;
  uint8_t digits_ = 0;  // a number's current part: its digits so far (json_lexeme::number_byte)
  bool key_ = false;
};

}  // namespace attnzoo
