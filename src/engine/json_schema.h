#pragma once
// Structured outputs (response_format {"type": "json_schema"}): a JSON Schema compiled into a small graph that
// JsonSchemaRecognizer (engine/json_schema_recognizer.h) walks byte by byte.
//
// The subset, and how each keyword is read (anything else is refused, naming the keyword and its JSON pointer):
//   type            "object", "array", "string", "number", "integer", "boolean", "null", or a list of them.
//                   Without `type`, `properties` / `required` / `additionalProperties` / `minProperties` /
//                   `maxProperties` mean an object, `items` / `minItems` / `maxItems` an array, `minLength` /
//                   `maxLength` a string; nothing at all: any value.
//   properties      written in the schema's order; an optional one may be skipped, a required one may not.
//   additionalProperties  beside properties / required: false when absent or false (no other key); true or a
//                   schema: other keys may come anywhere between them, each value of that schema (any value for
//                   true). Such a key is written as json.dumps writes it (escapes only for '"', '\\' and control
//                   characters, in their short forms) and differs from every listed key (a listed key is written
//                   once, in its place); other keys are not checked against each other (that would need their text
//                   kept: the recognizer's state is a fixed 168 bytes). Without
//                   properties / required the object is a map: any keys, values of additionalProperties.
//   patternProperties, propertyNames  (engine/json_schema_keys.h) a key no listed name takes gets the schema of the
//                   one pattern that matches it (re.search), else additionalProperties' (none: refused); each key
//                   (listed too) satisfies propertyNames (type string, pattern, format but email, minLength /
//                   maxLength, enum or const). Such keys are written without escapes. Refused: two patterns one key
//                   can match (both schemas would apply), a listed name a pattern matches, a listed name
//                   propertyNames rejects. Beside them an object without properties is a map (additionalProperties
//                   false: keys of the patterns only).
//   minProperties, maxProperties  keys written, listed and other (at most 511).
//   items, minItems, maxItems; minLength, maxLength (characters, as Python's len counts them).
//   prefixItems     a tuple's first items, each its own schema; later items follow `items` (false: none).
//   allOf           one schema that constrains the value beside any that do not (true, {}, annotations only), as
//                   generators wrap a lone $ref; an intersection of two real schemas is refused.
//   enum, const     any JSON values, written compactly as Python's json.dumps(separators=(",", ":")) writes them;
//                   with `type` beside them, the values of other types are dropped.
//   anyOf, oneOf    branches whose first bytes differ (a string or null, an object or an array, ...): the first
//                   byte picks the branch, so oneOf's "exactly one" holds too. Enum / const branches merge into one
//                   set (a value two oneOf branches list is refused). Branches that can start alike (two object
//                   schemas, "number" and "integer") are refused.
//   $ref            "#" or a JSON pointer into the document ("#/$defs/X", "#/definitions/X"); recursion is bounded
//                   by kMaxDepth (32) nesting levels (a required self-reference is refused).
//   minimum, maximum, exclusiveMinimum, exclusiveMaximum (numbers, draft 6 on); multipleOf (exact decimals: 0.3
//                   is a multiple of 0.1): enforced as the digits are written (engine/json_number_bounds.h). A
//                   bounded integer stays within int64; a bounded number has no exponent, and its bounds and step at
//                   most 12 decimals and magnitude below 1e18. A range no value (or multiple) lies in is refused.
//   format          on a string: date, time, date-time, uuid, ipv4, email, duration (engine/json_string_format.h
//                   says exactly which texts), written without escapes; with minLength / maxLength the length bounds
//                   intersect its DFA (engine/json_string_length.h; email: json_string_format.h's email_viable). Other
//                   names are refused; on other types format means nothing (as JSON Schema has it) and is ignored.
//   pattern         on a string: a regular expression subset compiled to a DFA (engine/json_string_pattern.h),
//                   matching anywhere unless anchored; not beside format; minLength / maxLength intersect it.
//   Annotations (title, description, default, examples, $comment, $schema, $id, deprecated, readOnly, writeOnly)
//   are accepted and change nothing. `integer` is written without a fraction or exponent.
// Keys and enum strings are written as json.dumps(ensure_ascii=False) writes them (no needless escapes), so a
// document's text follows from its values; free strings may use any JSON escape.
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/json_number_bounds.h"
#include "engine/json_string_format.h"
#include "engine/json_string_length.h"
#include "engine/json_string_pattern.h"

namespace attnzoo {

namespace json {
class Value;
}

struct JsonSchema {
  static constexpr uint16_t kNone = 0xFFFF;
  static constexpr uint32_t kUnbounded = 0xFFFFFFFF;
  static constexpr int kMaxProperties = 64;  // per object: the key trie's masks are 64-bit
  static constexpr int kMaxDepth = 32;       // objects and arrays open at once (the recognizer's frame stack)

