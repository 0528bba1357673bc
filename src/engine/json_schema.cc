// The schema compiler: JSON Schema (the subset json_schema.h lists) to the graph JsonSchemaRecognizer walks.
#include "engine/json_schema.h"

#include <algorithm>
#include <bit>
#include <map>
#include <set>
#include <span>
#include <string_view>

#include "core/error.h"
#include "engine/json_schema_keys.h"
#include "engine/json_schema_need.h"
#include "engine/json_schema_pointer.h"
#include "loader/json.h"
#include "loader/json_writer.h"

namespace attnzoo {
namespace {

using json::Value;
using Kind = JsonSchema::Kind;
constexpr uint16_t kNone = JsonSchema::kNone;

constexpr std::string_view kAnnotations[] = {"title",    "description", "default",   "examples",
                                             "$comment", "$schema",     "$id",       "deprecated",
                                             "readOnly", "writeOnly",   "$defs",     "definitions"};
constexpr std::string_view kKeywords[] = {
    "type",    "properties", "required", "additionalProperties", "items",   "prefixItems",     "minItems",
    "maxItems", "minLength", "maxLength", "enum",                "const",   "anyOf",           "oneOf",
    "allOf",   "$ref",       "minimum",  "maximum",              "exclusiveMinimum", "exclusiveMaximum",
    "multipleOf", "format",  "pattern",  "minProperties",        "maxProperties", "patternProperties",
    "propertyNames"};
constexpr std::string_view kTypes[] = {"object", "array", "string", "number", "integer", "boolean", "null"};

bool one_of(std::string_view k, std::span<const std::string_view> set) {
  return std::find(set.begin(), set.end(), k) != set.end();
}

using json_schema_at::child;
using json_schema_at::refuse;

std::string compact(const Value& v) {
  json::Writer w;
  w.value(v);
  return w.take();
}

bool has_type(const Value& v, std::string_view type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "number") return v.is_number();
  if (type == "integer") return v.is_integer();
  if (type == "boolean") return v.is_bool();
  return v.is_null();
}

uint32_t count_field(const Value& s, const char* key, const std::string& pointer, uint32_t otherwise) {
  const Value* v = s.find(key);
  if (!v) return otherwise;
  if (!v->is_integer() || v->as_int() < 0 || v->as_int() > 1'000'000'000)
    refuse(child(pointer, key), std::string(key) + " must be an integer in [0, 1e9]");
  return uint32_t(v->as_int());
}

// What a schema's value may be: nodes, and whole positions (a $ref, `true`) whose nodes join these once every
// position is compiled (a $ref may name a schema still being compiled: recursion).
struct Union {
  std::vector<uint16_t> nodes, positions;
  void add(const Union& u) {
    nodes.insert(nodes.end(), u.nodes.begin(), u.nodes.end());
    positions.insert(positions.end(), u.positions.begin(), u.positions.end());
  }
};

class Compiler {
 public:
  Compiler(const Value& root, SchemaBudget* shared)
      : root_(root), g_(std::make_shared<JsonSchema>()), budget_(shared ? *shared : own_) {}

  std::shared_ptr<const JsonSchema> run() {
    g_->root = position(root_, "");
    // Each position's table, from its nodes and those of the positions it takes in (resolved depth first).
    std::vector<uint8_t> state(g_->positions.size(), 0);  // 0 new, 1 resolving, 2 done
    for (size_t p = 0; p < g_->positions.size(); ++p) resolve(uint16_t(p), state);
    // Branches that begin differently match different values, but two oneOf branches may list the same enum /
    // const value: one value matching two branches is what oneOf forbids.
    for (const auto& [at, own] : one_of_) {
      std::set<std::string> seen;
      for (uint16_t p : own)
        for (uint16_t n : g_->positions[p].branches)
          if (auto it = literal_texts_.find(n); it != literal_texts_.end())
            for (const auto& text : it->second)
              if (!seen.insert(text).second) refuse(at, "two oneOf branches both accept " + text);
    }
    compute_nesting_need(*g_);
    if (g_->position_need[g_->root] > JsonSchema::kMaxDepth)
      refuse("", "no document fits within " + std::to_string(JsonSchema::kMaxDepth) +
                     " nested objects / arrays (a required property or minItems that recurses without end?)");
    return g_;
  }

 private:
  uint16_t new_position(const std::string& pointer) {
    if (g_->positions.size() >= kNone - 1) refuse("", "too many schemas");
    g_->positions.emplace_back();
    pending_.emplace_back();
    where_.push_back(pointer);
    return uint16_t(g_->positions.size() - 1);
  }

  const std::vector<uint16_t>& resolve(uint16_t p, std::vector<uint8_t>& state) {
    if (state[p] == 1)
      refuse(where_[p], "$ref refers back to this schema before any object or array (it would never end)");
    if (state[p] == 0) {
      state[p] = 1;
      std::vector<uint16_t> nodes = pending_[p].nodes;
      for (uint16_t q : pending_[p].positions) {
        const auto& more = resolve(q, state);
        nodes.insert(nodes.end(), more.begin(), more.end());
      }
      fill(p, std::move(nodes), where_[p]);
      state[p] = 2;
    }
    return g_->positions[p].branches;
  }
  uint16_t new_node(const JsonSchema::Node& n) {
    if (g_->nodes.size() >= kNone - 1) refuse("", "too many schemas");
    g_->nodes.push_back(n);
    return uint16_t(g_->nodes.size() - 1);
  }

  // A value position for schema `s`: a $ref shares its target's position (what makes recursion possible).
  uint16_t position(const Value& s, const std::string& pointer) {
    if (const Value* r = s.is_object() ? s.find("$ref") : nullptr) {
      only_annotations_beside(s, "$ref", pointer);
      return ref(*r, child(pointer, "$ref"));
    }
    const uint16_t p = new_position(pointer);
    Union u = branches(s, pointer);
    pending_[p] = std::move(u);
    return p;
  }

  uint16_t ref(const Value& r, const std::string& at) {
    if (!r.is_string() || r.as_string().empty() || r.as_string()[0] != '#')
      refuse(at, "$ref must be a local reference (\"#\", \"#/$defs/Name\", \"#/definitions/Name\")");
    const std::string target = r.as_string().substr(1);
    if (auto it = refs_.find(target); it != refs_.end()) return it->second;
    const Value* v = &root_;
    for (size_t i = 1; i <= target.size() && !target.empty();) {
      if (target[0] != '/') refuse(at, "$ref \"" + r.as_string() + "\" is not a JSON pointer");
      size_t end = target.find('/', i);
      if (end == std::string::npos) end = target.size();
      std::string key;
      for (size_t k = i; k < end; ++k) {
        if (target[k] == '~' && k + 1 < end && (target[k + 1] == '0' || target[k + 1] == '1')) {
          key += target[++k] == '0' ? '~' : '/';
        } else {
          key += target[k];
        }
      }
      v = v->find(key);
      if (!v) refuse(at, "$ref \"" + r.as_string() + "\" points at nothing");
      i = end + 1;
    }
    const uint16_t p = new_position(target);
    refs_[target] = p;
    Union u = branches(*v, target);
    pending_[p] = std::move(u);
    return p;
  }

  void only_annotations_beside(const Value& s, std::string_view keyword, const std::string& pointer,
                               std::string_view also = {}) {
    for (const auto& [k, v] : s.as_object())
      if (k != keyword && k != also && !one_of(k, kAnnotations))
        refuse(pointer, "\"" + k + "\" beside \"" + std::string(keyword) + "\" is not supported");
  }

  // The nodes a schema's value may be: one per type (or the merged literals of an anyOf of enums).
  Union branches(const Value& s, const std::string& pointer) {
    if (s.is_bool()) {
      if (!s.as_bool()) refuse(pointer, "the schema false matches nothing");
      return {{}, {any()}};
    }
    if (!s.is_object()) refuse(pointer, "a schema must be an object or a boolean");
    for (const auto& [k, v] : s.as_object())
      if (!one_of(k, kAnnotations) && !one_of(k, kKeywords))
        refuse(pointer, "\"" + k + "\" is not supported (supported: type, properties, required, "
                        "additionalProperties, items, minItems, maxItems, minLength, maxLength, enum, const, anyOf, "
                        "oneOf, $ref, minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf, format, allOf, "
                        "prefixItems, pattern, minProperties, maxProperties, patternProperties, propertyNames)");
    if (const Value* r = s.find("$ref")) {
      only_annotations_beside(s, "$ref", pointer);
      return {{}, {ref(*r, child(pointer, "$ref"))}};
    }
    if (const Value* all = s.find("allOf")) return all_of(s, *all, pointer);
    for (const char* alt : {"anyOf", "oneOf"}) {
      const Value* list = s.find(alt);
      if (!list) continue;
      only_annotations_beside(s, alt, pointer);
      const std::string at = child(pointer, alt);
      if (!list->is_array() || list->as_array().empty()) refuse(at, std::string(alt) + " must be a non-empty list");
      Union out;
      std::vector<uint16_t> own;  // oneOf: each branch its own position, to check once resolved
      for (size_t i = 0; i < list->as_array().size(); ++i) {
        const std::string branch_at = child(at, std::to_string(i));
        Union b = branches(list->as_array()[i], branch_at);
        if (alt == std::string_view("oneOf")) {
          own.push_back(new_position(branch_at));
          pending_[own.back()] = std::move(b);
          b = {{}, {own.back()}};
        }
        out.add(b);
      }
      if (!own.empty()) one_of_.emplace_back(at, std::move(own));
      return out;
    }
    std::vector<std::string> types;
    if (const Value* t = s.find("type")) {
      const std::string at = child(pointer, "type");
      for (const Value& name : t->is_array() ? t->as_array() : json::Array{*t}) {
        if (!name.is_string() || !one_of(name.as_string(), kTypes))
          refuse(at, "type must be one of object, array, string, number, integer, boolean, null (or a list)");
        if (std::find(types.begin(), types.end(), name.as_string()) == types.end()) types.push_back(name.as_string());
      }
      if (types.empty()) refuse(at, "type must not be an empty list");
    }
    if (s.find("enum") || s.find("const")) return {{enumeration(s, pointer, types)}, {}};
    if (types.empty()) {
      if (s.find("properties") || s.find("required") || s.find("additionalProperties") || s.find("minProperties") ||
          s.find("maxProperties") || s.find("patternProperties") || s.find("propertyNames"))
        types.push_back("object");
      if (s.find("items") || s.find("prefixItems") || s.find("minItems") || s.find("maxItems"))
        types.push_back("array");
      if (s.find("minLength") || s.find("maxLength") || s.find("format") || s.find("pattern"))
        types.push_back("string");
      if (has_number_bounds(s)) {
        const Value* step = s.find("multipleOf");
        types.push_back(step && step->is_integer() ? "integer" : "number");
      }
      if (types.empty()) return {{}, {any()}};
    }
    // "number" takes every "integer" too: one node, or the first byte could not tell them apart.
    if (std::find(types.begin(), types.end(), "number") != types.end())
      std::erase(types, std::string("integer"));
    Union out;
    for (const auto& t : types) out.nodes.push_back(typed(s, pointer, t));
    return out;
  }

  // allOf: one schema that constrains the value, beside any that do not (true, {}, annotations only): pydantic
  // and others wrap a lone $ref so. Intersections of two real schemas are refused.
  Union all_of(const Value& s, const Value& list, const std::string& pointer) {
    only_annotations_beside(s, "allOf", pointer);
    const std::string at = child(pointer, "allOf");
    if (!list.is_array() || list.as_array().empty()) refuse(at, "allOf must be a non-empty list");
    const Value* only = nullptr;
    std::string only_at;
    for (size_t i = 0; i < list.as_array().size(); ++i) {
      const Value& b = list.as_array()[i];
      const bool idle = (b.is_bool() && b.as_bool()) ||
                        (b.is_object() && std::all_of(b.as_object().begin(), b.as_object().end(), [](const auto& m) {
                           return one_of(m.first, kAnnotations);
                         }));
      if (idle) continue;
      if (only) refuse(at, "allOf with more than one schema that constrains the value is not supported");
      only = &b, only_at = child(at, std::to_string(i));
    }
    if (!only) return {{}, {any()}};
    return branches(*only, only_at);
  }

  uint16_t typed(const Value& s, const std::string& pointer, const std::string& type) {
    JsonSchema::Node n;
    if (type == "object") return object(s, pointer);
    if (type == "array") {
      n.kind = Kind::array;
      const Value* items = s.find("items");
      if (items && items->is_array())
        refuse(child(pointer, "items"), "items as a list (draft 4 tuples) is not supported: use prefixItems");
      n.min = count_field(s, "minItems", pointer, 0);
      n.max = count_field(s, "maxItems", pointer, JsonSchema::kUnbounded);
      std::vector<const Value*> tuple;  // prefixItems: the first items' own schemas
      if (const Value* prefix = s.find("prefixItems")) {
        if (!prefix->is_array()) refuse(child(pointer, "prefixItems"), "prefixItems must be a list");
        for (const Value& v : prefix->as_array()) tuple.push_back(&v);
      }
      const bool closed = items && items->is_bool() && !items->as_bool();  // no item past the tuple
      if (closed) n.max = std::min<uint32_t>(n.max, uint32_t(tuple.size()));
      n.child = items && !closed ? position(*items, child(pointer, "items")) : any();
      if (!tuple.empty()) {
        n.first_property = uint32_t(g_->properties.size());
        n.num_properties = uint32_t(tuple.size());
        g_->properties.resize(g_->properties.size() + tuple.size());
        const std::string at = child(pointer, "prefixItems");
        for (size_t i = 0; i < tuple.size(); ++i)
          g_->properties[n.first_property + i].value = position(*tuple[i], child(at, std::to_string(i)));
      }
    } else if (type == "string") {
      n.kind = Kind::string;
      n.min = count_field(s, "minLength", pointer, 0);
      n.max = count_field(s, "maxLength", pointer, JsonSchema::kUnbounded);
      if (const Value* f = s.find("format")) {
        const std::string at = child(pointer, "format");
        if (!f->is_string()) refuse(at, "format must be a string");
        const StringFormat format = string_format(f->as_string());
        if (format == StringFormat::none)
          refuse(at, "format \"" + f->as_string() + "\" is not supported (supported: " +
                         std::string(kStringFormats) + ")");
        if (s.find("pattern")) refuse(pointer, "pattern beside format is not supported");
        n.email = format == StringFormat::email;
        if (n.email && n.min <= n.max && !email_viable(EmailSoFar{}, 0, n.min, n.max))
          refuse(pointer, "no email address has minLength / maxLength characters");
        if (!n.email) {  // a shared DFA, outside the patterns' state budget below
          if (g_->patterns.size() >= kNone - 1) refuse("", "too many patterns");
          g_->patterns.push_back(format_pattern(format));
          n.pattern = uint16_t(g_->patterns.size() - 1);
        }
      }
      if (const Value* re = s.find("pattern")) {
        const std::string at = child(pointer, "pattern");
        if (!re->is_string()) refuse(at, "pattern must be a string");
        if (g_->patterns.size() >= kNone - 1) refuse("", "too many patterns");
        g_->patterns.push_back(std::make_shared<const StringPattern>(compile_string_pattern(re->as_string(), at)));
        n.pattern = uint16_t(g_->patterns.size() - 1);
        spend_states(*g_->patterns.back(), at);
      }
      if (n.pattern != kNone && (s.find("minLength") || s.find("maxLength"))) {
        if (n.min > n.max) refuse(pointer, "minLength exceeds maxLength");
        if (g_->string_lengths.size() >= kNone - 1) refuse("", "too many bounded patterns");
        g_->string_lengths.push_back(string_lengths(*g_->patterns[n.pattern], n.min, n.max, pointer));
        n.lengths = uint16_t(g_->string_lengths.size() - 1);
        // A request's length tables stay within 4 MiB in all, as its patterns' DFAs do within 8 MiB.
        budget_.length_words += g_->string_lengths.back().bits.size();
        if (budget_.length_words * 64 > 8 * StringLengths::kMaxBits)
          refuse(pointer, "the schema's patterned strings with minLength / maxLength need over 4 MiB of tables");
      }
    } else if (type == "number" || type == "integer") {
      n.kind = type == "number" ? Kind::number : Kind::integer;
      if (has_number_bounds(s)) {
        if (g_->number_bounds.size() >= kNone - 1) refuse("", "too many bounded numbers");
        g_->number_bounds.push_back(parse_number_bounds(s, pointer, n.kind == Kind::integer));
        n.bounds = uint16_t(g_->number_bounds.size() - 1);
      }
    } else {
      return literal(type == "boolean" ? std::vector<std::string>{"true", "false"} : std::vector<std::string>{"null"});
    }
    if (n.min > n.max) refuse(pointer, "the minimum (" + std::to_string(n.min) + ") exceeds the maximum (" +
                                           std::to_string(n.max) + ")");
    return new_node(n);
  }

  uint16_t object(const Value& s, const std::string& pointer) {
    const Value* props = s.find("properties");
    const Value* required = s.find("required");
    const Value* extra = s.find("additionalProperties");
    const std::string extra_at = child(pointer, "additionalProperties");
    if (extra && !extra->is_bool() && !extra->is_object())
      refuse(extra_at, "additionalProperties must be a boolean or a schema");
    JsonSchema::Node n;
    // Keys written, listed and other: the frame keeps them in 9 bits.
    n.min = count_field(s, "minProperties", pointer, 0);
    n.max = count_field(s, "maxProperties", pointer, JsonSchema::kUnbounded);
    for (const char* key : {"minProperties", "maxProperties"})
      if (count_field(s, key, pointer, 0) > 511)
        refuse(child(pointer, key), std::string(key) + " above 511 is not supported");
    if (n.min > n.max) refuse(pointer, "minProperties exceeds maxProperties");
    const bool closed = extra && extra->is_bool() && !extra->as_bool();
    const bool keyed = s.find("patternProperties") || s.find("propertyNames");
    if (!props && !required && (!closed || keyed)) {
      n.kind = Kind::map;
      n.child = closed ? kNone : extra && extra->is_object() ? position(*extra, extra_at) : any();
      if (keyed) n.keys = key_pattern(s, pointer, n.child, {});
      return new_node(n);
    }
    // Beside properties an absent additionalProperties means false (documents hold the listed keys only).
    if (extra && !closed) n.child = extra->is_object() ? position(*extra, extra_at) : any();
    std::vector<std::string> names, quoted;
    std::vector<const Value*> schemas;
    if (props) {
      if (!props->is_object()) refuse(child(pointer, "properties"), "properties must be an object");
      for (const json::Member* m : props->members_in_source_order()) {
        names.push_back(m->first);
        quoted.push_back(json::quote(m->first));
        schemas.push_back(&m->second);
      }
      if (names.size() > size_t(JsonSchema::kMaxProperties))
        refuse(child(pointer, "properties"),
               "more than " + std::to_string(JsonSchema::kMaxProperties) + " properties in one object");
    }
    n.kind = Kind::object;
    if (required) {
      const std::string at = child(pointer, "required");
      if (!required->is_array()) refuse(at, "required must be a list of property names");
      for (const Value& r : required->as_array()) {
        const auto it = r.is_string() ? std::find(names.begin(), names.end(), r.as_string()) : names.end();
        if (it == names.end())
          refuse(at, "required names " + compact(r) + ", which is not in properties (a required key must be listed)");
        n.required |= uint64_t(1) << (it - names.begin());
      }
    }
    n.first_property = uint32_t(g_->properties.size());
    n.num_properties = uint32_t(names.size());
    g_->properties.resize(g_->properties.size() + names.size());
    if (uint32_t(std::popcount(n.required)) > n.max)
      refuse(pointer, "maxProperties (" + std::to_string(n.max) + ") is below the count of required properties");
    n.trie = g_->add_trie(quoted, /*keys=*/true);
    if (keyed) n.keys = key_pattern(s, pointer, n.child, names);
    if (g_->other_key_positions(n).empty() && n.min > names.size())
      refuse(pointer, "minProperties (" + std::to_string(n.min) + ") is above the count of properties allowed");
    const uint16_t id = new_node(n);
    const std::string props_at = child(pointer, "properties");
    for (size_t i = 0; i < names.size(); ++i)
      g_->properties[n.first_property + i].value = position(*schemas[i], child(props_at, names[i]));
    return id;
  }

  // patternProperties / propertyNames: the object's key DFA (engine/json_schema_keys.h), other keys' values at
  // `additional` (kNone: none), `listed` its properties' names.
  uint16_t key_pattern(const Value& s, const std::string& pointer, uint16_t additional,
                       const std::vector<std::string>& listed) {
    JsonSchema::KeyPattern keys;
    auto dfa = std::make_shared<const StringPattern>(compile_key_pattern(
        s, pointer, listed, additional, [&](const Value& v, const std::string& at) { return position(v, at); },
        keys.value, [&](const StringPattern& p, const std::string& at) { spend_states(p, at); }));
    spend_states(*dfa, pointer);
    if (g_->patterns.size() >= kNone - 1 || g_->key_patterns.size() >= kNone - 1) refuse("", "too many patterns");
    g_->patterns.push_back(std::move(dfa));
    keys.pattern = uint16_t(g_->patterns.size() - 1);
    for (uint16_t v : keys.value)
      if (v != kNone && std::find(keys.positions.begin(), keys.positions.end(), v) == keys.positions.end())
        keys.positions.push_back(v);
    g_->key_patterns.push_back(std::move(keys));
    return uint16_t(g_->key_patterns.size() - 1);
  }

  // Each DFA state is a 512-byte row: the DFAs a request compiles (kept, or the patternProperties a key DFA is the
  // product of, counted as each is compiled) stay within 8 MiB in all.
  void spend_states(const StringPattern& dfa, const std::string& at) {
    budget_.pattern_states += dfa.next.size();
    if (budget_.pattern_states > 8 * StringPattern::kMaxStates)
      refuse(at, "the schema's patterns need more than " + std::to_string(8 * StringPattern::kMaxStates) +
                     " DFA states in all");
  }

  uint16_t enumeration(const Value& s, const std::string& pointer, const std::vector<std::string>& types) {
    only_annotations_beside(s, s.find("enum") ? "enum" : "const", pointer, "type");
    std::vector<const Value*> values;
    if (const Value* e = s.find("enum")) {
      if (!e->is_array() || e->as_array().empty())
        refuse(child(pointer, "enum"), "enum must be a non-empty list");
      for (const Value& v : e->as_array()) values.push_back(&v);
    } else {
      values.push_back(s.find("const"));
    }
    std::vector<std::string> texts;
    for (const Value* v : values)
      if (types.empty() || std::any_of(types.begin(), types.end(), [&](const auto& t) { return has_type(*v, t); }))
        texts.push_back(compact(*v));
    if (texts.empty()) refuse(pointer, "no value of enum / const has one of the schema's types");
    return literal(texts);
  }

  uint16_t literal(std::vector<std::string> texts) {
    std::sort(texts.begin(), texts.end());
    texts.erase(std::unique(texts.begin(), texts.end()), texts.end());
    JsonSchema::Node n;
    n.kind = Kind::literal;
    n.trie = g_->add_trie(texts, /*keys=*/false);
    const uint16_t id = new_node(n);
    literal_texts_[id] = std::move(texts);
    return id;
  }

  // The first bytes a node's values can start with.
  std::vector<uint8_t> first_bytes(uint16_t node) const {
    const auto& n = g_->nodes[node];
    switch (n.kind) {
      case Kind::object:
      case Kind::map: return {'{'};
      case Kind::array: return {'['};
      case Kind::string: return {'"'};
      case Kind::number:
      case Kind::integer: return {'-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9'};
      case Kind::literal: {
        std::vector<uint8_t> out;
        for (const auto& e : g_->trie[n.trie].edges) out.push_back(e.first);
        return out;
      }
    }
    return {};
  }

  void fill(uint16_t p, std::vector<uint16_t> branches, const std::string& pointer) {
    // Several enums / consts among the branches become one literal set (anyOf of consts is a common spelling).
    std::vector<std::string> texts;
    std::vector<uint16_t> kept;
    int literals = 0;
    for (uint16_t b : branches) {
      if (auto it = literal_texts_.find(b); it != literal_texts_.end()) {
        texts.insert(texts.end(), it->second.begin(), it->second.end());
        ++literals;
      } else if (std::find(kept.begin(), kept.end(), b) == kept.end()) {
        kept.push_back(b);
      }
    }
    if (literals == 1) {
      for (uint16_t b : branches)
        if (literal_texts_.count(b)) kept.push_back(b);
    } else if (literals > 1) {
      kept.push_back(literal(texts));
    }
    auto& pos = g_->positions[p];
    pos.by_byte.fill(kNone);
    for (uint16_t b : kept) {
      for (uint8_t c : first_bytes(b)) {
        if (pos.by_byte[c] != kNone)
          refuse(pointer, "two alternatives (anyOf / oneOf / a type list / enum) can both begin with '" +
                              std::string(1, char(c)) + "'; only alternatives that begin differently are supported");
        pos.by_byte[c] = b;
      }
    }
    pos.branches = std::move(kept);
  }

  // Any JSON value: made once, its containers holding any values again.
  uint16_t any() {
    if (any_ != kNone) return any_;
    any_ = new_position("");
    JsonSchema::Node map, array, string, number;
    map.kind = Kind::map, map.child = any_;
    array.kind = Kind::array, array.child = any_;
    string.kind = Kind::string;
    number.kind = Kind::number;
    pending_[any_].nodes = {new_node(map), new_node(array), new_node(string), new_node(number),
                            literal({"true", "false", "null"})};
    return any_;
  }

  const Value& root_;
  std::shared_ptr<JsonSchema> g_;
  std::map<std::string, uint16_t> refs_;  // a $ref's target pointer -> its position
  std::vector<Union> pending_;            // per position, until resolve()
  std::vector<std::string> where_;        // per position: its schema's JSON pointer
  std::vector<std::pair<std::string, std::vector<uint16_t>>> one_of_;  // each oneOf's pointer and branch positions
  std::map<uint16_t, std::vector<std::string>> literal_texts_;
  uint16_t any_ = kNone;
  SchemaBudget own_;
  SchemaBudget& budget_;  // own_, or the one a request's schemas share
};

}  // namespace

std::shared_ptr<const JsonSchema> compile_json_schema(const Value& schema, SchemaBudget* shared) {
  return Compiler(schema, shared).run();
}

}  // namespace attnzoo
