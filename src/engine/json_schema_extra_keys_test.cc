// additionalProperties beside properties / required, and minProperties / maxProperties (engine/json_schema.h),
// against a plain reference written here: every object of up to four members over small sets of keys and values
// is enumerated; the recognizer takes it whole and may end there iff the reference accepts it, and the part of any
// of them it takes is a prefix of an accepted one (no accepted prefix is a dead end). The reference is the subset's
// reading: listed keys once each, in the schema's order, required ones present; other keys written without escapes,
// their values of additionalProperties' schema; the count of keys within the bounds.
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/json_schema.h"
#include "engine/json_schema_recognizer.h"
#include "loader/json.h"

namespace attnzoo {
namespace {

using Members = std::vector<std::pair<std::string, std::string>>;  // quoted key, value text

void expect_exact(const std::string& schema, const std::vector<std::string>& keys,
                  const std::vector<std::string>& values, int at_least,
                  const std::function<bool(const Members&)>& valid) {
  const auto g = compile_json_schema(json::parse(schema));
  std::vector<Members> all = {{}};
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i].size() < 4)
      for (const auto& k : keys)
        for (const auto& v : values) {
          Members m = all[i];
          m.emplace_back(k, v);
          all.push_back(std::move(m));
        }
  std::vector<std::string> docs;
  std::set<std::string> prefixes;
  std::vector<bool> ok;
  int accepted = 0;
  for (const Members& m : all) {
    std::string doc = "{";
    for (size_t i = 0; i < m.size(); ++i) doc += (i ? "," : "") + m[i].first + ":" + m[i].second;
    doc += "}";
    docs.push_back(doc);
    ok.push_back(valid(m));
    if (ok.back()) {
      ++accepted;
      for (size_t k = 0; k <= doc.size(); ++k) prefixes.insert(doc.substr(0, k));
    }
  }
  for (size_t i = 0; i < docs.size(); ++i) {
    JsonSchemaRecognizer r(*g);
    size_t n = 0;
    while (n < docs[i].size() && r.push(uint8_t(docs[i][n]))) ++n;
    const bool whole = n == docs[i].size() && r.complete();
    ASSERT_EQ(whole, bool(ok[i])) << schema << ": " << docs[i] << " taken " << n << " bytes";
    ASSERT_TRUE(prefixes.count(docs[i].substr(0, n))) << schema << ": dead end at " << docs[i].substr(0, n);
  }
  EXPECT_GE(accepted, at_least) << schema;  // the reference is not vacuous
}

bool listed_in_order(const Members& m, const std::vector<std::string>& listed) {
  size_t next = 0;  // the first listed key still allowed
  for (const auto& [k, v] : m) {
    size_t i = 0;
    while (i < listed.size() && listed[i] != k) ++i;
    if (i == listed.size()) continue;
    if (i < next) return false;
    next = i + 1;
  }
  return true;
}

bool has(const Members& m, const std::string& key) {
  for (const auto& [k, v] : m)
    if (k == key) return true;
  return false;
}

TEST(JsonSchemaExtraKeys, AdditionalSchemaBesideProperties) {
  // "\xc3\xa9" is é, "ab" / "aq" / "bq" pass through listed keys ("aq" and "bq" also witness that a prefix ending
  // on a listed key, "a, can still become another key). Escaped keys: EscapedOtherKeys below.
  const std::vector<std::string> keys = {"\"a\"",  "\"b\"",  "\"ab\"", "\"c\"",
                                         "\"aq\"", "\"bq\"", "\"\xc3\xa9\""};
  expect_exact(R"({"properties": {"a": {"type": "integer"}, "b": {"enum": ["x"]}}, "required": ["b"],
                   "additionalProperties": {"type": "boolean"}, "minProperties": 2, "maxProperties": 3})",
               keys, {"1", "\"x\"", "true"}, 50, [](const Members& m) {
                 if (!listed_in_order(m, {"\"a\"", "\"b\""}) || !has(m, "\"b\"")) return false;
                 if (m.size() < 2 || m.size() > 3) return false;
                 for (const auto& [k, v] : m) {
                   const std::string want = k == "\"a\"" ? "1" : k == "\"b\"" ? "\"x\"" : "true";
                   if (v != want) return false;
                 }
                 return true;
               });
  // true: any value; no bounds on the count.
  expect_exact(R"({"properties": {"a": {"type": "integer"}}, "additionalProperties": true})",
               {"\"a\"", "\"aq\"", "\"b\"", "\"\""}, {"1", "[]", "{}", "\"a\""}, 50, [](const Members& m) {
                 if (!listed_in_order(m, {"\"a\""})) return false;
                 for (const auto& [k, v] : m)
                   if (k == "\"a\"" && v != "1") return false;
                 return true;
               });
}

