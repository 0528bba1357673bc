// Structured outputs' schema compiler and recognizer (engine/json_schema.h, json_schema_recognizer.h): documents
// that follow a schema are accepted byte by byte and end where they should; single wrong bytes are refused where
// they occur; every keyword outside the subset is refused with its name and JSON pointer; and TokenTrie's walk
// from a schema state allows exactly the tokens the recognizer accepts one by one (the string-plain shortcut only
// where the string is free). Python's json and a validator of its own check the recognizer on every prefix of many
// documents in python/tests/test_json_schema.py.
#include "engine/json_schema.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/json_constraint.h"
#include "engine/json_schema_recognizer.h"
#include "loader/json.h"

namespace attnzoo {
namespace {

std::shared_ptr<const JsonSchema> compile(const std::string& text) { return compile_json_schema(json::parse(text)); }

// How many leading bytes the recognizer takes, and whether it may end there.
std::pair<size_t, bool> run(const JsonSchema& s, const std::string& text) {
  JsonSchemaRecognizer r(s);
  size_t n = 0;
  while (n < text.size() && r.push(uint8_t(text[n]))) ++n;
  return {n, r.can_end()};
}

void expect_valid(const JsonSchema& s, const std::string& text) {
  const auto [n, end] = run(s, text);
  EXPECT_EQ(n, text.size()) << text << " refused at byte " << n << ": " << text.substr(0, n + 1);
  EXPECT_TRUE(end) << text << " is whole";
}

// Refused at byte `at` (the first byte no valid document has there), or, at = text.size(), taken but not whole.
void expect_invalid(const JsonSchema& s, const std::string& text, size_t at) {
  const auto [n, end] = run(s, text);
  EXPECT_EQ(n, at) << text;
  if (at == text.size()) EXPECT_FALSE(end) << text;
}

constexpr const char* kPerson = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 4},
    "age": {"type": "integer"},
    "tags": {"type": "array", "items": {"enum": ["a", "b", 3, null, {"k": [1, true]}]}, "minItems": 1, "maxItems": 2},
    "pet": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/pet"}]}
  },
  "required": ["name", "tags"],
  "$defs": {"pet": {"type": "object", "properties": {"kind": {"const": "cat"}}, "required": ["kind"]}}
})";

TEST(JsonSchema, ObjectsFollowThePropertiesInOrderWithTheRequiredOnesPresent) {
  const auto s = compile(kPerson);
  expect_valid(*s, R"({"name":"Ann","tags":["a"]})");
  expect_valid(*s, R"({ "name" : "Ann", "age": -12, "tags": [3, {"k":[1,true]}], "pet": {"kind": "cat"} })");
  expect_valid(*s, R"({"name":"\u00e9\n","tags":[null],"pet":null})");
  expect_invalid(*s, R"({"age":1,"name":"A","tags":["a"]})", 2);   // out of order: "name" comes first
  expect_invalid(*s, R"({"name":"A","pet":null})", 13);             // "tags" is required before "pet"
  expect_invalid(*s, R"({"name":"A"})", 11);                        // ... and before the end
  expect_invalid(*s, R"({"name":"","tags":["a"]})", 9);             // minLength 1
  expect_invalid(*s, R"({"name":"ABCDE","tags":["a"]})", 13);       // maxLength 4
  expect_invalid(*s, R"({"name":"A","age":1.5,"tags":["a"]})", 19);  // integer: no fraction
  expect_invalid(*s, R"({"name":"A","tags":[]})", 20);              // minItems 1
  expect_invalid(*s, R"({"name":"A","tags":["a","b","a"]})", 27);   // maxItems 2
  expect_invalid(*s, R"({"name":"A","tags":["c"]})", 21);           // not in the enum
  expect_invalid(*s, R"({"name":"A","tags":[{"k": [1,true]}]})", 25);  // enum values are written compactly
  expect_invalid(*s, R"({"name":"A","tags":["a"],"pet":{}})", 32);  // pet.kind is required
  expect_invalid(*s, R"({"name":"A","tags":["a"],"x":1})", 26);     // no other property
  expect_invalid(*s, R"({"name":"A","tags":["a"],"pet":null,)", 35);  // nothing left to write after ','
  expect_invalid(*s, R"({"name":"A","tags":["a"]} )", 25);          // nothing after the document
}

