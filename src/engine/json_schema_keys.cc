#include "engine/json_schema_keys.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "engine/json_schema_pointer.h"
#include "engine/json_string_format.h"
#include "loader/json.h"

namespace attnzoo {
namespace {

constexpr uint16_t kDead = StringPattern::kDead;

using json_schema_at::child;
using json_schema_at::refuse;

bool needs_escape(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](char c) { return uint8_t(c) < 0x20 || c == '"' || c == '\\'; });
}

uint32_t characters(std::string_view text) {
  return uint32_t(std::count_if(text.begin(), text.end(), [](char c) { return (uint8_t(c) & 0xC0) != 0x80; }));
}

// A regex (engine/json_string_pattern.h's subset) matching exactly one of `words`.
std::string alternation(const std::vector<std::string>& words) {
  std::string out = "^(?:";
  for (size_t i = 0; i < words.size(); ++i) {
    if (i) out += '|';
    for (char c : words[i]) {
      const uint8_t b = uint8_t(c);
      if ((b >= 0x21 && b <= 0x2F) || (b >= 0x3A && b <= 0x40) || (b >= 0x5B && b <= 0x60) || (b >= 0x7B && b <= 0x7E))
        out += '\\';
      out += c;
    }
  }
  return out + ")$";
}

}  // namespace

