#include "chat/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "chat/interpreter.h"
#include "chat/text.h"

namespace attnzoo::chat {
namespace {
// Key equality: keys are scalars, which compare without walking anything (1 == 1.0 == True, as in Python).
bool same_key(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  if (a.is_string()) return a.as_string() == b.as_string();
  return a.is_none() || a.is_undefined();
}
}  // namespace

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k.is_string() && k.as_string() == key) return &v;
  }
  return nullptr;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.as_string()));
  for (const auto& [k, v] : items) {
    if (same_key(k, key)) return &v;
  }
  return nullptr;
}

void Dict::set(Value key, Value value) {
  for (auto& [k, v] : items) {
    if (same_key(k, key)) {
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

// Code points that Python's str.isprintable() rejects and repr() escapes: controls (Cc), format characters (Cf),
// separators other than ' ' (Zs, Zl, Zp) and private use (Co), as of Unicode 14. Unassigned code points (Cn),
// which Python escapes too, are printed as they are.
bool is_printable(uint32_t cp) {
  static const std::pair<uint32_t, uint32_t> kNonPrintable[] = {
      {0x0, 0x1f},         {0x7f, 0xa0},       {0xad, 0xad},       {0x600, 0x605},     {0x61c, 0x61c},
      {0x6dd, 0x6dd},      {0x70f, 0x70f},     {0x890, 0x891},     {0x8e2, 0x8e2},     {0x1680, 0x1680},
      {0x180e, 0x180e},    {0x2000, 0x200f},   {0x2028, 0x202f},   {0x205f, 0x2064},   {0x2066, 0x206f},
      {0x3000, 0x3000},    {0xe000, 0xf8ff},   {0xfeff, 0xfeff},   {0xfff9, 0xfffb},   {0x110bd, 0x110bd},
      {0x110cd, 0x110cd},  {0x13430, 0x13438}, {0x1bca0, 0x1bca3}, {0x1d173, 0x1d17a}, {0xe0001, 0xe0001},
      {0xe0020, 0xe007f},  {0xf0000, 0xffffd}, {0x100000, 0x10fffd}};
  for (const auto& [lo, hi] : kNonPrintable) {
    if (cp >= lo && cp <= hi) return false;
  }
  return true;
}

std::string string_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    const size_t n = text::next_char(s, i, &cp);
    if (cp == '\\') out += "\\\\";
    else if (cp == '\n') out += "\\n";
    else if (cp == '\r') out += "\\r";
    else if (cp == '\t') out += "\\t";
    else if (cp == uint32_t(quote)) out += std::string("\\") + quote;
    else if (is_printable(cp)) out.append(s, i, n);
    else {
      char buf[16];
      std::snprintf(buf, sizeof buf, cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x", unsigned(cp));
      out += buf;
    }
    i += n;
  }
  out += quote;
  return out;
}

}  // namespace

namespace {

// Builds a repr in one string, charging each item it visits and checking the text's size as it grows.
struct Printer {
  Interpreter& in;
  std::string out;
  size_t charged = 0;  // bytes of `out` already charged

  void item(const Value& v) {
    in.charge(1);
    repr(v);
    in.check_growth(out, &charged);
  }

  void items(const Dict& d) {
    bool first = true;
    for (const auto& [k, x] : d.items) {
      out += first ? "" : ", ";
      item(k);
      out += ": ";
      item(x);
      first = false;
    }
  }

  void repr(const Value& v) {
    switch (v.kind()) {
      case Value::Kind::undefined: out += "Undefined"; return;
      case Value::Kind::none: out += "None"; return;
      case Value::Kind::boolean: out += v.as_bool() ? "True" : "False"; return;
      case Value::Kind::integer: out += std::to_string(v.as_int()); return;
      case Value::Kind::floating: out += float_repr(v.as_double()); return;
      case Value::Kind::string: out += string_repr(v.as_string()); return;
      case Value::Kind::list: {
        out += v.is_tuple() ? "(" : "[";
        const List& xs = v.as_list();
        for (size_t i = 0; i < xs.size(); ++i) {
          if (i) out += ", ";
          item(xs[i]);
        }
        if (v.is_tuple() && xs.size() == 1) out += ",";
        out += v.is_tuple() ? ")" : "]";
        return;
      }
      case Value::Kind::dict:
        out += "{";
        items(v.as_dict());
        out += "}";
        return;
      case Value::Kind::ns:
        out += "<Namespace {";
        items(v.as_namespace().attrs);
        out += "}>";
        return;
      case Value::Kind::callable: out += "<function " + v.as_callable().name + ">"; return;
    }
  }
};

// The entry of `y` under key `k`: usually at the same place as in the dict it is compared with (dicts built the
// same way keep the same order), else found by a scan charged by its length.
const Value* matching_entry(const Dict& y, size_t i, const Value& k, Interpreter& in) {
  if (i < y.items.size() && same_key(y.items[i].first, k)) return &y.items[i].second;
  in.charge(y.items.size());
  return y.find(k);
}

}  // namespace

std::string to_str(const Value& v, Interpreter& in) {
  switch (v.kind()) {
    case Value::Kind::undefined: return "";
    case Value::Kind::string: return v.as_string();
    default: return to_repr(v, in);
  }
}

std::string to_repr(const Value& v, Interpreter& in) {
  Printer p{in, {}};
  p.item(v);
  return std::move(p.out);
}

bool equals(const Value& a, const Value& b, Interpreter& in) {
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
      if (a.is_tuple() != b.is_tuple()) return false;  // Python: [1] != (1,)
      const List &x = a.as_list(), &y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        in.charge(1);
        if (!equals(x[i], y[i], in)) return false;
      }
      return true;
    }
    case Value::Kind::dict: {
      const Dict &x = a.as_dict(), &y = b.as_dict();
      if (x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i) {
        in.charge(1);
        const Value* w = matching_entry(y, i, x.items[i].first, in);
        if (!w || !equals(x.items[i].second, *w, in)) return false;
      }
      return true;
    }
    case Value::Kind::ns: return &a.as_namespace() == &b.as_namespace();
    case Value::Kind::callable: return &a.as_callable() == &b.as_callable();
    default: return false;
  }
}

bool less_than(const Value& a, const Value& b, bool* ok, Interpreter& in) {
  *ok = true;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const List &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      in.charge(1);
      if (equals(x[i], y[i], in)) continue;
      return less_than(x[i], y[i], ok, in);
    }
    return x.size() < y.size();
  }
  *ok = false;
  return false;
}

}  // namespace attnzoo::chat
