#include "loader/json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/utf8.h"

namespace attnzoo::json {

ParseError::ParseError(size_t offset, const std::string& message)
    : LoadError("invalid JSON at byte " + std::to_string(offset) + ": " + message), offset(offset), detail(message) {}

const char* kind_name(Value::Kind k) {
  switch (k) {
    case Value::Kind::null: return "null";
    case Value::Kind::boolean: return "boolean";
    case Value::Kind::number: return "number";
    case Value::Kind::string: return "string";
    case Value::Kind::array: return "array";
    case Value::Kind::object: return "object";
  }
  return "?";
}

Value Value::make_bool(bool b) {
  Value v;
  v.kind_ = Kind::boolean;
  v.bool_ = b;
  return v;
}

Value Value::make_number(double d, bool integral, int64_t i, bool float_literal) {
  Value v;
  v.float_literal_ = float_literal;
  v.kind_ = Kind::number;
  v.double_ = d;
  v.integral_ = integral;
  v.int_ = i;
  return v;
}

Value Value::make_string(std::string s) {
  Value v;
  v.kind_ = Kind::string;
  v.string_ = std::move(s);
  return v;
}

Value Value::make_array(Array a) {
  Value v;
  v.kind_ = Kind::array;
  v.array_ = std::move(a);
  return v;
}

Value Value::make_object(Object o) {
  Value v;
  v.kind_ = Kind::object;
  std::vector<uint32_t> by_key(o.size());
  for (uint32_t i = 0; i < by_key.size(); ++i) by_key[i] = i;
  std::stable_sort(by_key.begin(), by_key.end(), [&](uint32_t a, uint32_t b) { return o[a].first < o[b].first; });
  v.object_.reserve(o.size());
  v.source_order_.resize(o.size());
  for (uint32_t k = 0; k < by_key.size(); ++k) {
    v.source_order_[by_key[k]] = k;
    v.object_.push_back(std::move(o[by_key[k]]));
  }
  return v;
}

std::vector<const Member*> Value::members_in_source_order() const {
  std::vector<const Member*> out;
  if (kind_ != Kind::object) return out;
  out.reserve(object_.size());
  for (uint32_t k : source_order_) out.push_back(&object_[k]);
  return out;
}

namespace {
[[noreturn]] void wrong_kind(Value::Kind want, Value::Kind got) {
  throw LoadError(std::string("expected a JSON ") + kind_name(want) + ", found " + kind_name(got));
}
}  // namespace

bool Value::as_bool() const {
  if (kind_ != Kind::boolean) wrong_kind(Kind::boolean, kind_);
  return bool_;
}

double Value::as_double() const {
  if (kind_ != Kind::number) wrong_kind(Kind::number, kind_);
  return double_;
}

int64_t Value::as_int() const {
  if (kind_ != Kind::number) wrong_kind(Kind::number, kind_);
  if (!integral_) throw LoadError("expected an integer, found the number " + std::to_string(double_));
  return int_;
}

const std::string& Value::as_string() const {
  if (kind_ != Kind::string) wrong_kind(Kind::string, kind_);
  return string_;
}

const Array& Value::as_array() const {
  if (kind_ != Kind::array) wrong_kind(Kind::array, kind_);
  return array_;
}

const Object& Value::as_object() const {
  if (kind_ != Kind::object) wrong_kind(Kind::object, kind_);
  return object_;
}

const Value* Value::find(std::string_view key) const {
  if (kind_ != Kind::object) return nullptr;
  auto it = std::lower_bound(object_.begin(), object_.end(), key,
                             [](const Member& m, std::string_view k) { return m.first < k; });
  return it != object_.end() && it->first == key ? &it->second : nullptr;
}

namespace {

class Parser {
 public:
  Parser(std::string_view text, ParseOptions options) : s_(text), options_(options) {}

  Value parse_document() {
    skip_whitespace();
    Value v = parse_value(0);
    skip_whitespace();
    if (pos_ != s_.size()) fail("unexpected trailing characters after the top-level value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& message) const { throw ParseError(pos_, message); }

  bool at_end() const { return pos_ >= s_.size(); }
  unsigned char peek() const { return static_cast<unsigned char>(s_[pos_]); }

  void skip_whitespace() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) ++pos_;
  }

  void expect_literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) fail("invalid literal (expected '" + std::string(word) + "')");
    pos_ += word.size();
  }

  Value parse_value(int depth) {
    if (at_end()) fail("unexpected end of input, expected a value");
    // Every value costs sizeof(Value) however short its text ("0," is two bytes): the count bounds memory.
    if (++values_ > options_.max_values) {
      ParseError e(pos_, "more than " + std::to_string(options_.max_values) +
                             " values (the parser's limit for one document)");
      e.value_limit = true;
      throw e;
    }
    switch (peek()) {
      case '{': return parse_object(depth + 1);
      case '[': return parse_array(depth + 1);
      case '"': return Value::make_string(parse_string());
      case 't': expect_literal("true"); return Value::make_bool(true);
      case 'f': expect_literal("false"); return Value::make_bool(false);
      case 'n': expect_literal("null"); return Value();
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return parse_number();
        fail(describe_byte("unexpected character"));
    }
  }

  std::string describe_byte(const char* what) const {
    unsigned char c = peek();
    char buf[64];
    if (c >= 0x20 && c < 0x7f) {
      std::snprintf(buf, sizeof buf, "%s '%c'", what, c);
    } else {
      std::snprintf(buf, sizeof buf, "%s (byte 0x%02x)", what, c);
    }
    return buf;
  }

  int64_t values_ = 0;

  void check_depth(int depth) {
    if (depth > options_.max_depth) fail("nesting deeper than " + std::to_string(options_.max_depth) + " levels");
  }

