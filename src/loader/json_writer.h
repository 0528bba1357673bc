#pragma once
// Writes JSON text: the other half of json.h, for what we send (server responses, --json reports). Values are
// appended as they come, so a streamed response is built without an intermediate tree. Strings that are not
// valid UTF-8 have each bad byte replaced by U+FFFD (the output always parses); non-finite numbers become null.
// A double is written with a fraction or an exponent (10000.0), an int64 without: types survive a round trip.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "loader/json.h"

namespace attnzoo::json {

class Writer {
 public:
  Writer& begin_object();
  Writer& end_object();
  Writer& begin_array();
  Writer& end_array();
  Writer& key(std::string_view k);  // inside an object, before each value

  Writer& value(std::string_view s);
  Writer& value(const char* s) { return value(std::string_view(s)); }
  Writer& value(const std::string& s) { return value(std::string_view(s)); }
  Writer& value(bool b);
  Writer& value(int64_t i);
  Writer& value(int i) { return value(int64_t(i)); }
  Writer& value(double d);
  Writer& value(float f) { return value(double(f)); }
  Writer& value(const Value& v);  // a parsed value written back (object members in source order)
  Writer& null();

  // Shorthands for one object member.
  template <typename T>
  Writer& member(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }

  // The text so far; complete once every object and array is closed (throws std::logic_error otherwise).
  const std::string& str() const;
  std::string take();

 private:
  void before_value();

  std::string out_;
  struct Open {
    bool object;
    bool empty;  // nothing written in it yet
  };
  std::vector<Open> open_;
  bool after_key_ = false;
};

// `s` as a JSON string literal appended to `out`, escaped as Python's json.dumps(ensure_ascii=False) does
// (", \\, \n, \r, \t, \b, \f, other control characters as \u00XX), invalid UTF-8 bytes replaced by U+FFFD.
void append_string(std::string& out, std::string_view s);

// Shortest text that reads back as exactly `d` (std::to_chars); "null" for NaN and infinities.
std::string number_text(double d);

}  // namespace attnzoo::json
