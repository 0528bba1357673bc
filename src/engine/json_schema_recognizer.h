#pragma once
// A byte-at-a-time recognizer of one JSON document that validates against a compiled schema (engine/json_schema.h):
// JsonRecognizer's pushdown automaton, with each open object / array a 4-byte frame naming its schema node (and the
// next property it may write and the keys written, or its item count), so the whole state is a fixed 168 bytes that
// structured outputs copies per vocabulary trie edge (engine/json_constraint.h). A key an object does not list
// (additionalProperties beside properties) follows the listed keys' trie while it can, then goes on as a free key
// (escapes only in json.dumps' forms, so that its text follows from its value); it may not end as a listed key, so each listed key is written once, in its place.
//
// push(b) accepts b iff the bytes so far, b included, are still a prefix of some document that validates, within
// the bounds: kMaxDepth objects / arrays open at once (a property or item whose schema cannot be completed within
// the depth left is refused at its key / first byte, so no accepted prefix is a dead end), at most kMaxWhitespace
// whitespace bytes in a row outside strings, and nothing after the top-level value (no trailing whitespace).
// Strings are checked as JsonRecognizer checks them; in a string with a maxLength, \u escapes of UTF-16 surrogates
// are refused (characters are counted as Python counts them, and a surrogate pair would be one).
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "engine/json_schema.h"

namespace attnzoo {

class JsonSchemaRecognizer {
 public:
  static constexpr int kMaxDepth = JsonSchema::kMaxDepth;
  static constexpr int kMaxWhitespace = 20;

  // `schema` must outlive the recognizer (the scheduler keeps the request's shared_ptr).
  explicit JsonSchemaRecognizer(const JsonSchema& schema) : schema_(&schema), want_(schema.root) {}

  // Back to the start of a new document of the same schema.
  void restart() { *this = JsonSchemaRecognizer(*schema_); }
  // False leaves the state unchanged.
  bool push(uint8_t byte);
  // All of `bytes`, or false with the state unchanged.
  bool push(std::string_view bytes) {
    JsonSchemaRecognizer next = *this;
    for (char c : bytes)
      if (!next.push(uint8_t(c))) return false;
    *this = next;
    return true;
  }
  // No byte can follow: the document is whole.
  bool complete() const;
  // The bytes so far are a whole document (also when more could follow: a top-level number, an enum of 1 and 12).
  bool can_end() const;
  // Between characters of a string (no escape or multi-byte character under way), as JsonRecognizer's: there a
  // token of whole characters with no quote, backslash or control byte is accepted iff it has at most
  // string_room() characters (SIZE_MAX: no maxLength), which TokenTrie uses instead of walking those tokens.
  // An unlisted key (additionalProperties beside properties) counts too where any such token goes on with it: off
  // the listed keys' trie, or on it where leaving it is allowed (no escape so far), between characters.
  bool in_string_text() const { return mode_ == Mode::string || (mode_ == Mode::key_literal && free_key_text()); }
  size_t string_room() const;
  // Inside a patterned / formatted string's text: its DFA, DFA state, characters so far and length table (null
  // without minLength / maxLength); there a byte other than the closing quote only moves the DFA, so TokenTrie
  // takes the quote-free tokens from per-state sets (engine/json_pattern_tokens.h). pattern null elsewhere.
  struct PatternText {
    const std::shared_ptr<const StringPattern>* pattern = nullptr;
    uint16_t state = 0;
    uint32_t len = 0;
    const StringLengths* lengths = nullptr;
  };
  PatternText pattern_text() const;

