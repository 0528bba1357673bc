// Tagged unions of compiled schemas (engine/json_schema_union.h): the tag's value picks the branch, after which
// exactly that branch's documents are accepted, byte by byte, as its own schema accepts them; malformed inputs to
// tagged_union are refused.
#include "engine/json_schema_union.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "engine/json_schema_recognizer.h"
#include "loader/json.h"

namespace attnzoo {
namespace {

std::shared_ptr<const JsonSchema> compile(const std::string& text) { return compile_json_schema(json::parse(text)); }

std::shared_ptr<const JsonSchema> call(const std::string& name, const std::string& arguments) {
  return compile(R"({"type": "object", "properties": {"name": {"const": ")" + name + R"("}, "arguments": )" +
                 arguments + R"(}, "required": ["name", "arguments"]})");
}

// Leading bytes taken, and whether the document is whole there.
std::pair<size_t, bool> run(const JsonSchema& s, const std::string& text) {
  JsonSchemaRecognizer r(s);
  size_t n = 0;
  while (n < text.size() && r.push(uint8_t(text[n]))) ++n;
  return {n, r.complete()};
}

const char* kWeather = R"({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                           "required": ["city"]})";
const char* kTime = R"({"type": "object", "properties": {"zone": {"enum": ["CET", "UTC"]}}, "required": ["zone"]})";
// A name that is a prefix of another, and a nested reference to a $defs entry (rebased under "arguments").
const char* kGet =
    R"({"type": "object", "properties": {"p": {"$ref": "#/properties/arguments/$defs/P"}}, "$defs": {"P":
       {"type": "array", "items": {"type": "boolean"}, "maxItems": 2}}})";

TEST(TaggedUnion, TheTagPicksTheBranch) {
  const std::vector<std::shared_ptr<const JsonSchema>> calls = {call("get_weather", kWeather),
                                                                 call("get_time", kTime), call("get", kGet)};
  const auto u = tagged_union(calls);
  const std::vector<std::string> good = {
      R"({"name": "get_weather", "arguments": {"city": "Paris", "days": 2}})",
      R"({"name":"get_weather","arguments":{"city":"x"}})",
      R"({"name": "get_time", "arguments": {"zone": "UTC"}})",
      R"({"name": "get", "arguments": {"p": [true, false]}})",
      R"({"name": "get", "arguments": {}})",
  };
  for (const std::string& doc : good) {
    const auto [n, whole] = run(*u, doc);
    EXPECT_EQ(n, doc.size()) << doc << " refused at " << doc.substr(0, n + 1);
    EXPECT_TRUE(whole) << doc;
    // Each is a document of exactly one branch's own schema.
    int branches = 0;
    for (const auto& c : calls) branches += run(*c, doc) == std::make_pair(doc.size(), true);
    EXPECT_EQ(branches, 1) << doc;
  }
  // Refused at the first byte no branch has there: another branch's arguments, an unknown name, a key before the
  // tag, a missing required argument, a nested schema of the third branch.
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"name": "get_time", "arguments": {")", "city"},
      {R"({"name": "get_weather", "arguments": {"city": "P", ")", "zone"},
      {R"({"name": "get_)", "x"},
      {R"({")", "arguments\""},
      {R"({"name": "get_weather", "arguments": {)", "}"},
      {R"({"name": "get", "arguments": {"p": [true, false)", ", true"},
      {R"({"name": "get_time", "arguments": {"zone": "UTC"})", ","},
  };
  for (const auto& [prefix, rest] : bad) {
    const auto [n, whole] = run(*u, prefix + rest);
    EXPECT_EQ(n, prefix.size()) << prefix + rest;
    EXPECT_FALSE(whole);
  }
  // Not whole before the object closes.
  const std::string open = R"({"name": "get_time", "arguments": {"zone": "CET"})";
  EXPECT_EQ(run(*u, open), std::make_pair(open.size(), false));
}

TEST(TaggedUnion, RefusesWhatIsNotATaggedUnion) {
  EXPECT_THROW(tagged_union({}), ArgumentError);
  EXPECT_THROW(tagged_union({call("a", "{}"), call("a", kTime)}), ArgumentError);  // the same tag twice
  EXPECT_THROW(tagged_union({call("a", "{}"), compile(R"({"type": "string"})")}), ArgumentError);
  EXPECT_THROW(tagged_union({call("a", "{}"), compile(R"({"properties": {"name": {"enum": ["b", "c"]}},
                                                          "required": ["name"]})")}),
               ArgumentError);
  EXPECT_THROW(tagged_union({call("a", "{}"), compile(R"({"properties": {"kind": {"const": "b"}},
                                                          "required": ["kind"]})")}),
               ArgumentError);
  EXPECT_THROW(tagged_union({call("a", "{}"), compile(R"({"properties": {"name": {"const": "b"}}})")}),
               ArgumentError);  // the tag may be left out
}

}  // namespace
}  // namespace attnzoo

namespace attnzoo {
namespace {

// Each branch's numeric bounds come along, renumbered: the second branch's range is its own, not the first's.
TEST(TaggedUnion, BranchesKeepTheirNumericBounds) {
  const auto u = tagged_union(
      {call("a", R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": 10, "maximum": 19}}})"),
       call("b", R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": -5, "maximum": -1}},
                     "required": ["n"]})")});
  EXPECT_TRUE(run(*u, R"({"name":"a","arguments":{"n":15}})").second);
  EXPECT_EQ(run(*u, R"({"name":"a","arguments":{"n":25}})").first, 29u);  // "2" is refused
  EXPECT_TRUE(run(*u, R"({"name":"b","arguments":{"n":-3}})").second);
  EXPECT_EQ(run(*u, R"({"name":"b","arguments":{"n":15}})").first, 29u);  // "1" is refused
}

}  // namespace
}  // namespace attnzoo
