// Attribute, subscript and slice access; the methods of str, dict and list; the globals.
#include <algorithm>
#include <ctime>

#include "chat/builtins.h"
#include "chat/text.h"

namespace attnzoo::chat {
namespace {

std::optional<std::string> optional_string(Interpreter& in, const Value& v, const char* what) {
  if (v.is_none() || v.is_undefined()) return std::nullopt;
  if (!v.is_string()) in.fail(std::string(what) + " must be a string or None, not " + v.type_name());
  return v.as_string();
}

int64_t int_arg(Interpreter& in, const Value& v, const char* what) {
  if (!v.is_int() && !v.is_bool()) in.fail(std::string(what) + " must be an integer, not " + v.type_name());
  return v.as_int();
}

const std::string& str_arg(Interpreter& in, const Value& v, const char* what) {
  if (!v.is_string()) in.fail(std::string(what) + " must be a string, not " + v.type_name());
  return v.as_string();
}

Value string_list(std::vector<std::string> parts) {
  List out;
  out.reserve(parts.size());
  for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  return Value::list(std::move(out));
}

// The part of `s` that find / count / startswith ... look at: Python's s[start:end] in code points (negative
// indices count from the end, out-of-range ones are clamped). nullopt when end < start: there, Python finds
// nothing, not even the empty string.
struct Window {
  std::string text;
  int64_t start;  // code point index of text[0] in s
};

std::optional<Window> search_window(Interpreter& in, const std::string& s, CallArgs& a) {
  const Value start_arg = a.take(1, "start"), end_arg = a.take(2, "end");
  const bool no_start = start_arg.is_none() || start_arg.is_undefined(), no_end = end_arg.is_none() || end_arg.is_undefined();
  if (no_start && no_end) return Window{s, 0};
  const int64_t n = int64_t(text::length(s));
  // CPython's ADJUST_INDICES: start is not clamped to the length, so 'abc'.find('', 4) is -1 (and 'abc'.find('', 3)
  // is 3).
  int64_t start = no_start ? 0 : int_arg(in, start_arg, "start");
  if (start < 0) start = std::max<int64_t>(start + n, 0);
  int64_t end = no_end ? n : int_arg(in, end_arg, "end");
  if (end > n) end = n;
  else if (end < 0) end = std::max<int64_t>(end + n, 0);
  if (end < start) return std::nullopt;
  const size_t b = text::byte_offset(s, size_t(start)), e = text::byte_offset(s, size_t(end));
  return Window{s.substr(b, e - b), start};
}

bool affix_match(Interpreter& in, const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const Value& a) {
    const std::string& x = str_arg(in, a, prefix ? "startswith() argument" : "endswith() argument");
    return s.size() >= x.size() && (prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0);
  };
  if (affix.is_list()) {
    for (const auto& a : affix.as_list()) {
      if (one(a)) return true;
    }
    return false;
  }
  return one(affix);
}

bool all_chars(const std::string& s, bool (*pred)(unsigned char)) {
  if (s.empty()) return false;
  for (unsigned char c : s) {
    if (!pred(c)) return false;
  }
  return true;
}

Value string_method(Interpreter& in, const std::string& s, const std::string& name, CallArgs& a) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    return Value::string(text::strip(s, optional_string(in, a.take(0, "chars"), "chars"), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    const auto sep = optional_string(in, a.take(0, "sep"), "sep");
    if (sep && sep->empty()) in.fail("empty separator");
    const int64_t maxsplit = int_arg(in, a.take(1, "maxsplit", Value::integer(-1)), "maxsplit");
    in.reserve_items(text::split_count(s, sep, maxsplit));
    return string_list(name == "split" ? text::split(s, sep, maxsplit) : text::rsplit(s, sep, maxsplit));
  }
  if (name == "splitlines") return string_list(text::splitlines(s, a.take(0, "keepends").truthy()));
  if (name == "startswith" || name == "endswith") {
    const Value affix = a.take(0, "prefix");
    const std::optional<Window> w = search_window(in, s, a);
    return Value::boolean(w && affix_match(in, w->text, affix, name == "startswith"));
  }
  if (name == "upper") return Value::string(text::upper(s));
  if (name == "lower") return Value::string(text::lower(s));
  if (name == "title") return Value::string(text::title(s));
  if (name == "capitalize") return Value::string(text::capitalize(s));
  if (name == "replace") {
    const std::string old = str_arg(in, a.take(0, "old"), "old");
    const std::string with = str_arg(in, a.take(1, "new"), "new");
    const int64_t count = int_arg(in, a.take(2, "count", Value::integer(-1)), "count");
    in.reserve_bytes(text::replaced_size(s, old, with, count));
    return Value::string(text::replace(s, old, with, count));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    const std::string sub = str_arg(in, a.take(0, "sub"), "sub");
    const std::optional<Window> w = search_window(in, s, a);
    const size_t at = w ? text::find(w->text, sub, name[0] == 'r') : std::string::npos;
    if (at == std::string::npos && (name == "index" || name == "rindex")) in.fail("substring not found");
    return Value::integer(at == std::string::npos ? -1 : w->start + text::char_index(w->text, at));
  }
  if (name == "count") {
    const std::string sub = str_arg(in, a.take(0, "sub"), "sub");
    const std::optional<Window> w = search_window(in, s, a);
    return Value::integer(w ? text::count(w->text, sub) : 0);
  }
  if (name == "join") {
    Value items = a.take(0, "iterable");
    if (!items.is_list()) in.fail("join() needs a list");
    std::string out;
    size_t charged = 0;
    bool first = true;
    for (const auto& x : items.as_list()) {
      if (!x.is_string()) in.fail(std::string("join(): expected str items, found ") + x.type_name());
      if (!first) out += s;
      out += x.as_string();
      first = false;
      in.check_growth(out, &charged);
    }
    return Value::string(std::move(out));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const std::string& x = str_arg(in, a.take(0, "affix"), "affix");
    if (name == "removeprefix" && s.compare(0, x.size(), x) == 0) return Value::string(s.substr(x.size()));
    if (name == "removesuffix" && !x.empty() && s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0) {
      return Value::string(s.substr(0, s.size() - x.size()));
    }
    return Value::string(s);
  }
  if (name == "isdigit") return Value::boolean(all_chars(s, [](unsigned char c) { return c >= '0' && c <= '9'; }));
  if (name == "isalpha") return Value::boolean(all_chars(s, [](unsigned char c) { return bool(std::isalpha(c)); }));
  if (name == "isalnum") return Value::boolean(all_chars(s, [](unsigned char c) { return bool(std::isalnum(c)); }));
  if (name == "isspace") return Value::boolean(!s.empty() && text::strip(s, std::nullopt, true, true).empty());
  if (name == "islower") return Value::boolean(text::lower(s) == s && text::upper(s) != s);
  if (name == "isupper") return Value::boolean(text::upper(s) == s && text::lower(s) != s);
  in.fail("'str' object has no method '" + name + "'");
}

Value dict_method(Interpreter& in, const Dict& d, const std::string& name, CallArgs& a) {
  if (name == "get") {
    const Value key = a.take(0, "key");
    const Value* v = d.find(key);
    return v ? *v : a.take(1, "default", Value::none());
  }
  List out;
  for (const auto& [k, v] : d.items) {
    if (name == "keys") out.push_back(k);
    else if (name == "values") out.push_back(v);
    else out.push_back(Value::list({k, v}, true));
  }
  return Value::list(std::move(out));
}

Value list_method(Interpreter& in, const List& l, const std::string& name, CallArgs& a) {
  const Value x = a.take(0, "value");
  int64_t n = 0;
  for (size_t i = 0; i < l.size(); ++i) {
    if (!equals(l[i], x, in)) continue;
    if (name == "index") return Value::integer(int64_t(i));
    ++n;
  }
  if (name == "index") in.fail(to_repr(x, in) + " is not in list");
  return Value::integer(n);
}

bool is_method(const Value& obj, const std::string& name) {
  static const char* kStr[] = {"strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith",
                               "upper", "lower", "title", "capitalize", "replace", "find", "rfind", "index", "rindex",
                               "count", "join", "removeprefix", "removesuffix", "isdigit", "isalpha", "isalnum",
                               "isspace", "islower", "isupper"};
  static const char* kDict[] = {"get", "keys", "values", "items"};
  static const char* kList[] = {"index", "count"};
  auto in = [&](const auto& names) {
    return std::any_of(std::begin(names), std::end(names), [&](const char* n) { return name == n; });
  };
  return (obj.is_string() && in(kStr)) || (obj.is_dict() && in(kDict)) || (obj.is_list() && in(kList));
}

bool is_unsafe(const Value& obj, const std::string& name) {
  static const char* kList[] = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse"};
  static const char* kDict[] = {"update", "pop", "popitem", "setdefault", "clear"};
  auto in = [&](const auto& names) {
    return std::any_of(std::begin(names), std::end(names), [&](const char* n) { return name == n; });
  };
  return (obj.is_list() && in(kList)) || (obj.is_dict() && in(kDict));
}

}  // namespace

