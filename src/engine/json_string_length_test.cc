// minLength / maxLength beside a pattern or format (engine/json_string_length.h) against plain references: the
// strings over a small alphabet enumerated outright and matched with std::regex (ECMAScript, searched anywhere as
// JSON Schema has it) and counted in characters; every prefix of a valid document and every one-byte extension of
// one is accepted iff some valid document starts with it. python/tests/test_json_schema_lengths.py checks the same
// against Python's re and pydantic.
#include "engine/json_string_length.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>
#include <vector>

#include "engine/json_schema.h"
#include "engine/json_schema_recognizer.h"
#include "loader/json.h"

namespace attnzoo {
namespace {

std::pair<size_t, bool> run(const JsonSchema& s, const std::string& text) {
  JsonSchemaRecognizer r(s);
  size_t n = 0;
  while (n < text.size() && r.push(uint8_t(text[n]))) ++n;
  return {n, r.can_end()};
}

// `valid`: every valid document (quoted strings); probes: their prefixes and each one's extension by `bytes`.
void expect_exact(const std::string& schema, const std::set<std::string>& valid, const std::string& bytes) {
  const auto g = compile_json_schema(json::parse(schema));
  std::set<std::string> prefixes;
  for (const auto& t : valid)
    for (size_t k = 0; k <= t.size(); ++k) prefixes.insert(t.substr(0, k));
  std::set<std::string> probes = prefixes;
  for (const auto& p : prefixes)
    for (char c : bytes) probes.insert(p + c);
  for (const auto& t : probes) {
    const auto [n, end] = run(*g, t);
    const bool taken = n == t.size();
    ASSERT_EQ(taken, prefixes.count(t) == 1) << schema << ": " << t << " taken " << n << " bytes";
    if (taken) ASSERT_EQ(end, valid.count(t) == 1) << schema << ": may end at " << t;
  }
  EXPECT_GT(probes.size(), 10u) << schema;
}

// The strings of up to `longest` characters over `alphabet` (one byte each).
std::vector<std::string> strings(const std::string& alphabet, size_t longest) {
  std::vector<std::string> out = {""};
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].size() < longest)
      for (char c : alphabet) out.push_back(out[i] + c);
  return out;
}

TEST(JsonStringLength, PatternsWithLengthsAcceptExactlyTheirStrings) {
  struct Case {
    const char* regex;  // as ECMAScript reads it; the schema holds it as a JSON string
    const char* alphabet;
    uint32_t min, max;
  };
  for (const Case& c : {Case{"^(ab|c)+$", "abc", 3, 5}, Case{"a+b", "abx", 2, 4}, Case{"^(aa)+$", "ab", 3, 4},
                        Case{"^\\d{2,3}$", "12x", 0, 2}, Case{"x", "xy", 4, 6}, Case{"^(a|bc)*$", "abc", 0, 3},
                        Case{"b", "ab", 1, 1}}) {
    const std::regex re(c.regex, std::regex::ECMAScript);
    std::set<std::string> valid;
    for (const auto& s : strings(c.alphabet, c.max))
      if (s.size() >= c.min && std::regex_search(s, re)) valid.insert("\"" + s + "\"");
    std::string escaped;  // the regex as a JSON string
    for (char ch : std::string(c.regex)) escaped += ch == '\\' ? "\\\\" : std::string(1, ch);
    const std::string schema = R"({"type":"string","pattern":")" + escaped + R"(","minLength":)" +
                               std::to_string(c.min) + R"(,"maxLength":)" + std::to_string(c.max) + "}";
    expect_exact(schema, valid, std::string(c.alphabet) + "\"\\");
  }
}

TEST(JsonStringLength, CharactersAreCodePoints) {
  // "^(a|é)+$" over a, é and b: 2 or 3 characters, however many bytes.
  std::set<std::string> valid;
  for (const auto& s : strings("ae", 3)) {
    if (s.size() < 2) continue;
    std::string text;
    for (char c : s) text += c == 'e' ? "\xc3\xa9" : "a";
    valid.insert("\"" + text + "\"");
  }
  expect_exact(R"({"type":"string","pattern":"^(a|\u00e9)+$","minLength":2,"maxLength":3})", valid,
               "ab\xc3\xa9\xa8\"");
}

// Twelve strings of a's, a million or more: 3 DFA states x 1,000,003 lengths, 3 Mi bits of table each; the
// twelfth passes 32 Mi bits in all.
std::string many_tables() {
  std::string items;
  for (int i = 0; i < 12; ++i)
    items += std::string(i ? "," : "") + R"({"type":"string","pattern":"^a+$","minLength":1000000})";
  return R"({"type":"array","prefixItems":[)" + items + "]}";
}

TEST(JsonStringLength, FormatsWithLengthsAndRefusals) {
  // Dotted quads of at most 9 characters: "100.20" leaves no room for ".d.d".
  const auto ip = compile_json_schema(json::parse(R"({"type":"string","format":"ipv4","maxLength":9})"));
  EXPECT_EQ(run(*ip, "\"1.2.3.4\""), std::make_pair(size_t(9), true));
  EXPECT_EQ(run(*ip, "\"100.20.1.1\"").first, 6u);
  EXPECT_EQ(run(*ip, "\"100.2.1.1\""), std::make_pair(size_t(11), true));
  EXPECT_EQ(run(*ip, "\"100.2.1.10\"").first, 10u);
  // A minimum that only the longer date-times reach: a fraction of at least 3 digits with "Z".
  const auto dt = compile_json_schema(json::parse(R"({"type":"string","format":"date-time","minLength":24})"));
  EXPECT_EQ(run(*dt, "\"2024-02-29T12:00:00Z\"").first, 20u);
  EXPECT_EQ(run(*dt, "\"2024-02-29T12:00:00.1Z\"").first, 22u);
  EXPECT_EQ(run(*dt, "\"2024-02-29T12:00:00.123Z\""), std::make_pair(size_t(26), true));
  EXPECT_EQ(run(*dt, "\"2024-02-29T12:00:00.1+01:00\""), std::make_pair(size_t(29), true));
  // Only minLength: any longer match still ends; an unanchored pattern pads.
  const auto pad = compile_json_schema(json::parse(R"({"type":"string","pattern":"^ab","minLength":5})"));
  EXPECT_EQ(run(*pad, "\"abcdef\""), std::make_pair(size_t(8), true));
  EXPECT_EQ(run(*pad, "\"abcd\"").first, 5u);
  for (const auto& [schema, message] : std::vector<std::pair<std::string, std::string>>{
           {R"({"type":"string","format":"date","maxLength":9})",
            "at #: no string of 0 to 9 characters matches the pattern / format"},
           {R"({"properties":{"p":{"type":"string","pattern":"^(aa)+$","minLength":3,"maxLength":3}}})",
            "at #/properties/p: no string of 3 to 3 characters"},
           {R"({"type":"string","pattern":"^[a-z]+$","minLength":10000000})", "at #: minLength / maxLength beside"},
           {R"({"type":"string","pattern":"x","minLength":3,"maxLength":2})", "at #: minLength exceeds maxLength"},
           {many_tables(), "at #/prefixItems/11: the schema's patterned strings with minLength / maxLength need over 4 MiB"}}) {
    try {
      compile_json_schema(json::parse(schema));
      ADD_FAILURE() << schema << " compiled";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace attnzoo
