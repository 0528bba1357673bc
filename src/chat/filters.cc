// Jinja2 3.1's built-in filters (jinja2/filters.py) that chat templates use, plus transformers' tojson.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <unordered_set>

#include "chat/builtins.h"
#include "chat/text.h"

namespace attnzoo::chat {
namespace {

const char* kFilters[] = {"abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e",
                          "escape", "first", "float", "format", "indent", "int", "items", "join", "last", "length",
                          "list", "lower", "map", "max", "min", "reject", "rejectattr", "replace", "reverse", "round",
                          "safe", "select", "selectattr", "sort", "string", "sum", "title", "tojson", "trim", "unique",
                          "upper", "wordcount"};

int64_t length_of(Interpreter& in, const Value& v) {
  if (v.is_undefined()) return 0;
  if (v.is_string()) return int64_t(text::length(v.as_string()));
  if (v.is_list()) return int64_t(v.as_list().size());
  if (v.is_dict()) return int64_t(v.as_dict().items.size());
  in.fail(std::string("object of type '") + v.type_name() + "' has no len()");
}

// list(v): a string's characters, a dict's keys.
List as_list(Interpreter& in, const Value& v) {
  if (v.is_list()) return v.as_list();
  if (v.is_undefined()) return {};
  List out;
  if (v.is_string()) {
    in.reserve_items(text::length(v.as_string()));
    for (auto& c : code_points(v.as_string())) out.push_back(Value::string(std::move(c)));
  } else if (v.is_dict()) {
    for (const auto& [k, x] : v.as_dict().items) out.push_back(k);
  } else {
    in.fail(std::string("'") + v.type_name() + "' object is not iterable");
  }
  return out;
}

// Jinja's attribute getter for filters: "a.b.0" walks item lookups.
Value attribute_of(Interpreter& in, const Value& item, const std::string& path) {
  Value v = item;
  for (const auto& part : text::split(path, std::string("."), -1)) {
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    v = get_item(in, v, digits ? Value::integer(std::stoll(part)) : Value::string(part));
  }
  return v;
}

Value sort_key(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value::string(text::lower(v.as_string())) : v;
}

bool ordered_before(Interpreter& in, const Value& a, const Value& b) {
  bool ok;
  const bool r = less_than(a, b, &ok, in);
  if (!ok) in.fail(std::string("'<' not supported between instances of '") + a.type_name() + "' and '" + b.type_name() + "'");
  return r;
}

Value round_filter(Interpreter& in, const Value& v, CallArgs& a) {
  const int64_t precision = a.take(0, "precision", Value::integer(0)).as_int();
  const Value method_v = a.take(1, "method", Value::string("common"));
  const std::string method = method_v.is_string() ? method_v.as_string() : "";
  if (method != "common" && method != "floor" && method != "ceil") in.fail("round: method must be 'common', 'ceil' or 'floor'");
  if (!v.is_number()) in.fail(std::string("round: expected a number, got ") + v.type_name());
  if (method == "common") {
    if (!v.is_float()) return Value::integer(v.as_int());  // Python's round(int, n) stays an int
    if (precision < 0 || precision > 300) in.fail("round: precision out of range");
    char buf[400];
    std::snprintf(buf, sizeof buf, "%.*f", int(precision), v.as_double());  // correctly rounded, ties to even
    return Value::floating(std::strtod(buf, nullptr));
  }
  const double scale = std::pow(10.0, double(precision));
  const double x = v.as_double() * scale;
  return Value::floating((method == "floor" ? std::floor(x) : std::ceil(x)) / scale);
}

Value indent_filter(Interpreter& in, const Value& v, CallArgs& a) {
  const Value width = a.take(0, "width", Value::integer(4));
  const bool first = a.take(1, "first").truthy();
  const bool blank = a.take(2, "blank").truthy();
  if (!width.is_string()) in.reserve_bytes(uint64_t(std::max<int64_t>(0, width.as_int())));
  const std::string pad = width.is_string() ? width.as_string() : std::string(size_t(std::max<int64_t>(0, width.as_int())), ' ');
  const std::vector<std::string> lines = text::splitlines(to_str(v, in) + "\n");
  std::string out = first ? pad : "";
  size_t charged = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += '\n';
    if (i > 0 && (blank || !lines[i].empty())) out += pad;
    out += lines[i];
    in.check_growth(out, &charged);
  }
  return Value::string(std::move(out));
}

// printf-style "%s" formatting (the format filter): %s %r %d %i %f %%.
Value format_filter(Interpreter& in, const Value& v, CallArgs& a) {
  const std::string f = to_str(v, in);
  std::string out;
  size_t charged = 0;
  size_t next = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    in.check_growth(out, &charged);
    if (f[i] != '%') {
      out += f[i];
      continue;
    }
    if (++i >= f.size()) in.fail("format: incomplete format");
    if (f[i] == '%') {
      out += '%';
      continue;
    }
    if (next >= a.args.size()) in.fail("format: not enough arguments for format string");
    const Value& x = a.args[next++];
    if (f[i] == 's') out += to_str(x, in);
    else if (f[i] == 'r') out += to_repr(x, in);
    else if ((f[i] == 'd' || f[i] == 'i') && x.is_number()) out += std::to_string(x.is_float() ? int64_t(x.as_double()) : x.as_int());
    else if (f[i] == 'f' && x.is_number()) out += std::to_string(x.as_double());
    else in.fail(std::string("format: unsupported conversion '%") + f[i] + "' for " + x.type_name());
  }
  in.check_growth(out, &charged);
  return Value::string(std::move(out));
}