TEST(JsonSchemaExtraKeys, EscapedOtherKeys) {
  // Other keys take escapes as json.dumps writes them, so a key's text follows from its value: "a\"b" (listed
  // beside it: the trie holds its escape), "q\"x", "\n", "\\", "\u0001", "\u001f" are keys; "\u0061" ("a"
  // spelt otherwise), "\u000a" ("\n" spelt otherwise) and "\/" never are. Listed keys once, in order.
  const std::vector<std::string> keys = {"\"a\"",        "\"aq\"",       "\"a\\\"b\"",    "\"a\\\"bq\"",
                                         "\"q\\\"x\"",     "\"\\n\"",      "\"\\\\\"",     "\"\\u0001\"", "\"\\u001f\"", "\"\\u0061\"", "\"\\u000a\"", "\"\\/\""};
  expect_exact(R"({"properties": {"a": {"type": "integer"}, "a\"b": {"type": "integer"}},
                   "additionalProperties": {"type": "integer"}})",
               keys, {"1"}, 100, [](const Members& m) {
                 if (!listed_in_order(m, {"\"a\"", "\"a\\\"b\""})) return false;
                 for (const auto& [k, v] : m)
                   if (k == "\"\\u0061\"" || k == "\"\\u000a\"" || k == "\"\\/\"") return false;
                 return true;
               });
  // An escape never interrupts a character's UTF-8 bytes.
  const auto g = compile_json_schema(json::parse(R"({"properties": {"a": {}}, "additionalProperties": true})"));
  JsonSchemaRecognizer r(*g);
  EXPECT_TRUE(r.push(std::string_view("{\"\xc3")));
  EXPECT_FALSE(r.push(uint8_t('\\')));
  EXPECT_TRUE(r.push(std::string_view("\xa9\\n\":1}")));
  EXPECT_TRUE(r.complete());
}

TEST(JsonSchemaExtraKeys, PropertyCountsWithoutOtherKeysAndInMaps) {
  // Two of three listed keys: "c" first leaves nothing to make up the second.
  expect_exact(R"({"properties": {"a": {}, "b": {}, "c": {}}, "minProperties": 2, "maxProperties": 2})",
               {"\"a\"", "\"b\"", "\"c\"", "\"d\""}, {"1"}, 3, [](const Members& m) {
                 if (!listed_in_order(m, {"\"a\"", "\"b\"", "\"c\""}) || m.size() != 2) return false;
                 for (const auto& [k, v] : m)
                   if (k == "\"d\"") return false;
                 return !(m.size() == 2 && m[0].first == m[1].first);
               });
  // A map: any keys (repeats included: the recognizer keeps no key text), one to two of them.
  expect_exact(R"({"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 1,
                   "maxProperties": 2})",
               {"\"a\"", "\"b\""}, {"1", "true"}, 6, [](const Members& m) {
                 if (m.empty() || m.size() > 2) return false;
                 for (const auto& [k, v] : m)
                   if (v != "1") return false;
                 return true;
               });
}

TEST(JsonSchemaExtraKeys, RequiredKeysKeepRoomUnderMaxProperties) {
  const auto g = compile_json_schema(json::parse(R"({"properties": {"a": {}, "z": {}}, "required": ["z"],
      "additionalProperties": {"type": "integer"}, "maxProperties": 2})"));
  const auto take = [&](const std::string& doc) {
    JsonSchemaRecognizer r(*g);
    size_t n = 0;
    while (n < doc.size() && r.push(uint8_t(doc[n]))) ++n;
    return n;
  };
  EXPECT_EQ(take(R"({"q":1,"z":2})"), 13u);
  EXPECT_EQ(take(R"({"q":1,"r":2})"), 8u);  // "r" would leave no room for "z": refused at its first byte
  EXPECT_EQ(take(R"({"q":1,"a":2,"z":3})"), 8u);
  EXPECT_EQ(take(R"({"z":1,"a":2})"), 9u);  // "a" after "z": out of the listed order, and no other key is "a"
  EXPECT_EQ(take(R"({"z":1,"zz":2})"), 14u);
}

}  // namespace
}  // namespace attnzoo