TEST(JsonSchema, ScalarsAtTheTopMayEndWhereTheyCouldGoOn) {
  const auto num = compile(R"({"type": "number"})");
  JsonSchemaRecognizer r(*num);
  EXPECT_TRUE(r.push(std::string_view("-1")));
  EXPECT_TRUE(r.can_end());
  EXPECT_FALSE(r.complete());
  EXPECT_TRUE(r.push(std::string_view("2.5e+3")));
  EXPECT_TRUE(r.can_end());
  expect_invalid(*num, "1.", 2);
  expect_invalid(*num, "01", 1);
  const auto e = compile(R"({"enum": [1, 12, "x"]})");
  expect_valid(*e, "1");
  expect_valid(*e, "12");
  expect_invalid(*e, "13", 1);
  JsonSchemaRecognizer x(*e);
  EXPECT_TRUE(x.push(std::string_view("\"x\"")));
  EXPECT_TRUE(x.complete()) << "a string enum value ends with its quote";
  const auto types = compile(R"({"type": ["string", "null", "integer"], "maxLength": 2})");
  expect_valid(*types, "null");
  expect_valid(*types, "\"ab\"");
  expect_valid(*types, "7");
  expect_invalid(*types, "\"abc\"", 3);
  expect_invalid(*types, "true", 0);
  // A surrogate escape in a bounded string would count one character for two escapes: refused.
  expect_invalid(*types, R"("\ud83d\ude00")", 4);
  expect_valid(*compile(R"({"type": "string"})"), R"("\ud83d\ude00")");
}

TEST(JsonSchema, RecursionIsBoundedByDepthWithoutDeadEnds) {
  // A tree: every node has a value and optional children; at kMaxDepth no container may open that cannot close.
  const auto s = compile(R"({"$ref": "#/definitions/node", "definitions": {"node": {"type": "object",
      "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/definitions/node"}}},
      "required": ["v"]}}})");
  std::string doc;
  for (int d = 0; d < 15; ++d) doc += R"({"v":1,"kids":[)";
  std::string tail;
  for (int d = 0; d < 15; ++d) tail += "]}";
  expect_valid(*s, doc + R"({"v":2})" + tail);
  // 16 objects and 16 arrays fill the 32 levels: the last array may close but not hold a node.
  JsonSchemaRecognizer r(*s);
  ASSERT_TRUE(r.push(std::string_view(doc + R"({"v":1,"kids":[)")));
  EXPECT_FALSE(r.push(uint8_t('{'))) << "depth 32 is full";
  EXPECT_TRUE(r.push(std::string_view("]}")));
  // An optional property whose value needs a level more than is left is not begun: its key is refused.
  const auto chain = compile(R"({"$defs": {"n": {"type": "object", "properties": {"kid": {"$ref": "#/$defs/n"},
      "v": {"type": "integer"}}}}, "$ref": "#/$defs/n"})");
  std::string kids;
  for (int d = 0; d < 31; ++d) kids += R"({"kid":)";
  JsonSchemaRecognizer c(*chain);
  ASSERT_TRUE(c.push(std::string_view(kids + "{")));
  EXPECT_FALSE(c.push(std::string_view("\"k"))) << "a 33rd object would be needed";
  EXPECT_TRUE(c.push(std::string_view("\"v\":1}")));
  // A map whose values are maps again: at the last level no key is begun, its value could not open.
  const auto maps = compile(R"({"type": "object", "additionalProperties": {"$ref": "#"}})");
  std::string keys;
  for (int d = 0; d < 31; ++d) keys += R"({"k":)";
  JsonSchemaRecognizer m(*maps);
  ASSERT_TRUE(m.push(std::string_view(keys + "{")));
  EXPECT_FALSE(m.push(uint8_t('"'))) << "a 33rd map would be needed";
  EXPECT_TRUE(m.push(std::string_view("}}")));
  // A required self-reference has no finite document.
  EXPECT_THROW(compile(R"({"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]})"),
               ArgumentError);
}

TEST(JsonSchema, MapsAndFreeValues) {
  const auto s = compile(R"({"type": "object", "additionalProperties": {"type": "integer"}})");
  expect_valid(*s, R"({"x": 1, "y\"": 2, "x": 3})");
  expect_invalid(*s, R"({"x": "1"})", 6);
  const auto any = compile("{}");
  expect_valid(*any, R"([{"a": [1, "b", null, {}]}, true])");
  expect_valid(*any, "\"s\"");
  expect_valid(*compile("true"), "false");
}

void expect_refused(const std::string& schema, const std::string& keyword, const std::string& pointer) {
  try {
    compile(schema);
    ADD_FAILURE() << schema << " was accepted";
  } catch (const ArgumentError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("response_format: ", 0), 0u) << m;
    EXPECT_NE(m.find(keyword), std::string::npos) << m;
    EXPECT_NE(m.find(" at " + pointer + ":"), std::string::npos) << m;
  }
}