Value select_filter(Interpreter& in, const std::string& name, const Value& v, CallArgs& a) {
  const bool by_attr = name == "selectattr" || name == "rejectattr";
  const bool keep_if = name == "select" || name == "selectattr";
  std::string attr;
  size_t next = 0;
  if (by_attr) {
    if (a.args.empty() || !a.args[0].is_string()) in.fail(name + ": needs an attribute name");
    attr = a.args[next++].as_string();
  }
  std::string test;
  if (next < a.args.size()) {
    if (!a.args[next].is_string()) in.fail(name + ": the test name must be a string");
    test = a.args[next++].as_string();
    if (!is_test(test)) in.fail(name + ": no test named '" + test + "'");
  }
  List out;
  for (const Value& item : as_list(in, v)) {
    const Value x = by_attr ? attribute_of(in, item, attr) : item;
    bool r;
    if (test.empty()) {
      r = x.truthy();
    } else {
      CallArgs ta;
      ta.args.assign(a.args.begin() + long(next), a.args.end());
      r = apply_test(in, test, x, ta);
    }
    if (r == keep_if) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value map_filter(Interpreter& in, const Value& v, CallArgs& a) {
  List out;
  const List items = as_list(in, v);
  if (a.args.empty()) {
    Value attr = a.take(99, "attribute");
    if (!attr.is_string()) in.fail("map: needs attribute='name' or a filter name");
    const Value fallback = a.take(99, "default");
    for (const Value& item : items) {
      Value x = attribute_of(in, item, attr.as_string());
      out.push_back(x.is_undefined() && !fallback.is_undefined() ? fallback : x);
    }
    return Value::list(std::move(out));
  }
  if (!a.args[0].is_string() || !is_filter(a.args[0].as_string())) in.fail("map: no filter named " + to_repr(a.args[0], in));
  const std::string filter = a.args[0].as_string();
  for (const Value& item : items) {
    CallArgs fa;
    fa.args.assign(a.args.begin() + 1, a.args.end());
    fa.kwargs = a.kwargs;
    out.push_back(apply_filter(in, filter, item, fa));
  }
  return Value::list(std::move(out));
}

Value sort_filter(Interpreter& in, const std::string& name, const Value& v, CallArgs& a) {
  if (name == "dictsort") {
    if (!v.is_dict()) in.fail("dictsort: expected a dict");
    const bool cs = a.take(0, "case_sensitive").truthy();
    const Value by = a.take(1, "by", Value::string("key"));
    const bool reverse = a.take(2, "reverse").truthy();
    const size_t pos = by.is_string() && by.as_string() == "value" ? 1 : 0;
    List items;
    for (const auto& [k, x] : v.as_dict().items) items.push_back(Value::list({k, x}, true));
    std::stable_sort(items.begin(), items.end(), [&](const Value& p, const Value& q) {
      const Value kp = sort_key(p.as_list()[pos], cs), kq = sort_key(q.as_list()[pos], cs);
      return reverse ? ordered_before(in, kq, kp) : ordered_before(in, kp, kq);
    });
    return Value::list(std::move(items));
  }
  const bool reverse = name == "sort" && a.take(0, "reverse").truthy();
  const bool cs = a.take(name == "sort" ? 1 : 0, "case_sensitive").truthy();
  const Value attr = a.take(name == "sort" ? 2 : 1, "attribute");
  List items = as_list(in, v);
  auto key = [&](const Value& x) { return sort_key(attr.is_string() ? attribute_of(in, x, attr.as_string()) : x, cs); };
  if (name == "sort") {
    std::stable_sort(items.begin(), items.end(), [&](const Value& p, const Value& q) {
      return reverse ? ordered_before(in, key(q), key(p)) : ordered_before(in, key(p), key(q));
    });
    return Value::list(std::move(items));
  }
  if (name == "unique") {
    // Strings (the usual keys) are hashed; other keys are compared with each one kept so far, charged as work.
    List out, seen;
    std::unordered_set<std::string> seen_strings;
    for (const Value& x : items) {
      const Value k = key(x);
      bool is_new;
      if (k.is_string()) {
        is_new = seen_strings.insert(k.as_string()).second;
      } else {
        in.charge(seen.size());
        is_new = std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k, in); });
        if (is_new) seen.push_back(k);
      }
      if (is_new) out.push_back(x);
    }
    return Value::list(std::move(out));
  }
  if (items.empty()) return Value::undefined(name + " of an empty sequence");
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    const bool better = name == "min" ? ordered_before(in, key(items[i]), key(items[best]))
                                      : ordered_before(in, key(items[best]), key(items[i]));
    if (better) best = i;
  }
  return items[best];
}

}  // namespace

