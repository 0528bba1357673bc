#include "loader/json_writer.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace attnzoo::json {
namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 when the bytes there are not one (RFC 3629:
// no overlongs, no surrogates, nothing above U+10FFFF).
size_t utf8_sequence_length(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
  else return 0;
  if (i + n > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  return n;
}

}  // namespace

void append_string(std::string& out, std::string_view s) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = utf8_sequence_length(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    if (n > 1) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    ++i;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  out += '"';
}

std::string quote(std::string_view s) {
  std::string out;
  append_string(out, s);
  return out;
}

std::string number_text(double d) {
  if (!std::isfinite(d)) return "null";
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, d);
  return std::string(buf, r.ptr);
}

void Writer::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!open_.empty()) {
    if (open_.back().object) throw std::logic_error("json::Writer: an object member without a key");
    if (!open_.back().empty) out_ += ',';
    open_.back().empty = false;
  } else if (!out_.empty()) {
    throw std::logic_error("json::Writer: a second top-level value");
  }
}

Writer& Writer::begin_object() {
  before_value();
  out_ += '{';
  open_.push_back({true, true});
  return *this;
}

Writer& Writer::end_object() {
  if (open_.empty() || !open_.back().object || after_key_)
    throw std::logic_error("json::Writer: end_object without an open object");
  open_.pop_back();
  out_ += '}';
  return *this;
}

Writer& Writer::begin_array() {
  before_value();
  out_ += '[';
  open_.push_back({false, true});
  return *this;
}

Writer& Writer::end_array() {
  if (open_.empty() || open_.back().object || after_key_)
    throw std::logic_error("json::Writer: end_array without an open array");
  open_.pop_back();
  out_ += ']';
  return *this;
}

Writer& Writer::key(std::string_view k) {
  if (open_.empty() || !open_.back().object || after_key_)
    throw std::logic_error("json::Writer: a key outside an object");
  if (!open_.back().empty) out_ += ',';
  open_.back().empty = false;
  append_string(out_, k);
  out_ += ':';
  after_key_ = true;
  return *this;
}

Writer& Writer::value(std::string_view s) {
  before_value();
  append_string(out_, s);
  return *this;
}

Writer& Writer::value(bool b) {
  before_value();
  out_ += b ? "true" : "false";
  return *this;
}

Writer& Writer::value(int64_t i) {
  before_value();
  out_ += std::to_string(i);
  return *this;
}

Writer& Writer::value(double d) {
  before_value();
  const size_t start = out_.size();
  out_ += number_text(d);
  // A double keeps a fraction or an exponent (10000.0, not 10000), as Python's json writes floats, so that a
  // reader tells it from an integer: config values such as rope_theta must stay floats.
  if (out_.find_first_of(".en", start) == std::string::npos) out_ += ".0";
  return *this;
}

Writer& Writer::null() {
  before_value();
  out_ += "null";
  return *this;
}

Writer& Writer::value(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::null: return null();
    case Value::Kind::boolean: return value(v.as_bool());
    case Value::Kind::number: return v.is_integer() && !v.is_float_literal() ? value(v.as_int()) : value(v.as_double());
    case Value::Kind::string: return value(v.as_string());
    case Value::Kind::array:
      begin_array();
      for (const Value& item : v.as_array()) value(item);
      return end_array();
    case Value::Kind::object:
      begin_object();
      for (const Member* m : v.members_in_source_order()) {
        key(m->first);
        value(m->second);
      }
      return end_object();
  }
  return *this;
}

const std::string& Writer::str() const {
  if (!open_.empty() || after_key_ || out_.empty()) throw std::logic_error("json::Writer: the value is not complete");
  return out_;
}

std::string Writer::take() {
  str();
  std::string out = std::move(out_);
  out_.clear();
  return out;
}

}  // namespace attnzoo::json