  enum class Kind : uint8_t { object, map, array, string, number, integer, literal };
  struct Node {
    Kind kind = Kind::literal;
    uint16_t child = kNone;  // array: the items' position; map: the values'; object: other keys' values' (kNone: none)
    uint32_t min = 0, max = kUnbounded;  // array: items; string: characters; object / map: keys
    uint32_t first_property = 0, num_properties = 0;  // object: into `properties`; array: prefixItems' positions
    uint64_t required = 0;              // object: bit i, properties[first_property + i] is required
    uint32_t trie = 0;                  // object: its quoted keys' trie; literal: its values' trie
    // A tagged union's object (engine/json_schema_union.h): once its one property's literal closes with terminal
    // t, the object goes on as node variants[first_variant + t].
    uint32_t first_variant = 0, num_variants = 0;
    uint16_t bounds = kNone;  // number / integer: into number_bounds
    bool email = false;        // string: format email (engine/json_string_format.h; the other formats are patterns)
    uint16_t pattern = kNone;  // string: into patterns (a `pattern`, or a format's shared DFA)
    uint16_t lengths = kNone;  // a patterned string with minLength / maxLength: into string_lengths
    uint16_t keys = kNone;     // object / map with patternProperties / propertyNames: into key_patterns
  };
  // The key DFA of patternProperties / propertyNames (engine/json_schema_keys.h): patterns[pattern], and per DFA
  // state the value position of a key that ends there (kNone: it may not end there); positions: those, once each.
  struct KeyPattern {
    uint16_t pattern;
    std::vector<uint16_t> value, positions;
  };
  struct Property {
    uint16_t value;  // its value's position
  };
  // A value position (the root, a property's value, an array's items): the node each first byte selects.
  struct Position {
    std::array<uint16_t, 256> by_byte;
    std::vector<uint16_t> branches;
  };
  // Literal tries: keys (terminal: the property's index, mask: the properties whose key passes through) and enum
  // values (terminal: the value's index, which a tagged union's tag reads as its branch; mask all ones).
  struct TrieNode {
    std::vector<std::pair<uint8_t, uint32_t>> edges;  // sorted by byte
    int32_t terminal = -1;
    uint64_t mask = 0;
  };

  std::vector<Node> nodes;
  std::vector<Position> positions;
  std::vector<Property> properties;
  std::vector<TrieNode> trie;
  std::vector<uint16_t> variants;
  std::vector<NumberBounds> number_bounds;
  std::vector<std::shared_ptr<const StringPattern>> patterns;
  std::vector<StringLengths> string_lengths;
  std::vector<KeyPattern> key_patterns;
  std::vector<uint16_t> node_need, position_need;  // nesting levels a value needs at least (containers count one)
  uint16_t root = 0;                                // the document's position

  uint32_t trie_child(uint32_t node, uint8_t byte) const {
    for (const auto& [b, child] : trie[node].edges)
      if (b == byte) return child;
    return kUnbounded;
  }
  // The value positions an object's / map's unlisted keys take: additionalProperties' alone, or beside
  // patternProperties / propertyNames those the key DFA's accepting states name; empty where no such key can be
  // written. The compiler's minProperties check, the nesting need and the recognizer all ask here, so they agree.
  std::span<const uint16_t> other_key_positions(const Node& n) const {
    if (n.keys != kNone) return key_patterns[n.keys].positions;
    return n.child == kNone ? std::span<const uint16_t>() : std::span<const uint16_t>(&n.child, 1);
  }
  // Appends a trie of `words` (terminal i at the end of words[i]; mask: bit i on words[i]'s path where `keys`, all
  // ones otherwise); its root.
  uint32_t add_trie(const std::vector<std::string>& words, bool keys);
};

// What schemas may compile in all, counted as each DFA or length table is built: 8 x StringPattern::kMaxStates
// pattern states (formats' shared DFAs outside it) and 8 x StringLengths::kMaxBits of length tables. One schema has
// its own; a request's tools pass one they share, so a request's work stays within one schema's however many tools.
struct SchemaBudget {
  size_t pattern_states = 0, length_words = 0;
};
// Compiles `schema` (the "schema" member of response_format.json_schema), within `shared` where given. Throws
// ArgumentError "response_format: ..." naming the unsupported keyword (or the problem) and its JSON pointer.
std::shared_ptr<const JsonSchema> compile_json_schema(const json::Value& schema, SchemaBudget* shared = nullptr);

}  // namespace attnzoo
