// `pattern` in json_schema (engine/json_string_pattern.h) against std::regex with the ECMAScript grammar, the
// dialect JSON Schema names: every string up to a length over a small alphabet closes iff std::regex_search finds
// the pattern in it, and a prefix is taken iff some enumerated matching string starts with it (the enumeration
// reaches past the longest completion a prefix needs). python/tests/test_json_schema_pattern.py checks against
// Python's re, with random walks and pydantic.
#include "engine/json_string_pattern.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/json_schema.h"
#include "engine/json_schema_recognizer.h"
#include "loader/json.h"

namespace attnzoo {
namespace {

// '"' + s (+ '"' when `close`) taken whole, and (closed) the document whole.
bool taken(const JsonSchema& g, const std::string& s, bool close) {
  const std::string text = "\"" + s + (close ? "\"" : "");
  JsonSchemaRecognizer r(g);
  for (char c : text)
    if (!r.push(uint8_t(c))) return false;
  return !close || r.can_end();
}

TEST(JsonStringPattern, SmallAlphabetsMatchStdRegexExactly) {
  struct Case {
    const char* pattern;
    const char* alphabet;
    size_t longest, reach;  // strings enumerated; the longest completion a prefix may need
  };
  for (const Case& c : {Case{R"(^\d{3}-\d{2}$)", "09-x", 7, 6}, Case{"^(cat|dog)s?$", "cadogts", 5, 4},
                        Case{"^(ab|a)*c?$", "abc", 7, 1}, Case{"b[^b]{2}b", "ab.", 7, 4},
                        Case{"^a{2,3}(-b)?$", "ab-", 6, 5}, Case{R"(^[a-c]+\.[a-c]{1,2}$)", "ac.", 6, 3},
                        Case{R"(^(?:x|yz)+$)", "xyz", 6, 1}, Case{R"(\w\W)", "a-", 5, 2},
                        // An anchor binds to its top-level branch: ECMA reads ^a|b as (^a)|(b), not ^(a|b).
                        Case{"^a|b", "abx", 5, 1}, Case{"a|b$", "abx", 5, 1}, Case{"^ab|ba$", "abx", 6, 2},
                        Case{"^a$|b|^$", "abx", 5, 1}, Case{R"(^\$|x\$$)", "$xa", 5, 2}}) {
    const std::string schema = std::string(R"({"type": "string", "pattern": )") + json::quote(c.pattern) + "}";
    const auto g = compile_json_schema(json::parse(schema));
    const std::regex re(c.pattern, std::regex::ECMAScript);
    std::vector<std::string> strings{""};
    for (size_t k = 0; k < strings.size(); ++k)
      if (strings[k].size() < c.longest)
        for (const char* a = c.alphabet; *a; ++a) strings.push_back(strings[k] + *a);
    std::set<std::string> prefixes;
    for (const auto& s : strings)
      if (std::regex_search(s, re))
        for (size_t k = 0; k <= s.size(); ++k) prefixes.insert(s.substr(0, k));
    ASSERT_FALSE(prefixes.empty()) << c.pattern;
    for (const auto& s : strings) {
      ASSERT_EQ(taken(*g, s, true), std::regex_search(s, re)) << c.pattern << " closing " << s;
      if (s.size() + c.reach <= c.longest)
        ASSERT_EQ(taken(*g, s, false), prefixes.count(s) == 1) << c.pattern << " prefix " << s;
    }
  }
}

TEST(JsonStringPattern, AnchorsOnlyAtABranchsEnds) {
  for (const char* re : {"a$b", "(a|^b)", "a|$b", "(a$)", "^*a"}) {
    try {
      compile_string_pattern(re, "/pattern");
      FAIL() << re << " compiled";
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("#/pattern: pattern: "), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace attnzoo
