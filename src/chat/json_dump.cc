// The tojson filter as transformers defines it: Python's json.dumps(x, ensure_ascii=False, indent=indent,
// separators=separators, sort_keys=sort_keys), so non-ASCII text stays as is and "<" is not HTML-escaped.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "chat/builtins.h"
#include "loader/json_writer.h"

namespace attnzoo::chat {
namespace {

void dump_string(const std::string& s, std::string& out) { json::append_string(out, s); }

struct Dumper {
  Interpreter& in;
  const std::string* indent;  // null: one line
  bool sort_keys;
  const std::string& item_sep;
  const std::string& key_sep;
  std::string out;
  size_t charged = 0;  // bytes of `out` already charged as work

  void newline(int level) {
    out += '\n';
    for (int i = 0; i < level; ++i) out += *indent;
  }

  void dump(const Value& v, int level) {
    in.charge(1);  // per item: shared lists make a value's items far more than its size
    in.check_growth(out, &charged);
    switch (v.kind()) {
      case Value::Kind::none: out += "null"; return;
      case Value::Kind::boolean: out += v.as_bool() ? "true" : "false"; return;
      case Value::Kind::integer: out += std::to_string(v.as_int()); return;
      case Value::Kind::floating: {
        const double d = v.as_double();
        out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : float_repr(d);
        return;
      }
      case Value::Kind::string: dump_string(v.as_string(), out); return;
      case Value::Kind::list: {
        const List& items = v.as_list();
        if (items.empty()) {
          out += "[]";
          return;
        }
        out += '[';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += item_sep;
          if (indent) newline(level + 1);
          dump(items[i], level + 1);
        }
        if (indent) newline(level);
        out += ']';
        return;
      }
      case Value::Kind::dict: {
        // json.dumps turns scalar keys into strings (1 -> "1", True -> "true", None -> "null").
        std::vector<std::pair<std::string, const Value*>> members;
        for (const auto& [k, x] : v.as_dict().items) {
          std::string key;
          if (k.is_string()) key = k.as_string();
          else if (k.is_bool()) key = k.as_bool() ? "true" : "false";
          else if (k.is_none()) key = "null";
          else if (k.is_int()) key = std::to_string(k.as_int());
          else if (k.is_float()) key = float_repr(k.as_double());
          else in.fail(std::string("tojson: keys must be str, int, float, bool or None, not ") + k.type_name());
          members.emplace_back(std::move(key), &x);
        }
        if (sort_keys) {
          std::stable_sort(members.begin(), members.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        }
        if (members.empty()) {
          out += "{}";
          return;
        }
        out += '{';
        for (size_t i = 0; i < members.size(); ++i) {
          if (i) out += item_sep;
          if (indent) newline(level + 1);
          dump_string(members[i].first, out);
          out += key_sep;
          dump(*members[i].second, level + 1);
        }
        if (indent) newline(level);
        out += '}';
        return;
      }
      default: in.fail(std::string("tojson: object of type ") + v.type_name() + " is not JSON serializable");
    }
  }
};

}  // namespace

std::string to_json(Interpreter& in, const Value& v, int indent, bool sort_keys, const std::string& item_sep,
                    const std::string& key_sep) {
  const std::string indent_text(size_t(std::max(indent, 0)), ' ');
  Dumper d{in, indent >= 0 ? &indent_text : nullptr, sort_keys, item_sep, key_sep, {}};
  d.dump(v, 0);
  in.check_growth(d.out, &d.charged);
  return std::move(d.out);
}

}  // namespace attnzoo::chat
