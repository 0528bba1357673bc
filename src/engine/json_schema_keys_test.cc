// The key DFA of patternProperties / propertyNames (engine/json_schema_keys.h) against std::regex (ECMAScript, as
// JSON Schema reads patterns) on every key of up to five characters over a small alphabet: a key ends in a state
// tagged with the one matching pattern's position, additionalProperties' when none matches, and nowhere when
// propertyNames rejects it or nothing takes it; every prefix of an accepted key stays alive, and a dead byte leaves
// no accepted key behind it.
#include "engine/json_schema_keys.h"

#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/json_schema.h"
#include "engine/json_schema_recognizer.h"
#include "loader/json.h"

namespace attnzoo {
namespace {

struct Case {
  std::vector<std::string> patterns;
  std::string names;  // propertyNames' pattern ("": none)
  uint32_t min_length, max_length;
  bool additional;
};

void expect_exact(const Case& c) {
  std::vector<std::shared_ptr<const StringPattern>> keep;
  KeyRules rules;
  keep.push_back(std::make_shared<const StringPattern>(compile_string_pattern("", "")));
  rules.names.push_back(keep.back().get());
  if (!c.names.empty()) {
    keep.push_back(std::make_shared<const StringPattern>(compile_string_pattern(c.names, "")));
    rules.names.push_back(keep.back().get());
  }
  rules.min_length = c.min_length, rules.max_length = c.max_length;
  for (size_t i = 0; i < c.patterns.size(); ++i) {
    keep.push_back(std::make_shared<const StringPattern>(compile_string_pattern(c.patterns[i], "")));
    rules.patterns.push_back({keep.back().get(), uint16_t(10 + i), c.patterns[i]});
  }
  rules.additional = c.additional ? 99 : KeyRules::kNone;
  std::vector<uint16_t> value;
  const StringPattern dfa = key_automaton(rules, value, "");
  std::vector<std::regex> res;
  for (const auto& p : c.patterns) res.emplace_back(p, std::regex::ECMAScript);
  const std::regex names(c.names.empty() ? std::string("") : c.names, std::regex::ECMAScript);
  int taken = 0;
  std::vector<std::string> keys = {""};
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i].size() < 4)
      for (char ch : std::string("ab1_-")) keys.push_back(keys[i] + ch);
  for (const std::string& key : keys) {
    uint16_t want = KeyRules::kNone;
    if (std::regex_search(key, names) && key.size() >= c.min_length && key.size() <= c.max_length) {
      for (size_t k = 0; k < res.size(); ++k)
        if (std::regex_search(key, res[k])) want = uint16_t(10 + k);
      if (want == KeyRules::kNone && c.additional) want = 99;
    }
    uint16_t s = dfa.start;
    for (char ch : key)
      if (s != StringPattern::kDead) s = dfa.next[s][uint8_t(ch)];
    const uint16_t got = s == StringPattern::kDead || !dfa.accepting[s] ? KeyRules::kNone : value[s];
    ASSERT_EQ(got, want) << "key \"" << key << "\"";
    taken += got != KeyRules::kNone;
  }
  EXPECT_GT(taken, 5);  // the reference is not vacuous
}

void expect_refused(const Case& c, const std::string& words) {
  try {
    expect_exact(c);
    FAIL() << "accepted; expected: " << words;
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(JsonSchemaKeys, KeyDfaAgreesWithStdRegex) {
  expect_exact({{"^a[0-9_]*$", "^b"}, "", 0, 0xFFFFFFFF, true});
  expect_exact({{"^a", "-$"}, "^[ab1]+$", 0, 0xFFFFFFFF, false});  // disjoint once propertyNames applies
  expect_exact({{"_"}, "", 2, 3, false});
  expect_exact({{"^1", "^b-"}, "b", 1, 4, true});
  // Anchors bind to their top-level branch (ECMA: ^a|1 is (^a)|(1), the second branch anywhere in the key).
  expect_exact({{"^a|1"}, "", 0, 0xFFFFFFFF, true});
  expect_exact({{"_$|^b"}, "^1|a$", 0, 0xFFFFFFFF, true});
}

// Feeds `doc` byte by byte: npos when it is taken whole and may end there, else the bytes taken.
size_t take(const JsonSchema& g, const std::string& doc) {
  JsonSchemaRecognizer r(g);
  size_t n = 0;
  while (n < doc.size() && r.push(uint8_t(doc[n]))) ++n;
  return n == doc.size() && r.complete() ? std::string::npos : n;
}

std::string refusal(const std::string& schema) {
  try {
    compile_json_schema(json::parse(schema));
  } catch (const ArgumentError& e) {
    return e.what();
  }
  return "";
}

TEST(JsonSchemaKeys, AnchoredBranchOfAPatternPropertyMatchesAnywhere) {
  // "xI_" holds I_: the pattern's second branch matches it, so its value is an integer, not additionalProperties'.
  const auto g = compile_json_schema(json::parse(R"({"type": "object", "patternProperties": {"^S_|I_":
      {"type": "integer"}}, "additionalProperties": {"type": "string"}})"));
  EXPECT_EQ(take(*g, R"({"xI_":1,"S_a":2,"I_":3,"q":"s"})"), std::string::npos);
  EXPECT_EQ(take(*g, R"({"xI_":"s"})"), 7u);
  EXPECT_EQ(take(*g, R"({"xS_":"s"})"), std::string::npos);
}

TEST(JsonSchemaKeys, MinPropertiesCountsOnlyTheKeysTheKeyDfaAllows) {
  // propertyNames allows the listed keys only: additionalProperties true adds none, so both must be written, and
  // "b" first would leave nothing to make up the second key.
  const auto g = compile_json_schema(json::parse(R"({"type": "object", "properties": {"a": {"type": "integer"},
      "b": {"type": "integer"}}, "additionalProperties": true, "propertyNames": {"enum": ["a", "b"]},
      "minProperties": 2})"));
  EXPECT_EQ(take(*g, R"({"a":1,"b":2})"), std::string::npos);
  EXPECT_EQ(take(*g, R"({"b":1})"), 2u);
  EXPECT_EQ(take(*g, R"({"a":1})"), 6u);
  // Patterns without additionalProperties add keys: two keys are possible with one listed.
  const auto p = compile_json_schema(json::parse(R"({"properties": {"a": {}}, "patternProperties": {"^x": {}},
      "minProperties": 2})"));
  EXPECT_EQ(take(*p, R"({"x1":1,"a":2})"), std::string::npos);
  EXPECT_EQ(take(*p, R"({"a":1})"), 6u);
  // ... and a bound only the listed keys would have to meet, beside a key DFA that adds none, is refused.
  EXPECT_NE(refusal(R"({"properties": {"a": {}}, "additionalProperties": true, "propertyNames": {"const": "a"},
      "minProperties": 2})").find("minProperties (2) is above"), std::string::npos);
}