TEST(JsonSchema, KeywordsOutsideTheSubsetAreRefusedByNameAndPointer) {
  expect_refused(R"j({"properties": {"a/b": {"type": "string", "pattern": "(?=x)"}}})j", "lookarounds",
                 "#/properties/a~1b/pattern");
  expect_refused(R"({"type": "string", "format": "hostname"})", "\"hostname\"", "#/format");
  expect_refused(R"({"type": "number", "multipleOf": "0.5"})", "multipleOf must be a positive number", "#/multipleOf");
  expect_refused(R"({"properties": {"n": {"type": "integer", "minimum": 5, "maximum": 4}}})", "no integer lies",
                 "#/properties/n");
  expect_refused(R"({"type": "array", "items": [{}]})", "tuples", "#/items");
  expect_refused(R"({"properties": {"xa": {}}, "patternProperties": {"^x": {}}})", "also matches patternProperties",
                 "#/properties/xa");
  expect_refused(R"({"patternProperties": {"^x": {}, "y$": {}}})", "can both match one key", "#/patternProperties");
  expect_refused(R"({"propertyNames": {"format": "email"}})", "only the formats", "#/propertyNames/format");
  expect_refused(R"({"propertyNames": {"minimum": 1}})", "\"minimum\" in propertyNames", "#/propertyNames");
  expect_refused(R"({"properties": {"e": {"type": "string", "format": "email", "maxLength": 4}}})",
                 "no email address has minLength / maxLength characters", "#/properties/e");
  expect_refused(R"({"properties": {"a": {}}, "required": ["a"], "maxProperties": 0})", "maxProperties (0)", "#");
  expect_refused(R"({"properties": {"a": {}}, "minProperties": 2})", "minProperties (2)", "#");
  expect_refused(R"({"type": "object", "maxProperties": 600})", "above 511", "#/maxProperties");
  expect_refused(R"({"anyOf": [{"type": "integer"}, {"type": "number"}]})", "begin with", "#");
  expect_refused(R"({"anyOf": [{"type": "object"}, {"properties": {"a": {}}}]})", "begin with '{'", "#");
  expect_refused(R"({"enum": ["a"], "minLength": 1})", "\"minLength\" beside \"enum\"", "#");
  expect_refused(R"({"$ref": "other.json#/x"})", "$ref", "#/$ref");
  expect_refused(R"({"$ref": "#/$defs/none"})", "points at nothing", "#/$ref");
  expect_refused(R"({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"})", "refers back",
                 "#/$defs/a");
  expect_refused(R"({"type": "strin"})", "type must be", "#/type");
  expect_refused(R"({"properties": {"a": {}}, "required": ["b"]})", "\"b\"", "#/required");
  expect_refused(R"({"type": "string", "minLength": 3, "maxLength": 2})", "exceeds", "#");
  expect_refused(R"({"type": "array", "minItems": -1})", "minItems", "#/minItems");
  expect_refused(R"({"enum": [1], "type": "string"})", "no value", "#");
  expect_refused(R"({"not": {}})", "\"not\"", "#");
  expect_refused(R"({"oneOf": [{"enum": ["a", true]}, {"type": "integer"}, {"$ref": "#/$defs/a"}],
                     "$defs": {"a": {"const": "a"}}})",
                 "both accept \"a\"", "#/oneOf");
  expect_refused("false", "matches nothing", "#");
}

// A keyword whose value has the wrong shape is refused by name and pointer too, as is a schema no document within
// kMaxDepth levels satisfies.
TEST(JsonSchema, MalformedKeywordsAreRefusedByNameAndPointer) {
  expect_refused(R"({"properties": {"a": 3}})", "a schema must be an object or a boolean", "#/properties/a");
  expect_refused(R"({"properties": [1]})", "properties must be an object", "#/properties");
  expect_refused(R"({"properties": {"a": {}}, "required": "a"})", "required must be a list", "#/required");
  expect_refused(R"({"additionalProperties": 1})", "additionalProperties must be", "#/additionalProperties");
  expect_refused(R"({"anyOf": []})", "anyOf must be a non-empty list", "#/anyOf");
  expect_refused(R"({"enum": []})", "enum must be a non-empty list", "#/enum");
  expect_refused(R"({"type": []})", "type must not be an empty list", "#/type");
  expect_refused(R"({"$ref": "#x"})", "is not a JSON pointer", "#/$ref");
  std::string many;
  for (int i = 0; i <= JsonSchema::kMaxProperties; ++i) many += (i ? ", \"p" : "\"p") + std::to_string(i) + "\": {}";
  expect_refused(R"({"properties": {)" + many + "}}", "more than 64 properties", "#/properties");
  expect_refused(R"({"$defs": {"a": {"properties": {"a": {"$ref": "#/$defs/a"}}, "required": ["a"]}},
                     "$ref": "#/$defs/a"})",
                 "no document fits", "#");
}

