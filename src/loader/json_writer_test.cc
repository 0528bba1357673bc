#include "loader/json_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "loader/json.h"

namespace attnzoo::json {
namespace {

TEST(JsonWriter, NestedValuesParseBack) {
  Writer w;
  w.begin_object()
      .member("id", "cmpl-1")
      .member("n", int64_t(-3))
      .member("p", 0.1)
      .member("ok", true)
      .key("list")
      .begin_array()
      .value(1)
      .null()
      .begin_object()
      .end_object()
      .begin_array()
      .end_array()
      .end_array()
      .end_object();
  const std::string text = w.take();
  EXPECT_EQ(text, R"({"id":"cmpl-1","n":-3,"p":0.1,"ok":true,"list":[1,null,{},[]]})");
  const Value v = parse(text);
  EXPECT_EQ(v.find("p")->as_double(), 0.1);
  EXPECT_EQ(v.find("list")->as_array().size(), 4u);
}

TEST(JsonWriter, NumbersRoundTripAndNonFiniteIsNull) {
  for (double d : {0.0, -0.5, 1e-300, 123456789.125, 1.0 / 3.0, -std::numeric_limits<double>::max()}) {
    EXPECT_EQ(parse(number_text(d)).as_double(), d) << number_text(d);
  }
  EXPECT_EQ(number_text(std::nan("")), "null");
  EXPECT_EQ(number_text(-std::numeric_limits<double>::infinity()), "null");
  Writer w;
  w.begin_array().value(std::numeric_limits<float>::infinity()).end_array();
  EXPECT_EQ(w.take(), "[null]");
}

TEST(JsonWriter, DoublesStayFloatsAndIntegersStayIntegers) {
  Writer w;
  w.begin_array().value(10000.0).value(-0.0).value(1e20).value(2.5).value(int64_t(10000)).value(1e-6).end_array();
  const std::string text = w.take();
  EXPECT_EQ(text, "[10000.0,-0.0,1e+20,2.5,10000,1e-06]");
  const Value v = parse(text);
  EXPECT_TRUE(v.as_array()[0].is_float_literal());
  EXPECT_FALSE(v.as_array()[4].is_float_literal());
  EXPECT_EQ(v.as_array()[2].as_double(), 1e20);
}

TEST(JsonWriter, StringsEscapedAndInvalidUtf8Replaced) {
  std::string out;
  const std::string s("a\"b\\c\n\t\x01\x7f\b\f\r", 12);
  append_string(out, s);
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\n\\t\\u0001\x7f\\b\\f\\r\"");  // as Python's json.dumps(ensure_ascii=False)
  EXPECT_EQ(parse(out).as_string(), s);
  EXPECT_EQ(quote(s), out);
  out.clear();
  // é, 😀, then a lone continuation byte, a truncated 3-byte sequence, an overlong '/', and a surrogate.
  append_string(out, "\xC3\xA9\xF0\x9F\x98\x80|\x80|\xE2\x82|\xC0\xAF|\xED\xA0\x80");
  EXPECT_EQ(parse(out).as_string(),
            "\xC3\xA9\xF0\x9F\x98\x80|\xEF\xBF\xBD|\xEF\xBF\xBD\xEF\xBF\xBD|\xEF\xBF\xBD\xEF\xBF\xBD|"
            "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(JsonWriter, ParsedValueWrittenBackInSourceOrder) {
  const std::string text = R"({"z":[1,2.5,"x",null,false],"a":{"k":1e3}})";
  Writer w;
  w.value(parse(text));
  EXPECT_EQ(w.take(), R"({"z":[1,2.5,"x",null,false],"a":{"k":1000.0}})");  // 1e3 is a float, as in Python
}

TEST(JsonWriter, MisuseIsALogicError) {
  Writer w;
  w.begin_object();
  EXPECT_THROW(w.str(), std::logic_error);
  EXPECT_THROW(w.value(1), std::logic_error);  // an object member needs its key first
  Writer a;
  a.begin_array();
  EXPECT_THROW(a.key("k"), std::logic_error);
  EXPECT_THROW(a.end_object(), std::logic_error);
  Writer b;
  b.value(1);
  EXPECT_THROW(b.value(2), std::logic_error);
}

}  // namespace
}  // namespace attnzoo::json