bool is_filter(std::string_view name) {
  return std::any_of(std::begin(kFilters), std::end(kFilters), [&](const char* f) { return name == f; });
}

Value apply_filter(Interpreter& in, const std::string& name, Value v, CallArgs& a) {
  in.charge(1 + Interpreter::size_steps(v));
  if (name == "safe" || name == "string") return Value::string(to_str(v, in));
  if (name == "default" || name == "d") {
    const Value fallback = a.take(0, "default_value", Value::string(""));
    const bool boolean = a.take(1, "boolean").truthy();
    return v.is_undefined() || (boolean && !v.truthy()) ? fallback : v;
  }
  if (name == "tojson") {
    if (a.take(0, "ensure_ascii").truthy()) in.fail("tojson: ensure_ascii=True is not supported");
    const Value indent = a.take(1, "indent", Value::none());
    if (!indent.is_none() && !indent.is_int()) in.fail("tojson: indent must be an integer or None");
    const Value seps = a.take(2, "separators", Value::none());
    const bool sort_keys = a.take(3, "sort_keys").truthy();
    std::string item_sep = indent.is_none() ? ", " : ",", key_sep = ": ";
    if (!seps.is_none()) {
      if (!seps.is_list() || seps.as_list().size() != 2 || !seps.as_list()[0].is_string() || !seps.as_list()[1].is_string()) {
        in.fail("tojson: separators must be a pair of strings");
      }
      item_sep = seps.as_list()[0].as_string();
      key_sep = seps.as_list()[1].as_string();
    }
    return Value::string(to_json(in, v, indent.is_none() ? -1 : int(std::clamp<int64_t>(indent.as_int(), 0, 1000)),
                                 sort_keys, item_sep, key_sep));
  }
  if (name == "length" || name == "count") return Value::integer(length_of(in, v));
  if (name == "trim") {
    const Value chars = a.take(0, "chars", Value::none());
    return Value::string(text::strip(to_str(v, in), chars.is_string() ? std::optional<std::string>(chars.as_string()) : std::nullopt, true, true));
  }
  if (name == "upper") return Value::string(text::upper(to_str(v, in)));
  if (name == "lower") return Value::string(text::lower(to_str(v, in)));
  if (name == "capitalize") return Value::string(text::capitalize(to_str(v, in)));
  if (name == "title") return Value::string(text::jinja_title(to_str(v, in)));
  if (name == "replace") {
    const Value count = a.take(2, "count", Value::none());
    const std::string s = to_str(v, in), old = to_str(a.take(0, "old"), in), with = to_str(a.take(1, "new"), in);
    const int64_t n = count.is_none() ? -1 : count.as_int();
    in.reserve_bytes(text::replaced_size(s, old, with, n));
    return Value::string(text::replace(s, old, with, n));
  }
  if (name == "join") {
    const std::string sep = to_str(a.take(0, "d", Value::string("")), in);
    const Value attr = a.take(1, "attribute");
    std::string out;
    size_t charged = 0;
    bool first = true;
    for (const Value& x : as_list(in, v)) {
      if (!first) out += sep;
      out += to_str(attr.is_string() ? attribute_of(in, x, attr.as_string()) : x, in);
      first = false;
      in.check_growth(out, &charged);
    }
    return Value::string(std::move(out));
  }
  if (name == "first" || name == "last") {
    const List items = as_list(in, v);
    if (items.empty()) return Value::undefined(name + " item of an empty sequence");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return Value::list(as_list(in, v));
  if (name == "reverse") {
    if (v.is_string()) return get_slice(in, v, Value::none(), Value::none(), Value::integer(-1));
    List items = as_list(in, v);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::list({});
    if (!v.is_dict()) in.fail("items: can only get item pairs from a mapping");
    List out;
    for (const auto& [k, x] : v.as_dict().items) out.push_back(Value::list({k, x}, true));
    return Value::list(std::move(out));
  }
  if (name == "int") {
    const Value fallback = a.take(0, "default", Value::integer(0));
    if (v.is_int() || v.is_bool()) return Value::integer(v.as_int());
    if (v.is_float()) return std::isfinite(v.as_double()) && std::fabs(v.as_double()) < 9.2e18 ? Value::integer(int64_t(v.as_double())) : fallback;
    if (v.is_string()) {  // Jinja: int(s), else int(float(s)), else the default
      const std::string s = text::strip(v.as_string(), std::nullopt, true, true);
      if (const auto digits = text::int_literal(s)) {
        errno = 0;
        const long long i = std::strtoll(digits->c_str(), nullptr, 10);
        if (errno == 0) return Value::integer(i);
      }
      if (const auto literal = text::float_literal(s)) {
        const double d = std::strtod(literal->c_str(), nullptr);
        if (std::isfinite(d) && std::fabs(d) < 9.2e18) return Value::integer(int64_t(d));
      }
    }
    return fallback;
  }
  if (name == "float") {
    const Value fallback = a.take(0, "default", Value::floating(0.0));
    if (v.is_number()) return Value::floating(v.as_double());
    if (v.is_string()) {
      const auto literal = text::float_literal(text::strip(v.as_string(), std::nullopt, true, true));
      if (literal) return Value::floating(std::strtod(literal->c_str(), nullptr));
    }
    return fallback;
  }
  if (name == "abs") {
    if (v.is_float()) return Value::floating(std::fabs(v.as_double()));
    if (!v.is_number()) in.fail(std::string("abs: bad operand type '") + v.type_name() + "'");
    if (v.as_int() == INT64_MIN) in.fail("integer overflow");
    return Value::integer(std::llabs(v.as_int()));
  }
  if (name == "round") return round_filter(in, v, a);
  if (name == "indent") return indent_filter(in, v, a);
  if (name == "format") return format_filter(in, v, a);
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") return select_filter(in, name, v, a);
  if (name == "map") return map_filter(in, v, a);
  if (name == "sort" || name == "dictsort" || name == "unique" || name == "min" || name == "max") return sort_filter(in, name, v, a);
  if (name == "attr") return get_attr(in, v, to_str(a.take(0, "name"), in));
  if (name == "sum") {
    const Value attr = a.take(0, "attribute");
    Value total = a.take(1, "start", Value::integer(0));
    for (const Value& x : as_list(in, v))
      total = arithmetic(in, "+", total, attr.is_string() ? attribute_of(in, x, attr.as_string()) : x);
    return total;
  }
  if (name == "wordcount") return Value::integer(int64_t(text::word_count(to_str(v, in))));
  if (name == "center") {
    const std::string s = to_str(v, in);
    const int64_t width = a.take(0, "width", Value::integer(80)).as_int();
    const int64_t n = int64_t(text::length(s));
    if (width <= n) return Value::string(s);
    in.reserve_bytes(uint64_t(width - n) + s.size());
    const int64_t left = (width - n) / 2 + ((width - n) & width & 1);
    return Value::string(std::string(size_t(left), ' ') + s + std::string(size_t(width - n - left), ' '));
  }
  if (name == "escape" || name == "e") {
    std::string out;
    for (char c : to_str(v, in)) {
      if (c == '&') out += "&amp;";
      else if (c == '<') out += "&lt;";
      else if (c == '>') out += "&gt;";
      else if (c == '"') out += "&#34;";
      else if (c == '\'') out += "&#39;";
      else out += c;
    }
    in.check_string(out);
    return Value::string(std::move(out));
  }
  if (name == "batch") {
    const int64_t n = a.take(0, "linecount").as_int();
    if (n <= 0) in.fail("batch: linecount must be positive");
    const Value fill = a.take(1, "fill_with", Value::none());
    const List items = as_list(in, v);
    const uint64_t partial = items.size() % uint64_t(n);
    in.reserve_items(items.size() + (fill.is_none() || partial == 0 ? 0 : uint64_t(n) - partial));
    List out, row;
    for (const Value& x : items) {
      row.push_back(x);
      if (int64_t(row.size()) == n) out.push_back(Value::list(std::exchange(row, {})));
    }
    if (!row.empty()) {
      while (!fill.is_none() && int64_t(row.size()) < n) row.push_back(fill);
      out.push_back(Value::list(std::move(row)));
    }
    return Value::list(std::move(out));
  }
  in.fail("no filter named '" + name + "'");
}

}  // namespace attnzoo::chat