  Value parse_array(int depth) {
    check_depth(depth);
    ++pos_;  // '['
    Array items;
    skip_whitespace();
    if (!at_end() && peek() == ']') {
      ++pos_;
      return Value::make_array(std::move(items));
    }
    for (;;) {
      skip_whitespace();
      items.push_back(parse_value(depth));
      skip_whitespace();
      if (at_end()) fail("unexpected end of input inside an array");
      if (peek() == ',') { ++pos_; continue; }
      if (peek() == ']') { ++pos_; break; }
      fail(describe_byte("expected ',' or ']' in an array, found"));
    }
    return Value::make_array(std::move(items));
  }

  Value parse_object(int depth) {
    check_depth(depth);
    size_t start = pos_;
    ++pos_;  // '{'
    Object members;
    skip_whitespace();
    if (!at_end() && peek() == '}') {
      ++pos_;
      return Value::make_object(std::move(members));
    }
    for (;;) {
      skip_whitespace();
      if (at_end() || peek() != '"') fail("expected a string key in an object");
      std::string key = parse_string();
      skip_whitespace();
      if (at_end() || peek() != ':') fail("expected ':' after an object key");
      ++pos_;
      skip_whitespace();
      Value v = parse_value(depth);
      members.emplace_back(std::move(key), std::move(v));
      skip_whitespace();
      if (at_end()) fail("unexpected end of input inside an object");
      if (peek() == ',') { ++pos_; continue; }
      if (peek() == '}') { ++pos_; break; }
      fail(describe_byte("expected ',' or '}' in an object, found"));
    }
    Value v = Value::make_object(std::move(members));
    // make_object sorted the members; equal neighbours are duplicates (ambiguous: which one wins differs
    // between readers, so an untrusted file that has them is rejected).
    const Object& sorted = v.as_object();
    for (size_t i = 1; i < sorted.size(); ++i) {
      if (sorted[i].first == sorted[i - 1].first) {
        throw ParseError(start, "duplicate key \"" + sorted[i].first + "\" in the object starting here");
      }
    }
    return v;
  }

  unsigned hex4() {
    if (s_.size() - pos_ < 4) fail("truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      unsigned char c = peek();
      unsigned d;
      if (c >= '0' && c <= '9') d = c - '0';
      else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      else fail("invalid hex digit in \\u escape");
      v = v * 16 + d;
      ++pos_;
    }
    return v;
  }

  std::string parse_string() {
    ++pos_;  // opening quote
    std::string out;
    for (;;) {
      if (at_end()) fail("unterminated string");
      unsigned char c = peek();
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) fail(describe_byte("unescaped control character in a string"));
      if (c == '\\') {
        ++pos_;
        if (at_end()) fail("unterminated escape");
        char e = char(peek());
        ++pos_;
        switch (e) {
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case '/': out += '/'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't': out += '\t'; break;
          case 'u': {
            uint32_t cp = hex4();
            if (cp >= 0xDC00 && cp <= 0xDFFF) fail("unpaired low surrogate in \\u escape");
            if (cp >= 0xD800 && cp <= 0xDBFF) {
              if (s_.substr(pos_, 2) != "\\u") fail("high surrogate not followed by a \\u low surrogate");
              pos_ += 2;
              uint32_t lo = hex4();
              if (lo < 0xDC00 || lo > 0xDFFF) fail("high surrogate not followed by a low surrogate");
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            utf8::append(out, cp);
            break;
          }
          default:
            --pos_;
            fail(describe_byte("invalid escape"));
        }
        continue;
      }
      uint32_t cp;
      const size_t n = utf8::decode(s_, pos_, &cp);
      if (n == 0) fail(describe_byte("invalid UTF-8 in a string"));
      out.append(s_.substr(pos_, n));
      pos_ += n;
    }
  }

  Value parse_number() {
    const size_t start = pos_;
    auto digit = [&] { return !at_end() && peek() >= '0' && peek() <= '9'; };
    if (peek() == '-') ++pos_;
    if (!digit()) fail("expected a digit");
    if (peek() == '0') {
      ++pos_;
      if (digit()) fail("leading zeros are not allowed");
    } else {
      while (digit()) ++pos_;
    }
    bool plain_integer = true;
    if (!at_end() && peek() == '.') {
      plain_integer = false;
      ++pos_;
      if (!digit()) fail("expected a digit after the decimal point");
      while (digit()) ++pos_;
    }
    if (!at_end() && (peek() == 'e' || peek() == 'E')) {
      plain_integer = false;
      ++pos_;
      if (!at_end() && (peek() == '+' || peek() == '-')) ++pos_;
      if (!digit()) fail("expected a digit in the exponent");
      while (digit()) ++pos_;
    }
    const char* first = s_.data() + start;
    const char* last = s_.data() + pos_;
    double d = 0;
    auto [ptr, ec] = std::from_chars(first, last, d);
    if (ec != std::errc() || ptr != last || !std::isfinite(d)) {
      throw ParseError(start, "number out of range: " + std::string(first, last));
    }
    if (plain_integer) {
      int64_t i = 0;
      auto r = std::from_chars(first, last, i);
      if (r.ec == std::errc() && r.ptr == last) return Value::make_number(d, true, i);
      return Value::make_number(d, false, 0);  // beyond int64: a double only
    }
    constexpr double kExact = 9007199254740992.0;  // 2^53
    if (std::trunc(d) == d && std::fabs(d) <= kExact) return Value::make_number(d, true, int64_t(d), true);
    return Value::make_number(d, false, 0, true);
  }

  std::string_view s_;
  ParseOptions options_;
  size_t pos_ = 0;
};

}  // namespace

Value parse(std::string_view text, ParseOptions options) { return Parser(text, options).parse_document(); }

}  // namespace attnzoo::json
