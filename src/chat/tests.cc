// Jinja2 3.1's built-in tests (jinja2/tests.py): `x is defined`, `x is none`, `x is divisibleby 3`, ...
#include <algorithm>

#include "chat/builtins.h"
#include "chat/text.h"

namespace attnzoo::chat {
namespace {

const char* kTests[] = {"defined", "undefined", "none", "boolean", "true", "false", "integer", "float", "number",
                        "string", "mapping", "iterable", "sequence", "callable", "sameas", "escaped", "in", "eq",
                        "equalto", "==", "ne", "!=", "lt", "lessthan", "<", "le", "<=", "gt", "greaterthan", ">",
                        "ge", ">=", "even", "odd", "divisibleby", "lower", "upper", "filter", "test"};

}  // namespace

bool is_test(std::string_view name) {
  return std::any_of(std::begin(kTests), std::end(kTests), [&](const char* t) { return name == t; });
}

bool apply_test(Interpreter& in, const std::string& name, const Value& v, CallArgs& a) {
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (name == "sequence") return v.is_list() || v.is_dict() || v.is_string();
  if (name == "callable") return v.is_callable();
  if (name == "escaped") return false;
  if (name == "lower" || name == "upper") {
    const std::string s = to_str(v, in);
    return name == "lower" ? text::lower(s) == s && text::upper(s) != s : text::upper(s) == s && text::lower(s) != s;
  }
  if (name == "filter") return v.is_string() && is_filter(v.as_string());
  if (name == "test") return v.is_string() && is_test(v.as_string());
  if (name == "even" || name == "odd") {
    if (!v.is_int() && !v.is_bool()) in.fail("test '" + name + "' needs an integer");
    return (v.as_int() % 2 == 0) == (name == "even");
  }
  if (a.args.empty()) in.fail("test '" + name + "' needs an argument");
  const Value& x = a.args[0];
  if (name == "sameas") {
    if (v.kind() != x.kind()) return false;
    if (v.is_none() || v.is_undefined()) return true;
    if (v.is_bool() || v.is_int()) return v.as_int() == x.as_int();
    return (v.is_string() || v.is_float()) && equals(v, x, in);
  }
  if (name == "in") return contains(in, x, v);
  if (name == "eq" || name == "equalto" || name == "==") return equals(v, x, in);
  if (name == "ne" || name == "!=") return !equals(v, x, in);
  if (name == "divisibleby") {
    if (!v.is_int() && !v.is_bool()) in.fail("test 'divisibleby' needs an integer");
    if (!x.is_int() || x.as_int() == 0) in.fail("divisibleby needs a non-zero integer");
    return x.as_int() == -1 || v.as_int() % x.as_int() == 0;
  }
  bool ok;
  bool r;
  if (name == "lt" || name == "lessthan" || name == "<") r = less_than(v, x, &ok, in);
  else if (name == "gt" || name == "greaterthan" || name == ">") r = less_than(x, v, &ok, in);
  else if (name == "le" || name == "<=") r = !less_than(x, v, &ok, in);
  else r = !less_than(v, x, &ok, in);
  if (!ok) in.fail("test '" + name + "': cannot compare " + v.type_name() + " and " + x.type_name());
  return r;
}

}  // namespace attnzoo::chat