Value get_attr(Interpreter& in, const Value& obj, const std::string& name) {
  if (obj.is_undefined()) in.fail("'" + obj.undefined_name() + "' is undefined (reading its attribute '" + name + "')");
  if (is_unsafe(obj, name)) {
    in.fail("access to attribute '" + name + "' of '" + obj.type_name() + "' object is unsafe (templates cannot modify lists or dicts)");
  }
  if (is_method(obj, name)) {
    return Value::callable(name, [obj, name](Interpreter& interp, CallArgs& a) {
      interp.charge(1 + Interpreter::size_steps(obj));
      if (obj.is_string()) return string_method(interp, obj.as_string(), name, a);
      if (obj.is_dict()) return dict_method(interp, obj.as_dict(), name, a);
      return list_method(interp, obj.as_list(), name, a);
    });
  }
  if (obj.is_dict()) {
    const Value* v = obj.as_dict().find(name);
    if (v) return *v;
  }
  if (obj.is_namespace()) {
    const Value* v = obj.as_namespace().attrs.find(name);
    if (v) return *v;
  }
  return Value::undefined(name);
}

Value get_item(Interpreter& in, const Value& obj, const Value& key) {
  if (obj.is_undefined()) in.fail("'" + obj.undefined_name() + "' is undefined (reading an item of it)");
  if (obj.is_dict() && !key.is_list() && !key.is_dict()) {
    const Value* v = obj.as_dict().find(key);
    if (v) return *v;
  }
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    if (obj.is_string()) in.charge(Interpreter::size_steps(obj));
    const int64_t n = obj.is_list() ? int64_t(obj.as_list().size()) : int64_t(text::length(obj.as_string()));
    int64_t i = key.as_int();
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::undefined("index " + std::to_string(key.as_int()));
    if (obj.is_list()) return obj.as_list()[size_t(i)];
    return Value::string(text::char_at(obj.as_string(), size_t(i)));
  }
  if (key.is_string()) return get_attr(in, obj, key.as_string());
  return Value::undefined(to_repr(key, in));
}

