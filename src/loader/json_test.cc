#include "loader/json.h"

#include <gtest/gtest.h>

#include <string>

namespace attnzoo::json {
namespace {

size_t error_offset(std::string_view text, ParseOptions options = {}) {
  try {
    parse(text, options);
  } catch (const ParseError& e) {
    return e.offset;
  }
  ADD_FAILURE() << "accepted invalid JSON: " << text;
  return size_t(-1);
}

TEST(Json, Literals) {
  EXPECT_TRUE(parse("null").is_null());
  EXPECT_TRUE(parse(" true ").as_bool());
  EXPECT_FALSE(parse("\t\r\nfalse\n").as_bool());
}

TEST(Json, NestedValues) {
  Value v = parse(R"({"b": [1, {"c": null}, "x"], "a": {"d": true}, "": 0})");
  ASSERT_TRUE(v.is_object());
  EXPECT_EQ(v.as_object().size(), 3u);
  const Value* b = v.find("b");
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(b->as_array().size(), 3u);
  EXPECT_EQ(b->as_array()[0].as_int(), 1);
  EXPECT_TRUE(b->as_array()[1].find("c")->is_null());
  EXPECT_EQ(b->as_array()[2].as_string(), "x");
  EXPECT_TRUE(v.find("a")->find("d")->as_bool());
  EXPECT_EQ(v.find("")->as_int(), 0);
  EXPECT_EQ(v.find("missing"), nullptr);
  EXPECT_EQ(b->find("x"), nullptr);  // not an object
  EXPECT_TRUE(parse("[]").as_array().empty());
  EXPECT_TRUE(parse("{ }").as_object().empty());
}

TEST(Json, Numbers) {
  EXPECT_EQ(parse("0").as_int(), 0);
  EXPECT_EQ(parse("-0").as_int(), 0);
  EXPECT_EQ(parse("123456789012345678").as_int(), 123456789012345678);  // beyond double precision, exact
  EXPECT_EQ(parse("9223372036854775807").as_int(), INT64_MAX);
  EXPECT_EQ(parse("-9223372036854775808").as_int(), INT64_MIN);
  Value big = parse("9223372036854775808");  // past int64: a double, not an integer
  EXPECT_FALSE(big.is_integer());
  EXPECT_DOUBLE_EQ(big.as_double(), 9223372036854775808.0);
  EXPECT_THROW(big.as_int(), LoadError);
  EXPECT_DOUBLE_EQ(parse("1.5").as_double(), 1.5);
  EXPECT_FALSE(parse("1.5").is_integer());
  EXPECT_THROW(parse("1.5").as_int(), LoadError);
  EXPECT_EQ(parse("2.0").as_int(), 2);     // integral value written as a float
  EXPECT_EQ(parse("1e3").as_int(), 1000);
  EXPECT_EQ(parse("1E+3").as_int(), 1000);
  EXPECT_DOUBLE_EQ(parse("-2.5e-3").as_double(), -2.5e-3);
  EXPECT_DOUBLE_EQ(parse("10000.0").as_double(), 10000.0);
  EXPECT_FALSE(parse("1e20").is_integer());  // integral but beyond 2^53: only a double
  EXPECT_DOUBLE_EQ(parse("1e20").as_double(), 1e20);
  EXPECT_DOUBLE_EQ(parse("0.1").as_double(), 0.1);  // correctly rounded
}

TEST(Json, StringEscapes) {
  EXPECT_EQ(parse(R"("a\"b\\c\/d\b\f\n\r\t")").as_string(), "a\"b\\c/d\b\f\n\r\t");
  EXPECT_EQ(parse(R"("\u0041\u00e9\u20AC")").as_string(), "A\xC3\xA9\xE2\x82\xAC");
  EXPECT_EQ(parse(R"("\ud83d\ude00")").as_string(), "\xF0\x9F\x98\x80");  // surrogate pair -> U+1F600
  EXPECT_EQ(parse(R"("\u0000")").as_string(), std::string(1, '\0'));
  EXPECT_EQ(parse("\"caf\xC3\xA9 \xF0\x9F\x98\x80\"").as_string(), "caf\xC3\xA9 \xF0\x9F\x98\x80");  // raw UTF-8
}

TEST(Json, InvalidCorpusReportsOffsets) {
  struct Case {
    const char* text;
    size_t offset;
  };
  const Case cases[] = {
      {"", 0},
      {"   ", 3},
      {"nul", 0},
      {"tru", 0},
      {"[1,]", 3},
      {"[1 2]", 3},
      {"{\"a\" 1}", 5},
      {"{\"a\":1,}", 7},
      {"{a:1}", 1},
      {"{\"a\":1", 6},
      {"[", 1},
      {"01", 1},
      {"-", 1},
      {"1.", 2},
      {"1e", 2},
      {".5", 0},
      {"+1", 0},
      {"NaN", 0},
      {"Infinity", 0},
      {"1e400", 0},
      {"\"abc", 4},
      {"\"a\nb\"", 2},
      {"\"\\x\"", 2},
      {"\"\\u12G4\"", 5},
      {"\"\\ud800\"", 7},         // lone high surrogate
      {"\"\\udc00\"", 7},         // lone low surrogate
      {"\"\\ud800\\u0041\"", 13},  // high surrogate + non-surrogate
      {"\"\xC3\"", 1},            // truncated sequence
      {"\"\xC0\xAF\"", 1},        // overlong '/'
      {"\"\xED\xA0\x80\"", 1},    // encoded surrogate
      {"\"\xF4\x90\x80\x80\"", 1},  // past U+10FFFF
      {"\"\xFF\"", 1},
      {"1 2", 2},
      {"{} x", 3},
      {"// c\n1", 0},
      {"\xEF\xBB\xBF{}", 0},      // byte order mark
  };
  for (const Case& c : cases) {
    EXPECT_EQ(error_offset(c.text), c.offset) << "input: " << c.text;
  }
  EXPECT_EQ(error_offset(std::string_view("[1]\0", 4)), 3u);  // an embedded NUL is not whitespace
}

TEST(Json, DuplicateKeysRejected) {
  try {
    parse(R"({"x": {"a": 1, "b": 2, "a": 3}})");
    FAIL() << "accepted duplicate keys";
  } catch (const ParseError& e) {
    EXPECT_NE(std::string(e.what()).find("duplicate key \"a\""), std::string::npos) << e.what();
    EXPECT_EQ(e.offset, 6u);
  }
}

TEST(Json, DepthLimit) {
  auto nested = [](int depth) { return std::string(size_t(depth), '[') + std::string(size_t(depth), ']'); };
  EXPECT_NO_THROW(parse(nested(256)));
  EXPECT_EQ(error_offset(nested(257)), 256u);
  EXPECT_EQ(error_offset(nested(100000)), 256u);  // no stack overflow
  EXPECT_NO_THROW(parse(nested(4), ParseOptions{4}));
  EXPECT_EQ(error_offset("{\"a\":{\"b\":{}}}", ParseOptions{2}), 10u);
}

TEST(Json, WrongKindAccessorsThrow) {
  Value v = parse(R"({"s": "x"})");
  EXPECT_THROW(v.as_array(), LoadError);
  EXPECT_THROW(v.find("s")->as_int(), LoadError);
  EXPECT_THROW(v.find("s")->as_bool(), LoadError);
  EXPECT_THROW(parse("1").as_string(), LoadError);
}

TEST(Json, ErrorIsArgumentError) {
  // Front ends translate ArgumentError to ValueError; a JSON error must be one.
  EXPECT_THROW(parse("["), ArgumentError);
}

TEST(Json, QuoteRoundTrips) {
  const std::string s = std::string("a\"b\\c\n\t\r\x01\x1f ") + "\xC3\xA9" + std::string(1, '\0');
  EXPECT_EQ(json::quote("x\"\n"), "\"x\\\"\\n\"");
  EXPECT_EQ(json::parse(json::quote(s)).as_string(), s);
}

}  // namespace
}  // namespace attnzoo::json
