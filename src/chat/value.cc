#include "chat/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace attnzoo::chat {

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k.is_string() && k.as_string() == key) return &v;
  }
  return nullptr;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.as_string()));
  for (const auto& [k, v] : items) {
    if (equals(k, key)) return &v;
  }
  return nullptr;
}

void Dict::set(Value key, Value value) {
  for (auto& [k, v] : items) {
    if (equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

void Dict::set(std::string key, Value value) { set(Value::string(std::move(key)), std::move(value)); }

const std::shared_ptr<const std::string>& Value::empty_string() {
  static const auto empty = std::make_shared<const std::string>();
  return empty;
}

namespace {
uint16_t depth_of(const List& items) {
  int d = 0;
  for (const Value& x : items) d = std::max(d, x.depth());
  return uint16_t(std::min(d + 1, 65535));
}
}  // namespace

Value Value::undefined(std::string name) {
  Value v;
  v.string_ = std::make_shared<const std::string>(std::move(name));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::none;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::boolean;
  v.bool_ = b;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::integer;
  v.int_ = i;
  return v;
}

Value Value::floating(double d) {
  Value v;
  v.kind_ = Kind::floating;
  v.double_ = d;
  return v;
}

Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::string;
  v.string_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

Value Value::list(List items, bool tuple) {
  Value v;
  v.kind_ = Kind::list;
  v.tuple_ = tuple;
  v.depth_ = depth_of(items);
  v.list_ = std::make_shared<const List>(std::move(items));
  return v;
}

Value Value::dict(Dict d) {
  Value v;
  v.kind_ = Kind::dict;
  int depth = 0;
  for (const auto& [k, x] : d.items) depth = std::max(depth, x.depth());
  v.depth_ = uint16_t(std::min(depth + 1, 65535));
  v.dict_ = std::make_shared<const Dict>(std::move(d));
  return v;
}

Value Value::make_namespace(Dict attrs) {
  Value v;
  v.kind_ = Kind::ns;
  v.ns_ = std::make_shared<Namespace>(Namespace{std::move(attrs)});
  return v;
}

Value Value::callable(std::string name, Builtin fn) {
  Value v;
  v.kind_ = Kind::callable;
  v.fn_ = std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

Value Value::from_json(const json::Value& j) {
  switch (j.kind()) {
    case json::Value::Kind::null: return none();
    case json::Value::Kind::boolean: return boolean(j.as_bool());
    case json::Value::Kind::number:
      if (j.is_integer() && !j.is_float_literal()) return integer(j.as_int());
      return floating(j.as_double());
    case json::Value::Kind::string: return string(j.as_string());
    case json::Value::Kind::array: {
      List items;
      items.reserve(j.as_array().size());
      for (const auto& x : j.as_array()) items.push_back(from_json(x));
      return list(std::move(items));
    }
    case json::Value::Kind::object: {
      Dict d;
      for (const json::Member* m : j.members_in_source_order()) d.items.emplace_back(string(m->first), from_json(m->second));
      return dict(std::move(d));
    }
  }
  return Value();
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::undefined:
    case Kind::none: return false;
    case Kind::boolean: return bool_;
    case Kind::integer: return int_ != 0;
    case Kind::floating: return double_ != 0;
    case Kind::string: return !string_->empty();
    case Kind::list: return !list_->empty();
    case Kind::dict: return !dict_->items.empty();
    case Kind::ns:
    case Kind::callable: return true;
  }
  return false;
}

const char* Value::type_name() const {
  switch (kind_) {
    case Kind::undefined: return "Undefined";
    case Kind::none: return "NoneType";
    case Kind::boolean: return "bool";
    case Kind::integer: return "int";
    case Kind::floating: return "float";
    case Kind::string: return "str";
    case Kind::list: return tuple_ ? "tuple" : "list";
    case Kind::dict: return "dict";
    case Kind::ns: return "Namespace";
    case Kind::callable: return "function";
  }
  return "?";
}

// Python's repr(float): the shortest digits that round-trip, positional for exponents in [-4, 16), else
// scientific with at least two exponent digits.
std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  const size_t e_pos = sci.find('e');
  std::string mantissa = sci.substr(0, e_pos);
  const int exponent = std::stoi(sci.substr(e_pos + 1));
  std::string sign;
  if (mantissa[0] == '-') {
    sign = "-";
    mantissa.erase(0, 1);
  }
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  if (exponent >= -4 && exponent < 16) {
    std::string out;
    if (exponent < 0) {
      out = "0." + std::string(size_t(-exponent - 1), '0') + digits;
    } else if (size_t(exponent) + 1 >= digits.size()) {
      out = digits + std::string(size_t(exponent) + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, size_t(exponent) + 1) + "." + digits.substr(size_t(exponent) + 1);
    }
    return sign + out;
  }
  std::string out = digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof exp_buf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return sign + out + exp_buf;
}

namespace {

std::string string_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c == quote) {
          out += '\\';
          out += char(c);
        } else if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  out += quote;
  return out;
}

}  // namespace

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::undefined: return "";
    case Value::Kind::string: return v.as_string();
    default: return to_repr(v);
  }
}

std::string to_repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::undefined: return "Undefined";
    case Value::Kind::none: return "None";
    case Value::Kind::boolean: return v.as_bool() ? "True" : "False";
    case Value::Kind::integer: return std::to_string(v.as_int());
    case Value::Kind::floating: return float_repr(v.as_double());
    case Value::Kind::string: return string_repr(v.as_string());
    case Value::Kind::list: {
      std::string out = v.is_tuple() ? "(" : "[";
      const List& items = v.as_list();
      for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + to_repr(items[i]);
      if (v.is_tuple() && items.size() == 1) out += ",";
      return out + (v.is_tuple() ? ")" : "]");
    }
    case Value::Kind::dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, x] : v.as_dict().items) {
        out += (first ? "" : ", ") + to_repr(k) + ": " + to_repr(x);
        first = false;
      }
      return out + "}";
    }
    case Value::Kind::ns: {
      std::string out = "<Namespace {";
      bool first = true;
      for (const auto& [k, x] : v.as_namespace().attrs.items) {
        out += (first ? "" : ", ") + to_repr(k) + ": " + to_repr(x);
        first = false;
      }
      return out + "}>";
    }
    case Value::Kind::callable: return "<function " + v.as_callable().name + ">";
  }
  return "";
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::undefined:
    case Value::Kind::none: return true;
    case Value::Kind::string: return a.as_string() == b.as_string();
    case Value::Kind::list: {
      const List &x = a.as_list(), &y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!equals(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::dict: {
      const Dict &x = a.as_dict(), &y = b.as_dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* w = y.find(k);
        if (!w || !equals(v, *w)) return false;
      }
      return true;
    }
    case Value::Kind::ns: return &a.as_namespace() == &b.as_namespace();
    case Value::Kind::callable: return &a.as_callable() == &b.as_callable();
    default: return false;
  }
}

bool less_than(const Value& a, const Value& b, bool* ok) {
  *ok = true;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_list() && b.is_list()) {
    const List &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i])) continue;
      return less_than(x[i], y[i], ok);
    }
    return x.size() < y.size();
  }
  *ok = false;
  return false;
}

}  // namespace attnzoo::chat
