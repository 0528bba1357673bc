#pragma once
// json_schema's patternProperties and propertyNames: one DFA over an object's key text (engine/json_string_pattern.h:
// raw text, no escapes) that decides both whether a key may be written and which schema its value takes.
//
// JSON Schema's rule (draft 2020-12, 10.3.2.2 and 10.3.2.4): a key's value must satisfy every patternProperties
// schema whose regex matches the key (beside its properties schema when listed), and additionalProperties applies
// only to keys that no listed name and no pattern matches. Generation cannot intersect two schemas, so where two
// patterns can match one key that propertyNames allows the schema is refused (a listed name that a pattern
// matches is refused by the compiler); then at most one pattern applies to any key, and the DFA is the product of
// the patterns' DFAs, the key-name rules' DFAs and a character counter, each accepting state tagged with the value
// position its key takes: the matching pattern's, additionalProperties' when none matches (a key no pattern matches
// and no additionalProperties allows is not accepted). Only states an accepting one is reachable from are kept.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/json_string_pattern.h"

namespace attnzoo {

namespace json {
class Value;
}

// Counts a DFA just compiled (its states) against the request's budget, naming `pointer` when it runs out (throws).
using SpendStates = std::function<void(const StringPattern& dfa, const std::string& pointer)>;

struct KeyRules {
  static constexpr uint16_t kNone = 0xFFFF;
  // patternProperties per object: each is its own DFA until the product is built (and a key can match only one).
  static constexpr size_t kMaxPatterns = 64;
  // propertyNames: every key matches all of these and has [min_length, max_length] characters.
  std::vector<const StringPattern*> names;
  uint32_t min_length = 0, max_length = 0xFFFFFFFF;
  // patternProperties: regex, the value position its keys take, and its source text for messages.
  struct Rule {
    const StringPattern* regex;
    uint16_t position;
    std::string text;
  };
  std::vector<Rule> patterns;
  uint16_t additional = kNone;  // additionalProperties' position; kNone: a key must match a pattern
  // The object's listed names: never another key (a listed key is written once, in its place), so the DFA leaves
  // them out, and a key under way whose only completions are listed names already written is not begun.
  std::vector<std::string> listed;
};

// Reads propertyNames (`schema`, at `pointer`) into rules.names / lengths, the DFAs kept in `keep`: true / {} (no
// rule) or a string schema of type, pattern, format (its DFA; not email), minLength, maxLength, enum / const (the
// strings among them; a value that needs JSON escapes is refused; not both). Anything else is refused by name. Each
// DFA compiled here is counted by `spend` (a format's is shared, compiled once per process: not counted).
void read_property_names(const json::Value& schema, const std::string& pointer, KeyRules& rules,
                         std::vector<std::shared_ptr<const StringPattern>>& keep, const SpendStates& spend);

// Refuses, naming it, a listed property name (`names`, of the object at `pointer`) that a pattern matches (both
// schemas would apply), that propertyNames rejects, or that needs JSON escapes (the DFAs read unescaped text).
void check_listed_names(const KeyRules& rules, const std::vector<std::string>& names, const std::string& pointer);

// The key DFA, and per state the value position of a key that ends there (kNone where it may not end). Throws
// ArgumentError "response_format: json_schema at #<pointer>: ..." when two patterns can match one key, no key is
// possible, or the product passes StringPattern::kMaxStates.
StringPattern key_automaton(const KeyRules& rules, std::vector<uint16_t>& value, const std::string& pointer);

// The key DFA of the object schema `s` at `pointer` (its propertyNames and patternProperties; `listed` its
// properties' names, checked by check_listed_names), per state the value position (`value`); each pattern's schema
// becomes a position through `position(schema, pointer)`, other keys' values are at `additional`. At most
// kMaxPatterns patterns (refused before any is compiled); each DFA is counted by `spend` as it is compiled, so a
// hostile schema is refused before its patterns' DFAs pile up (the product is the caller's to count).
StringPattern compile_key_pattern(const json::Value& s, const std::string& pointer,
                                  const std::vector<std::string>& listed, uint16_t additional,
                                  const std::function<uint16_t(const json::Value&, const std::string&)>& position,
                                  std::vector<uint16_t>& value, const SpendStates& spend);

// `text` (unescaped) is matched by `pattern` as a whole string.
bool pattern_matches(const StringPattern& pattern, std::string_view text);

}  // namespace attnzoo