namespace {

bool is_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// Python's s[b:e:st] on UTF-8 text, b and e already clamped as for a sequence of s's code points. One walk over
// the bytes, no vector of characters: a unit step copies a byte range (charged by its bytes), other steps copy
// code point by code point (charged one step each, what that costs).
std::string string_slice(Interpreter& in, const std::string& s, int64_t b, int64_t e, int64_t st, int64_t count) {
  if (count == 0) return "";
  size_t at = text::byte_offset(s, size_t(b));
  if (st == 1) {
    std::string out = s.substr(at, text::byte_offset(s, size_t(e)) - at);
    in.check_string(out);
    return out;
  }
  in.charge(uint64_t(count));
  std::string out;
  size_t charged = 0;
  for (int64_t k = 0; k < count; ++k) {
    size_t end = at + 1;
    while (end < s.size() && is_continuation(s[end])) ++end;
    out.append(s, at, end - at);
    for (int64_t moved = 0; k + 1 < count && moved < (st > 0 ? st : -st); ++moved) {
      if (st > 0) {
        do ++at; while (at < s.size() && is_continuation(s[at]));
      } else {
        do --at; while (at > 0 && is_continuation(s[at]));
      }
    }
    if ((k & 0xffff) == 0xffff) in.check_growth(out, &charged);
  }
  in.check_growth(out, &charged);
  return out;
}

}  // namespace

Value get_slice(Interpreter& in, const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) in.fail("'" + obj.undefined_name() + "' is undefined (slicing it)");
  if (!obj.is_list() && !obj.is_string()) in.fail(std::string("'") + obj.type_name() + "' object is not subscriptable");
  in.charge(Interpreter::size_steps(obj));
  const int64_t n = obj.is_list() ? int64_t(obj.as_list().size()) : int64_t(text::length(obj.as_string()));
  auto index = [&](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_none() || v.is_undefined()) return std::nullopt;
    return int_arg(in, v, what);
  };
  const int64_t st = index(step, "slice step").value_or(1);
  if (st == 0) in.fail("slice step cannot be zero");
  const int64_t lower = st > 0 ? 0 : -1, upper = st > 0 ? n : n - 1;
  auto clamp = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t x = *v;
    if (x < 0) x = std::max(x + n, lower);
    else x = std::min(x, upper);
    return x;
  };
  const int64_t b = clamp(index(start, "slice start"), st > 0 ? lower : upper);
  const int64_t e = clamp(index(stop, "slice stop"), st > 0 ? upper : lower);
  // Counted, not stepped to the end: b + st may overflow for a huge step.
  const int64_t count = st > 0 ? (e > b ? (e - b - 1) / st + 1 : 0) : (b > e ? (b - e - 1) / -st + 1 : 0);
  if (obj.is_string()) return Value::string(string_slice(in, obj.as_string(), b, e, st, count));
  List items;
  items.reserve(size_t(count));
  for (int64_t k = 0; k < count; ++k) items.push_back(obj.as_list()[size_t(b + k * st)]);
  return Value::list(std::move(items), obj.is_tuple());
}