 private:
  enum class Mode : uint8_t {
    value,        // a value of position want_
    object_open,  // after '{': a key or '}'
    key,          // after ',' in an object
    key_literal,  // inside a property's quoted key: trie node lit_ (kOffTrie: another key), properties keys_ still
                  // possible; a character's continuation bytes: aux_ more, the next in [lo_, hi_]. Under
                  // patternProperties / propertyNames (a map's keys too) len_ holds the key DFA's state instead.
    colon,        // after a key; the value's position is want_
    after_value,  // ',' or the innermost container's closer
    array_open,   // after '[': an item or ']'
    string,       // inside a string (node want_, or a map's key when key_)
    pattern,      // inside a string of node want_'s pattern (or format): DFA state state_
    email,        // inside a string of format email: email_
    escape,
    unicode,      // after "\u": aux_ hex digits to come
    utf8,         // aux_ continuation bytes to come, the next in [lo_, hi_]
    minus,
    zero,
    integer,
    dot,
    fraction,
    exponent,
    exponent_sign,
    exponent_digits,
    literal,  // an enum / const / boolean / null value: trie node lit_
    done,
  };
  struct Frame {
    uint16_t node;
    // array: items begun; object: the index of the first property it may still write (low 7 bits) and the keys
    // written (9 bits above, saturating); map: the keys written (the same 9 bits).
    uint16_t count;
  };
  static constexpr uint32_t kOffTrie = JsonSchema::kUnbounded;
  static constexpr uint8_t kEscape = 0x10;  // an unlisted key's aux_ from here on: inside an escape
  static uint32_t next_index(const Frame& f) { return f.count & 0x7F; }
  static uint32_t keys_written(const Frame& f) { return f.count >> 7; }
  static void wrote_key(Frame& f, uint32_t next) {
    f.count = uint16_t(next | std::min<uint32_t>(keys_written(f) + 1, 511) << 7);
  }

  const JsonSchema::Node& node(uint16_t id) const { return schema_->nodes[id]; }
  bool fits(uint16_t position) const { return depth_ + schema_->position_need[position] <= kMaxDepth; }
  bool begin_value(uint8_t byte);
  bool begin_key(uint8_t byte);
  bool key_byte(uint8_t byte);
  bool literal_byte(uint8_t byte);
  bool string_byte(uint8_t byte);
  bool string_char();  // a character starts: within maxLength?
  bool next_item();  // an array's item begins (after '[' or ','): within maxItems? want_ is its position
  bool comma();
  bool close(uint8_t byte);
  bool end_value();
  bool after_scalar(uint8_t byte);  // the byte after a number / literal that could have gone on
  bool whitespace();
  // A bounded number's byte (kept by json_lexeme's grammar, now in mode m): some completion still in range?
  bool bounded_number_byte(uint8_t byte, Mode m);
  bool number_holds() const;  // the number so far, ended here, meets its bounds (true when it has none)
  uint64_t keys_from(const Frame& f) const;  // the properties the object may write next
  bool other_key_from(const Frame& f) const;  // the object may write a key it does not list next
  bool other_values_fit(const JsonSchema::Node& n) const;  // some unlisted key exists, and every value it takes fits
  bool other_key_byte(uint8_t byte);         // a byte of such a key (off the listed keys' trie)
  bool patterned_key_byte(uint8_t byte);     // a key's byte under patternProperties / propertyNames
  bool free_key_text() const;

  const JsonSchema* schema_;
  std::array<Frame, kMaxDepth> frames_;
  // What the token under way keeps; never two at once, so they share their bytes (the state stays 168 bytes).
  union {
    uint64_t keys_ = 0;  // key_literal: the properties whose key is still possible
    NumberSoFar num_;    // a bounded number's digits (engine/json_number_bounds.h)
    EmailSoFar email_;   // an email address's characters (engine/json_string_format.h)
    uint16_t state_;     // a pattern's DFA state (engine/json_string_pattern.h)
  };
  uint32_t lit_ = 0, len_ = 0;  // len_: a string's characters so far, or a number's current part's digits
  uint16_t want_;
  uint8_t depth_ = 0, aux_ = 0, lo_ = 0, hi_ = 0;
  Mode mode_ = Mode::value;
  uint8_t ws_ : 7 = 0;  // whitespace bytes in a row (at most kMaxWhitespace)
  bool key_ : 1 = false;
};

}  // namespace attnzoo