// Tokens of schema text, JSON pieces and random bytes, as a vocabulary.
std::vector<std::string> vocabulary() {
  std::vector<std::string> v = {"", "{", "}", "[", "]", "\"", ":", ",", " ", "{\"", "\":", "\": \"", "\",", "\"}",
                                "\"name", "name", "\"name\":\"", "na", "me", "\"tags\":[", "\"a\"", "\"b\"", "3",
                                ",\"", "\"age", "age\":", "pet", "\":null}", "null", "cat", "\"kind\":\"cat\"}",
                                "{\"k\":[1,true]}", "1.5", "-12", "\\u00e9", "\xc3\xa9", "\xc3", "\\", "\\n", "ab",
                                "abcd", "abcde", "\\ud83d", "kids", "\"v\":"};
  std::mt19937 rng(5);
  const std::string alphabet = "{}[]\":,-.0123456789eEtrufalsnmgkcpvid \\/\n\xc3\xa9";
  for (int i = 0; i < 3000; ++i) {
    std::string t;
    const int len = 1 + int(rng() % 6);
    for (int k = 0; k < len; ++k) t += alphabet[rng() % alphabet.size()];
    v.push_back(t);
  }
  return v;
}

TEST(JsonSchema, TrieWalkAllowsExactlyTheTokensTheRecognizerAccepts) {
  const auto vocab = vocabulary();
  const TokenTrie trie(vocab);
  const auto person = compile(kPerson);
  const auto free_strings = compile(R"({"type": "object", "properties": {"s": {"type": "string", "minLength": 2},
      "m": {"type": "object"}, "b": {"type": "string", "maxLength": 12}}})");
  // Unlisted keys among listed ones (leaving the key trie mid-character too), and a pattern with a length bound.
  const auto extra = compile(R"({"properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
      "required": ["age"], "maxProperties": 5,
      "additionalProperties": {"type": "string", "pattern": "^([a-z]|\u00e9)+$", "maxLength": 4}})");
  struct Case {
    const JsonSchema* schema;
    std::string doc;
  };
  const Case cases[] = {
      {person.get(),
       R"({"name": "\u00e9)" "\xc3\xa9" R"(", "age": -12, "tags": ["a", {"k":[1,true]}], "pet": {"kind":"cat"}})"},
      {free_strings.get(),
       R"({"s": "abc\n)" "\xc3\xa9" R"( d", "m": {"na\"me": [1.5, "x"], "": {}}, "b": "abcdefghi\n"})"},
      {extra.get(),
       R"({"nam": "ab", "name": "x", "pet":"c)" "\xc3\xa9" R"(t", "age": -12, "n)" "\xc3\xa9" R"(": "abcd"})"},
  };
  int plain_states = 0, bounded_walks = 0;
  for (const Case& c : cases) {
    JsonSchemaRecognizer state(*c.schema);
    std::vector<uint8_t> got;
    for (size_t i = 0; i <= c.doc.size(); ++i) {
      plain_states += state.in_string_text();
      bounded_walks += state.in_string_text() && state.string_room() < trie.longest_string_plain_token();
      const int64_t count = trie.allowed(state, got);
      std::vector<uint8_t> want(vocab.size(), 0);
      for (size_t id = 0; id < vocab.size(); ++id) {
        JsonSchemaRecognizer r = state;
        want[id] = !vocab[id].empty() && r.push(vocab[id]);
      }
      ASSERT_EQ(got, want) << "after " << i << " bytes: " << c.doc.substr(0, i);
      EXPECT_EQ(count, std::count(want.begin(), want.end(), 1));
      if (i < c.doc.size()) ASSERT_TRUE(state.push(uint8_t(c.doc[i]))) << c.doc.substr(0, i + 1);
    }
    EXPECT_TRUE(state.complete());
  }
  EXPECT_GT(plain_states, 10) << "the string-plain shortcut was meant to be taken (free strings, map keys)";
  EXPECT_GT(bounded_walks, 4) << "near a maxLength only the string-plain tokens that fit were meant to be allowed";
}

}  // namespace
}  // namespace attnzoo
