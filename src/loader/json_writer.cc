#include "loader/json_writer.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "core/utf8.h"

namespace attnzoo::json {

void append_string(std::string& out, std::string_view s) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    uint32_t cp;
    const size_t n = utf8::decode(s, i, &cp);
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