TEST(JsonSchemaKeys, PatternCountAndStatesAreBoundedAsTheyCompile) {
  // More patterns than the cap: refused before any is compiled, naming patternProperties; quickly even for a
  // request's worth of them (each kept DFA of these would be some 500 KB).
  const auto patterns = [](int count, const std::string& body) {
    std::string out = R"({"type": "object", "patternProperties": {)";
    for (int i = 0; i < count; ++i) out += (i ? "," : "") + json::quote("^" + std::to_string(i) + body) + ":{}";
    return out + "}}";
  };
  const std::string why = refusal(patterns(65, "a{999}$"));
  ASSERT_NE(why.find("#/patternProperties: more than 64 patterns"), std::string::npos) << why;
  const std::string hostile = patterns(100000, "a{999}$");
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_NE(refusal(hostile).find("more than 64 patterns"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  // Within the cap each pattern's states count against the request's budget as it is compiled: the ninth of these
  // (1,992 states each) passes 16,384 and is named, before any product is built.
  const std::string over = refusal(patterns(12, "a{1000}b{990}$"));
  EXPECT_NE(over.find("#/patternProperties/^8a{1000}b{990}$: the schema's patterns need more than 16384 DFA states"),
            std::string::npos)
      << over;
}

TEST(JsonSchemaKeys, PropertyNamesEnumBesideConstIsRefused) {
  const std::string why = refusal(R"({"propertyNames": {"enum": ["a", "b"], "const": "a"}})");
  EXPECT_NE(why.find("#/propertyNames: \"const\" beside \"enum\" is not supported"), std::string::npos) << why;
}

TEST(JsonSchemaKeys, PatternsOneKeyCanMatchTwiceAreRefused) {
  expect_refused({{"^a", "1$"}, "", 0, 0xFFFFFFFF, false}, "can both match one key");
  expect_refused({{"^a", "-$"}, "", 0, 3, true}, "can both match one key");
  expect_refused({{"^a"}, "^b", 0, 0xFFFFFFFF, false}, "no key");
}

TEST(JsonSchemaKeys, ListedKeysNeverEndAsOtherKeys) {
  // "id" is listed (once); "idx" / "i" are other keys of the additionalProperties' schema only if they match no
  // pattern; "x1" a pattern's. A second "id" is the listed key again, refused, never an other key.
  const auto g = compile_json_schema(json::parse(R"({"properties": {"id": {"type": "integer"}},
      "patternProperties": {"^x[0-9]$": {"type": "integer"}}, "additionalProperties": {"type": "boolean"}})"));
  const auto take = [&](const std::string& doc) {
    JsonSchemaRecognizer r(*g);
    size_t n = 0;
    while (n < doc.size() && r.push(uint8_t(doc[n]))) ++n;
    return n == doc.size() && r.complete() ? std::string::npos : n;
  };
  EXPECT_EQ(take(R"({"idx":true,"id":1,"x1":2,"i":false})"), std::string::npos);
  EXPECT_EQ(take(R"({"id":1,"id":true})"), 11u);  // the second key's closing quote
  EXPECT_EQ(take(R"({"x1":true})"), 6u);           // a pattern's key takes its schema, not additionalProperties'
  EXPECT_EQ(take(R"({"x12":true})"), std::string::npos);

  // Other keys leave the listed names out: once "id" is written no key can follow that could only become "id".
  const auto only = compile_json_schema(json::parse(R"({"properties": {"id": {}}, "additionalProperties": true,
      "propertyNames": {"enum": ["id", "idx"]}})"));
  JsonSchemaRecognizer r(*only);
  ASSERT_TRUE(r.push(std::string_view(R"({"id":1,"id)")));
  EXPECT_FALSE(r.push(uint8_t('"')));  // "id" again: the listed key a second time
  EXPECT_TRUE(r.push(std::string_view(R"(x":2})")));
  EXPECT_TRUE(r.complete());
  // propertyNames allows the listed key only: no other key at all, so after it the object can only close.
  const auto none = compile_json_schema(json::parse(R"({"properties": {"id": {}}, "additionalProperties": true,
      "propertyNames": {"const": "id"}})"));
  JsonSchemaRecognizer s(*none);
  ASSERT_TRUE(s.push(std::string_view(R"({"id":1)")));
  EXPECT_FALSE(s.push(uint8_t(',')));
  EXPECT_TRUE(s.push(uint8_t('}')));
}

}  // namespace
}  // namespace attnzoo
