// String formats in json_schema (engine/json_string_format.h) against references outside this code: the C++
// calendar (std::chrono::year_month_day::ok) for every month 00-13 / day 00-32 of leap, non-leap and century years,
// and inet_pton for dotted quads. A value closes iff the reference accepts it, and no prefix of a valid value is
// refused. python/tests/test_json_schema_format.py checks every format against Python's own parsers.
#include "engine/json_string_format.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>

#include "engine/json_schema.h"
#include "engine/json_schema_recognizer.h"
#include "loader/json.h"

namespace attnzoo {
namespace {

// Bytes of '"' + value + '"' taken, and whether the document may end there.
std::pair<size_t, bool> run(const JsonSchema& s, const std::string& value) {
  const std::string text = "\"" + value + "\"";
  JsonSchemaRecognizer r(s);
  size_t n = 0;
  while (n < text.size() && r.push(uint8_t(text[n]))) ++n;
  return {n, r.can_end()};
}

std::shared_ptr<const JsonSchema> format(const char* name) {
  return compile_json_schema(json::parse(std::string(R"({"type": "string", "format": ")") + name + "\"}"));
}

TEST(JsonStringFormat, DatesFollowTheCalendar) {
  const auto g = format("date");
  int valid = 0;
  for (int year : {1, 4, 100, 1600, 1900, 2000, 2023, 2024, 2100, 9999})
    for (unsigned month = 0; month <= 13; ++month)
      for (unsigned day = 0; day <= 32; ++day) {
        char text[16];
        std::snprintf(text, sizeof(text), "%04d-%02u-%02u", year, month, day);
        const bool ok = std::chrono::year_month_day{std::chrono::year{year}, std::chrono::month{month},
                                                    std::chrono::day{day}}
                            .ok();
        const auto [n, end] = run(*g, text);
        ASSERT_EQ(n == 12 && end, ok) << text;
        if (ok) {
          for (size_t k = 0; k <= 10; ++k) ASSERT_GE(run(*g, std::string(text, k)).first, k + 1) << text;
          ++valid;
        }
      }
  EXPECT_EQ(valid, 10 * 365 + 4);  // leap years here: 4, 1600, 2000, 2024 (not 100, 1900, 2100)
  EXPECT_EQ(run(*g, "0000-01-01").first, 4u);  // the fourth '0' of year 0
}

TEST(JsonStringFormat, DottedQuadsFollowInetPton) {
  const auto g = format("ipv4");
  const char* parts[] = {"0", "1", "9", "10", "99", "100", "199", "249", "255", "256", "300", "00", "01", "1000"};
  std::mt19937 rng(4);
  int valid = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string text;
    const int count = 3 + int(rng() % 3);  // 3-5 parts
    for (int p = 0; p < count; ++p) text += (p ? "." : "") + std::string(parts[rng() % std::size(parts)]);
    in_addr addr;
    const bool ok = inet_pton(AF_INET, text.c_str(), &addr) == 1;
    const auto [n, end] = run(*g, text);
    ASSERT_EQ(n == text.size() + 2 && end, ok) << text;
    valid += ok;
  }
  EXPECT_GT(valid, 100);
}

TEST(JsonStringFormat, FormatsShareOneDfaOutsideThePatternsBudget) {
  // Compiled once per process: every schema holds the same DFA, however many formatted strings it has.
  const auto a = format("date-time"), b = format("date-time");
  ASSERT_EQ(a->patterns.size(), 1u);
  EXPECT_EQ(a->patterns[0], b->patterns[0]);
  EXPECT_LT(a->patterns[0]->next.size(), 400u);
  // Enough date-times that their states, counted as a pattern's, would pass the budget of 8 * kMaxStates.
  const size_t copies = 8 * StringPattern::kMaxStates / a->patterns[0]->next.size() + 1;
  std::string items;
  for (size_t i = 0; i < copies; ++i) items += (i ? ", " : "") + std::string(R"({"format": "date-time"})");
  EXPECT_EQ(compile_json_schema(json::parse(R"({"prefixItems": [)" + items + "]}"))->patterns.size(), copies);
  EXPECT_EQ(format("email")->patterns.size(), 0u);  // email keeps its own small automaton
}

}  // namespace
}  // namespace attnzoo
