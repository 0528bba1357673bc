#pragma once
// The values a chat template computes with: Python's types as Jinja2 sees them (None, bool, int, float, str,
// list / tuple, dict with insertion order, Jinja's Undefined, namespace objects, callables). Lists and dicts are
// shared and immutable once built (transformers renders in Jinja's immutable sandbox); a namespace is the one
// mutable object, shared by reference as in Python.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "loader/json.h"

namespace attnzoo::chat {

class Value;
using List = std::vector<Value>;

// A dict in insertion order (Python 3.7+ semantics). Keys are strings (all of JSON's) or other scalars
// (templates write {0: 0, 512: 128}, never lists or dicts); keys that compare equal (1, 1.0, True) are one key, as
// in Python.
struct Dict {
  std::vector<std::pair<Value, Value>> items;
  const Value* find(std::string_view key) const;
  const Value* find(const Value& key) const;
  void set(Value key, Value value);  // replaces in place, or appends
  void set(std::string key, Value value);
};

struct Namespace {
  Dict attrs;
};

class Interpreter;
struct CallArgs;
using Builtin = std::function<Value(Interpreter&, CallArgs&)>;

struct Callable {
  std::string name;
  Builtin fn;
};

class Value {
 public:
  enum class Kind : uint8_t { undefined, none, boolean, integer, floating, string, list, dict, ns, callable };

  Value() = default;  // undefined
  static Value undefined(std::string name);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value floating(double d);
  static Value string(std::string s);
  static Value list(List items, bool tuple = false);
  static Value dict(Dict d);
  static Value make_namespace(Dict attrs);
  static Value callable(std::string name, Builtin fn);
  // JSON -> template values: object members in the order the text had them, integers as int unless written
  // with a fraction or an exponent (as Python's json module reads them).
  static Value from_json(const json::Value& v);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::undefined; }
  bool is_none() const { return kind_ == Kind::none; }
  bool is_bool() const { return kind_ == Kind::boolean; }
  bool is_int() const { return kind_ == Kind::integer; }
  bool is_float() const { return kind_ == Kind::floating; }
  bool is_number() const { return kind_ == Kind::integer || kind_ == Kind::floating || kind_ == Kind::boolean; }
  bool is_string() const { return kind_ == Kind::string; }
  bool is_list() const { return kind_ == Kind::list; }
  bool is_tuple() const { return kind_ == Kind::list && tuple_; }
  bool is_dict() const { return kind_ == Kind::dict; }
  bool is_namespace() const { return kind_ == Kind::ns; }
  bool is_callable() const { return kind_ == Kind::callable; }

  bool as_bool() const { return bool_; }
  int64_t as_int() const { return kind_ == Kind::boolean ? int64_t(bool_) : int_; }
  double as_double() const { return kind_ == Kind::floating ? double_ : double(as_int()); }
  const std::string& as_string() const { return *string_; }
  const List& as_list() const { return *list_; }
  const Dict& as_dict() const { return *dict_; }
  Namespace& as_namespace() const { return *ns_; }
  const Callable& as_callable() const { return *fn_; }
  // The name an undefined value was looked up under (for "'x' is undefined").
  const std::string& undefined_name() const { return *string_; }
  // Lists and dicts inside each other: 0 for scalars, 1 + the deepest item for a list or dict. Bounded by the
  // interpreter, so printing, comparing and destroying a value never recurses deeply.
  int depth() const { return depth_; }

  bool truthy() const;
  const char* type_name() const;  // Python's: 'str', 'dict', 'NoneType', ...

 private:
  Kind kind_ = Kind::undefined;
  bool bool_ = false;
  bool tuple_ = false;
  int64_t int_ = 0;
  double double_ = 0;
  uint16_t depth_ = 0;
  std::shared_ptr<const std::string> string_ = empty_string();  // shared: copying a value never copies text
  std::shared_ptr<const List> list_;
  std::shared_ptr<const Dict> dict_;
  std::shared_ptr<Namespace> ns_;
  std::shared_ptr<const Callable> fn_;
  static const std::shared_ptr<const std::string>& empty_string();
};

// Python's str() / repr() of a value (str of a list shows its items' repr: ['a', 1]). Lists share their items,
// so a small value can stand for billions of them ([[[0] * 1000] * 1000] * 1000): walking one charges `in` a step
// per item and keeps the text within its output limit, ending such a walk with a limit error.
std::string to_str(const Value& v, Interpreter& in);
std::string to_repr(const Value& v, Interpreter& in);
std::string float_repr(double d);

// Python ==, and < for the types that order (numbers, strings, lists); `ok` false when they do not compare.
// Charged to `in` a step per item compared, as printing is.
bool equals(const Value& a, const Value& b, Interpreter& in);
bool less_than(const Value& a, const Value& b, bool* ok, Interpreter& in);

}  // namespace attnzoo::chat