void read_property_names(const json::Value& s, const std::string& pointer, KeyRules& rules,
                         std::vector<std::shared_ptr<const StringPattern>>& keep, const SpendStates& spend) {
  if (s.is_bool()) {
    if (!s.as_bool()) refuse(pointer, "propertyNames false (no key at all) is not supported");
    return;
  }
  if (!s.is_object()) refuse(pointer, "propertyNames must be a schema (an object or a boolean)");
  static constexpr std::string_view kAllowed[] = {"type",        "pattern",  "format",  "minLength", "maxLength",
                                                  "enum",        "const",    "title",   "description", "$comment",
                                                  "examples",    "default"};
  for (const auto& [k, v] : s.as_object())
    if (std::find(std::begin(kAllowed), std::end(kAllowed), k) == std::end(kAllowed))
      refuse(pointer, "\"" + k + "\" in propertyNames is not supported (supported: type, pattern, format, minLength, "
                      "maxLength, enum, const)");
  if (const json::Value* t = s.find("type")) {
    const bool string = (t->is_string() && t->as_string() == "string") ||
                        (t->is_array() && std::any_of(t->as_array().begin(), t->as_array().end(), [](const auto& v) {
                           return v.is_string() && v.as_string() == "string";
                         }));
    if (!string) refuse(child(pointer, "type"), "propertyNames' type must allow \"string\" (keys are strings)");
  }
  for (const char* key : {"minLength", "maxLength"})
    if (const json::Value* v = s.find(key)) {
      if (!v->is_integer() || v->as_int() < 0 || v->as_int() > 1'000'000'000)
        refuse(child(pointer, key), std::string(key) + " must be an integer in [0, 1e9]");
      (key[1] == 'i' ? rules.min_length : rules.max_length) = uint32_t(v->as_int());
    }
  if (rules.min_length > rules.max_length) refuse(pointer, "propertyNames: minLength exceeds maxLength");
  if (const json::Value* re = s.find("pattern")) {
    const std::string at = child(pointer, "pattern");
    if (!re->is_string()) refuse(at, "pattern must be a string");
    keep.push_back(std::make_shared<const StringPattern>(compile_string_pattern(re->as_string(), at)));
    spend(*keep.back(), at);
    rules.names.push_back(keep.back().get());
  }
  if (const json::Value* f = s.find("format")) {
    const StringFormat format = f->is_string() ? string_format(f->as_string()) : StringFormat::none;
    if (format == StringFormat::none || format == StringFormat::email)
      refuse(child(pointer, "format"), "propertyNames: only the formats date, time, date-time, uuid, ipv4 and "
                                       "duration are supported");
    keep.push_back(format_pattern(format));
    rules.names.push_back(keep.back().get());
  }
  // As for a value's enum / const: one or the other (the key DFA would read only one of them).
  if (s.find("enum") && s.find("const")) refuse(pointer, "\"const\" beside \"enum\" is not supported");
  if (s.find("enum") || s.find("const")) {
    const std::string at = child(pointer, s.find("enum") ? "enum" : "const");
    std::vector<std::string> words;
    if (const json::Value* e = s.find("enum")) {
      if (!e->is_array() || e->as_array().empty()) refuse(at, "enum must be a non-empty list");
      for (const json::Value& v : e->as_array())
        if (v.is_string()) words.push_back(v.as_string());
    } else if (s.find("const")->is_string()) {
      words.push_back(s.find("const")->as_string());
    }
    if (words.empty()) refuse(at, "propertyNames: no value of enum / const is a string (keys are strings)");
    for (const auto& w : words)
      if (needs_escape(w)) refuse(at, "propertyNames: a name that needs JSON escapes is not supported");
    keep.push_back(std::make_shared<const StringPattern>(compile_string_pattern(alternation(words), at)));
    spend(*keep.back(), at);
    rules.names.push_back(keep.back().get());
  }
}

void check_listed_names(const KeyRules& rules, const std::vector<std::string>& names, const std::string& pointer) {
  for (const std::string& name : names) {
    const std::string at = child(child(pointer, "properties"), name);
    if (needs_escape(name))
      refuse(at, "a property name that needs JSON escapes beside patternProperties / propertyNames is not supported");
    for (const auto& r : rules.patterns)
      if (pattern_matches(*r.regex, name))
        refuse(at, "the property also matches patternProperties \"" + r.text +
                       "\" (its value would have to satisfy both schemas: not supported)");
    const uint32_t len = characters(name);
    bool ok = len >= rules.min_length && len <= rules.max_length;
    for (const StringPattern* p : rules.names) ok = ok && pattern_matches(*p, name);
    if (!ok) refuse(at, "the property's name does not satisfy propertyNames");
  }
}

StringPattern compile_key_pattern(const json::Value& s, const std::string& pointer,
                                  const std::vector<std::string>& listed, uint16_t additional,
                                  const std::function<uint16_t(const json::Value&, const std::string&)>& position,
                                  std::vector<uint16_t>& value, const SpendStates& spend) {
  // Every key: unescaped text of whole UTF-8 characters ("" matches any such string), compiled once.
  static const StringPattern any_text = compile_string_pattern("", "");
  KeyRules rules;
  rules.additional = additional;
  rules.names.push_back(&any_text);
  std::vector<std::shared_ptr<const StringPattern>> keep;
  if (const json::Value* names = s.find("propertyNames"))
    read_property_names(*names, child(pointer, "propertyNames"), rules, keep, spend);
  const json::Value* patterns = s.find("patternProperties");
  const std::string at = child(pointer, "patternProperties");
  if (patterns) {
    if (!patterns->is_object()) refuse(at, "patternProperties must be an object");
    if (patterns->as_object().size() > KeyRules::kMaxPatterns)
      refuse(at, "more than " + std::to_string(KeyRules::kMaxPatterns) + " patterns are not supported");
    for (const json::Member* m : patterns->members_in_source_order()) {
      const std::string re_at = child(at, m->first);
      keep.push_back(std::make_shared<const StringPattern>(compile_string_pattern(m->first, re_at)));
      spend(*keep.back(), re_at);
      rules.patterns.push_back({keep.back().get(), position(m->second, re_at), m->first});
    }
  }
  check_listed_names(rules, listed, pointer);
  rules.listed = listed;
  return key_automaton(rules, value, patterns ? at : pointer);
}

bool pattern_matches(const StringPattern& pattern, std::string_view text) {
  uint16_t s = pattern.start;
  for (char c : text)
    if ((s = pattern.next[s][uint8_t(c)]) == kDead) return false;
  return pattern.accepting[s];
}

StringPattern key_automaton(const KeyRules& rules, std::vector<uint16_t>& value, const std::string& pointer) {
  // A product state: the names' DFA states, the characters so far (saturating at what the bounds can still tell
  // apart), then each pattern's state (kDead once it can no longer match: the key may still be another's).
  const size_t num_names = rules.names.size();
  const bool bounded = rules.max_length != 0xFFFFFFFF;
  const uint32_t cap = bounded ? rules.max_length : rules.min_length;
  if (cap >= StringPattern::kMaxStates) refuse(pointer, "propertyNames: a length bound above 2047 is not supported");
  // The listed names' trie (node 0 the root): a key that ends on one of its terminals is a listed name.
  constexpr uint32_t kOff = 0xFFFFFFFF;
  std::vector<std::map<uint8_t, uint32_t>> trie(1);
  std::vector<uint8_t> listed_end(1, 0);
  for (const std::string& name : rules.listed) {
    uint32_t at = 0;
    for (char c : name) {
      auto [it, fresh] = trie[at].try_emplace(uint8_t(c), uint32_t(trie.size()));
      if (fresh) trie.emplace_back(), listed_end.push_back(0);
      at = it->second;
    }
    listed_end[at] = 1;
  }
  using Tuple = std::vector<uint32_t>;
  Tuple start;  // the names' states, the characters, the patterns' states, the listed names' trie node
  for (const StringPattern* p : rules.names) start.push_back(p->start);
  start.push_back(0);
  for (const auto& r : rules.patterns) start.push_back(r.regex->start);
  start.push_back(0);

  StringPattern out;
  std::map<Tuple, uint16_t> ids{{start, 0}};
  std::vector<Tuple> tuples{start};
  for (size_t d = 0; d < tuples.size(); ++d) {
    const Tuple t = tuples[d];
    // What a key ending here is: a listed name, outside the names' rules, or taken by which patterns.
    const uint32_t node = t.back();
    bool allowed = t[num_names] >= rules.min_length && !(node != kOff && listed_end[node]);
    for (size_t i = 0; i < num_names; ++i) allowed = allowed && rules.names[i]->accepting[t[i]];
    int matched = -1;
    for (size_t k = 0; k < rules.patterns.size() && allowed; ++k) {
      const uint32_t s = t[num_names + 1 + k];
      if (s == kDead || !rules.patterns[k].regex->accepting[s]) continue;
      if (matched >= 0)
        refuse(pointer, "patternProperties \"" + rules.patterns[size_t(matched)].text + "\" and \"" +
                            rules.patterns[k].text +
                            "\" can both match one key (its value would have to satisfy both schemas: not supported)");
      matched = int(k);
    }
    out.accepting.push_back(allowed && (matched >= 0 || rules.additional != KeyRules::kNone));
    value.push_back(!out.accepting.back() ? KeyRules::kNone
                    : matched >= 0        ? rules.patterns[size_t(matched)].position
                                          : rules.additional);
    out.next.emplace_back();
    out.next.back().fill(kDead);
    for (int b = 0; b < 256; ++b) {
      Tuple to = t;
      bool alive = true;
      for (size_t i = 0; i < num_names && alive; ++i) alive = (to[i] = rules.names[i]->next[t[i]][b]) != kDead;
      // Characters are code points: every byte but a UTF-8 continuation begins one.
      const uint32_t chars = t[num_names] + (b < 0x80 || b >= 0xC0);
      if (bounded && chars > cap) alive = false;
      to[num_names] = std::min(chars, cap);
      for (size_t k = 0; k < rules.patterns.size(); ++k) {
        uint32_t& s = to[num_names + 1 + k];
        if (s != kDead) s = rules.patterns[k].regex->next[s][b];
      }
      if (node != kOff) {
        const auto next = trie[node].find(uint8_t(b));
        to.back() = next == trie[node].end() ? kOff : next->second;
      }
      if (!alive) continue;
      auto [it, fresh] = ids.try_emplace(to, uint16_t(tuples.size()));
      if (fresh) {
        if (tuples.size() >= StringPattern::kMaxStates)
          refuse(pointer, "patternProperties / propertyNames: more than " +
                              std::to_string(StringPattern::kMaxStates) + " DFA states for the keys");
        tuples.push_back(std::move(to));
      }
      out.next[d][size_t(b)] = it->second;
    }
  }
  // No other key at all: fine beside listed ones (propertyNames {"enum": [...]} naming only them).
  if (!prune_dead_ends(out) && rules.listed.empty())
    refuse(pointer, "no key written without escapes satisfies propertyNames / patternProperties");
  return out;
}

}  // namespace attnzoo
