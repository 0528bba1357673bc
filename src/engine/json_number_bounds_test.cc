// Numeric bounds in json_schema (engine/json_number_bounds.h) against a plain reference written here: the valid
// texts of a small range enumerated outright (integers by value, numbers as decimals of up to 3 places compared as
// scaled integers), and every prefix of them, with every one-byte extension, accepted iff some valid text starts
// with it. python/tests/test_json_schema_bounds.py checks the same against Python's Fraction and pydantic.
#include "engine/json_number_bounds.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "engine/json_schema.h"
#include "engine/json_schema_recognizer.h"
#include "loader/json.h"

namespace attnzoo {
namespace {

// How many leading bytes the recognizer takes, and whether it may end there.
std::pair<size_t, bool> run(const JsonSchema& s, const std::string& text) {
  JsonSchemaRecognizer r(s);
  size_t n = 0;
  while (n < text.size() && r.push(uint8_t(text[n]))) ++n;
  return {n, r.can_end()};
}

// Every prefix of `valid` and its one-byte extensions: taken whole iff a prefix of a valid text; may end iff valid.
// `tellable`: whether the enumeration is long enough to decide a probe.
template <class Tellable>
void expect_exact(const std::string& schema, const std::vector<std::string>& valid, Tellable tellable) {
  const auto g = compile_json_schema(json::parse(schema));
  const std::set<std::string> whole(valid.begin(), valid.end());
  std::set<std::string> prefixes;
  for (const auto& t : valid)
    for (size_t k = 0; k <= t.size(); ++k) prefixes.insert(t.substr(0, k));
  std::set<std::string> probes = prefixes;
  for (const auto& p : prefixes)
    for (char c : std::string("-0123456789.eE+")) probes.insert(p + c);
  int checked = 0;
  for (const auto& t : probes) {
    if (!tellable(t)) continue;
    const auto [n, end] = run(*g, t);
    const bool taken = n == t.size();
    ASSERT_EQ(taken, prefixes.count(t) == 1) << schema << ": " << t << " taken " << n << " bytes";
    if (taken) ASSERT_EQ(end, whole.count(t) == 1) << schema << ": may end at " << t;
    ++checked;
  }
  EXPECT_GT(checked, 30) << schema;
}

TEST(JsonNumberBounds, IntegerRangesAcceptExactlyTheirValues) {
  struct Case {
    const char* schema;
    int64_t lo, hi, step;
  };
  for (const Case& c : {Case{R"({"type":"integer","minimum":-137,"maximum":2045})", -137, 2045, 1},
                        Case{R"({"type":"integer","exclusiveMinimum":-20,"exclusiveMaximum":31,"multipleOf":3})",
                             -19, 30, 3},
                        Case{R"({"type":"integer","minimum":-1000,"maximum":-37})", -1000, -37, 1},
                        Case{R"({"type":"integer","minimum":995,"maximum":1004,"multipleOf":2})", 995, 1004, 2},
                        Case{R"({"type":"integer","minimum":-0.5,"exclusiveMaximum":12.5})", 0, 12, 1}}) {
    std::vector<std::string> valid;
    for (int64_t v = c.lo; v <= c.hi; ++v)
      if (v % c.step == 0) valid.push_back(std::to_string(v));
    if (c.lo <= 0 && c.hi >= 0) valid.push_back("-0");
    expect_exact(c.schema, valid, [](const std::string&) { return true; });
  }
}

TEST(JsonNumberBounds, NumberRangesAcceptExactlyTheirDecimals) {
  struct Case {
    const char* schema;
    int64_t lo, hi;  // thousandths
    bool lo_open, hi_open;
  };
  for (const Case& c : {Case{R"({"type":"number","minimum":-12.5,"exclusiveMaximum":27.25})", -12500, 27250, false,
                             true},
                        Case{R"({"type":"number","exclusiveMinimum":0,"maximum":1})", 0, 1000, true, false},
                        Case{R"({"type":"number","minimum":0.1,"maximum":0.3})", 100, 300, false, false},
                        Case{R"({"type":"number","exclusiveMinimum":-3,"exclusiveMaximum":-2.99})", -3000, -2990,
                             true, true}}) {
    // Every decimal with an integer part below 40 and up to 3 places, by its value in thousandths.
    std::vector<std::string> valid;
    for (int sign : {1, -1})
      for (int64_t whole = 0; whole < 40; ++whole)
        for (int places = 0; places <= 3; ++places)
          for (int64_t frac = 0; frac < (places == 0 ? 1 : places == 1 ? 10 : places == 2 ? 100 : 1000); ++frac) {
            const int64_t scale = places == 0 ? 1000 : places == 1 ? 100 : places == 2 ? 10 : 1;
            const int64_t v = sign * (whole * 1000 + frac * scale);
            const bool in = (c.lo_open ? v > c.lo : v >= c.lo) && (c.hi_open ? v < c.hi : v <= c.hi);
            if (!in) continue;
            char buf[32];
            if (places == 0) std::snprintf(buf, sizeof(buf), "%s%lld", sign < 0 ? "-" : "", (long long)whole);
            else
              std::snprintf(buf, sizeof(buf), "%s%lld.%0*lld", sign < 0 ? "-" : "", (long long)whole, places,
                            (long long)frac);
            valid.push_back(buf);
          }
    // Probes past 2 places or 2 integer digits may need witnesses longer than the enumeration holds.
    expect_exact(c.schema, valid, [](const std::string& t) {
      const std::string body = t[0] == '-' ? t.substr(1) : t;
      const size_t dot = body.find('.');
      const size_t whole = dot == std::string::npos ? body.size() : dot;
      const size_t places = dot == std::string::npos ? 0 : body.size() - dot - 1;
      return whole <= 2 && places <= 2 && t.find_first_of("eE+") == std::string::npos;
    });
  }
}

// multipleOf with a decimal step: a value is a multiple when its decimal text over the step is whole (exact
// arithmetic in thousandths here), enforced digit by digit with the bounds.
TEST(JsonNumberBounds, DecimalMultiplesAcceptExactlyTheirDecimals) {
  struct Case {
    const char* schema;
    int64_t lo, hi, step;  // thousandths, closed
  };
  for (const Case& c : {Case{R"({"type":"number","minimum":-3,"maximum":7.5,"multipleOf":0.25})", -3000, 7500, 250},
                        Case{R"({"type":"number","exclusiveMinimum":0,"exclusiveMaximum":12.5,"multipleOf":2.5})", 1,
                             12499, 2500},
                        Case{R"({"type":"number","minimum":0.1,"maximum":0.3,"multipleOf":0.01})", 100, 300, 10},
                        Case{R"({"type":"number","minimum":1.05,"maximum":3,"multipleOf":0.1})", 1050, 3000, 100},
                        Case{R"({"type":"number","minimum":-39,"maximum":-0.001,"multipleOf":0.125})", -39000, -1,
                             125},
                        Case{R"({"multipleOf":0.5,"minimum":-2,"maximum":38})", -2000, 38000, 500}}) {
    std::vector<std::string> valid;
    for (int sign : {1, -1})
      for (int64_t whole = 0; whole < 40; ++whole)
        for (int places = 0; places <= 3; ++places)
          for (int64_t frac = 0; frac < (places == 0 ? 1 : places == 1 ? 10 : places == 2 ? 100 : 1000); ++frac) {
            const int64_t unit = places == 0 ? 1000 : places == 1 ? 100 : places == 2 ? 10 : 1;
            const int64_t v = sign * (whole * 1000 + frac * unit);
            if (v < c.lo || v > c.hi || v % c.step != 0) continue;
            char buf[32];
            if (places == 0) std::snprintf(buf, sizeof(buf), "%s%lld", sign < 0 ? "-" : "", (long long)whole);
            else
              std::snprintf(buf, sizeof(buf), "%s%lld.%0*lld", sign < 0 ? "-" : "", (long long)whole, places,
                            (long long)frac);
            valid.push_back(buf);
          }
    expect_exact(c.schema, valid, [](const std::string& t) {
      const std::string body = t[0] == '-' ? t.substr(1) : t;
      const size_t dot = body.find('.');
      const size_t whole = dot == std::string::npos ? body.size() : dot;
      const size_t places = dot == std::string::npos ? 0 : body.size() - dot - 1;
      return whole <= 2 && places <= 2 && t.find_first_of("eE+") == std::string::npos;
    });
  }
}

TEST(JsonNumberBounds, DecimalStepsOnIntegersAndTheirRefusals) {
  // An integer multiple of 2.5 is a multiple of 5; of 0.5, any integer.
  std::vector<std::string> fives, all;
  for (int v = -20; v <= 30; ++v) {
    if (v % 5 == 0) fives.push_back(std::to_string(v));
    all.push_back(std::to_string(v));
  }
  fives.push_back("-0"), all.push_back("-0");
  const auto any = [](const std::string&) { return true; };
  expect_exact(R"({"type":"integer","minimum":-20,"maximum":30,"multipleOf":2.5})", fives, any);
  expect_exact(R"({"type":"integer","minimum":-20,"maximum":30,"multipleOf":0.5})", all, any);
  // Unbounded: 0.3 is a multiple of 0.1 (it is not in doubles: 0.3 / 0.1 = 2.9999999999999996).
  const auto g = compile_json_schema(json::parse(R"({"type":"number","multipleOf":0.1})"));
  EXPECT_EQ(run(*g, "0.3"), std::make_pair(size_t(3), true));
  EXPECT_EQ(run(*g, "-1234567.80"), std::make_pair(size_t(11), true));
  EXPECT_EQ(run(*g, "0.35").first, 3u);
  EXPECT_EQ(run(*g, "0.30001").first, 6u);
  for (const auto& [schema, message] : std::vector<std::pair<std::string, std::string>>{
           {R"({"type":"number","minimum":0.11,"maximum":0.19,"multipleOf":0.1})", "at #: no multiple of 0.1 lies"},
           {R"({"type":"number","multipleOf":0})", "at #/multipleOf: multipleOf must be a positive number"},
           {R"({"type":"number","multipleOf":-0.5})", "at #/multipleOf: multipleOf must be a positive number"},
           {R"({"type":"number","multipleOf":1e-13})", "at #/multipleOf: multipleOf has more than 12 decimals"},
           {R"({"type":"integer","minimum":1,"maximum":4,"multipleOf":2.5})", "no integer multiple of 5 lies"}}) {
    try {
      compile_json_schema(json::parse(schema));
      ADD_FAILURE() << schema << " compiled";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

TEST(JsonNumberBounds, Int64EdgesAndNoExponent) {
  const auto g = compile_json_schema(
      json::parse(R"({"type":"integer","minimum":-9223372036854775808,"maximum":9223372036854775807})"));
  EXPECT_EQ(run(*g, "9223372036854775807").first, 19u);
  EXPECT_EQ(run(*g, "9223372036854775808").first, 18u);
  EXPECT_EQ(run(*g, "-9223372036854775808").first, 20u);
  EXPECT_EQ(run(*g, "-9223372036854775809").first, 19u);
  const auto positive = compile_json_schema(json::parse(R"({"type":"number","exclusiveMinimum":0})"));
  EXPECT_EQ(run(*positive, "1e5").first, 1u);
  EXPECT_EQ(run(*positive, "0.000").second, false);
  EXPECT_EQ(run(*positive, "0.0001").second, true);
}

}  // namespace
}  // namespace attnzoo