bool contains(Interpreter& in, const Value& container, const Value& item) {
  in.charge(Interpreter::size_steps(container));
  if (container.is_string()) {
    if (!item.is_string()) in.fail(std::string("'in <string>' requires a string as left operand, not ") + item.type_name());
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_list()) {
    return std::any_of(container.as_list().begin(), container.as_list().end(), [&](const Value& x) { return equals(x, item, in); });
  }
  if (container.is_dict()) return container.as_dict().find(item) != nullptr;
  if (container.is_undefined()) return false;
  in.fail(std::string("argument of type '") + container.type_name() + "' is not iterable");
}

namespace {

Dict keyword_dict(Interpreter& in, CallArgs& a, const char* what) {
  Dict d;
  if (!a.args.empty()) {
    if (a.args.size() > 1 || !a.args[0].is_dict()) in.fail(std::string(what) + "() takes one dict or keyword arguments");
    d = a.args[0].as_dict();
  }
  for (auto& [k, v] : a.kwargs) {
    if (v.is_namespace() || v.is_callable()) in.fail(std::string(what) + "(): cannot hold a " + v.type_name());
    d.set(k, v);
  }
  return d;
}

}  // namespace

Value global(const std::string& name) {
  if (name == "range") {
    return Value::callable(name, [](Interpreter& in, CallArgs& a) {
      if (a.args.empty() || a.args.size() > 3 || !a.kwargs.empty()) in.fail("range() takes 1 to 3 integer arguments");
      int64_t start = 0, stop, step = 1;
      if (a.args.size() == 1) {
        stop = int_arg(in, a.args[0], "range() argument");
      } else {
        start = int_arg(in, a.args[0], "range() argument");
        stop = int_arg(in, a.args[1], "range() argument");
        if (a.args.size() == 3) step = int_arg(in, a.args[2], "range() argument");
      }
      if (step == 0) in.fail("range() arg 3 must not be zero");
      // 128-bit: stop - start overflows 64 bits for ranges such as range(-2**63, 2**63 - 1).
      const __int128 span = step > 0 ? __int128(stop) - start : __int128(start) - stop;
      const __int128 stride = step > 0 ? __int128(step) : -__int128(step);
      const __int128 n = span <= 0 ? 0 : (span - 1) / stride + 1;
      in.reserve_items(uint64_t(std::min<__int128>(n, __int128(UINT64_MAX))));
      List out;
      out.reserve(size_t(n));
      for (__int128 k = 0; k < n; ++k) out.push_back(Value::integer(int64_t(start + k * step)));
      return Value::list(std::move(out));
    });
  }
  if (name == "dict") {
    return Value::callable(name, [](Interpreter& in, CallArgs& a) { return Value::dict(keyword_dict(in, a, "dict")); });
  }
  if (name == "namespace") {
    return Value::callable(name, [](Interpreter& in, CallArgs& a) {
      Dict d = keyword_dict(in, a, "namespace");
      for (const auto& [k, v] : d.items) {
        if (k.is_string() && !k.as_string().empty() && k.as_string()[0] == '_') {
          in.fail("namespace attributes may not start with '_': " + k.as_string());
        }
      }
      return Value::make_namespace(std::move(d));
    });
  }
  if (name == "raise_exception") {
    return Value::callable(name, [](Interpreter& in, CallArgs& a) -> Value {
      in.raise(a.args.empty() ? std::string() : to_str(a.args[0], in));
    });
  }
  if (name == "strftime_now") {
    return Value::callable(name, [](Interpreter& in, CallArgs& a) {
      const std::string& format = str_arg(in, a.take(0, "format"), "strftime_now() format");
      const std::time_t now = std::time(nullptr);
      std::tm local{};
      localtime_r(&now, &local);
      char buf[512];
      const size_t n = std::strftime(buf, sizeof buf, format.c_str(), &local);
      if (n == 0 && !format.empty()) in.fail("strftime_now(): the formatted date is empty or longer than 511 bytes");
      return Value::string(std::string(buf, n));
    });
  }
  return Value::undefined(name);
}

}  // namespace attnzoo::chat
