#pragma once
// What templates can call: filters, tests, the methods of str / dict / list, attribute and subscript access, and
// the globals transformers provides (range, dict, namespace, raise_exception, strftime_now). Semantics follow
// Python and Jinja2 3.1 in the ImmutableSandboxedEnvironment transformers renders with: lists and dicts cannot
// be modified, so their mutating methods fail as "unsafe".
#include <string>
#include <string_view>

#include "chat/interpreter.h"
#include "chat/value.h"

namespace attnzoo::chat {

bool is_filter(std::string_view name);
bool is_test(std::string_view name);
Value apply_filter(Interpreter& in, const std::string& name, Value v, CallArgs& args);
bool apply_test(Interpreter& in, const std::string& name, const Value& v, CallArgs& args);

// `obj.name` (Jinja: the attribute first, so dict.items is the method, then the item) and `obj[key]` (the item
// first, then the attribute). Missing ones give Undefined; anything on Undefined fails naming it.
Value get_attr(Interpreter& in, const Value& obj, const std::string& name);
Value get_item(Interpreter& in, const Value& obj, const Value& key);
Value get_slice(Interpreter& in, const Value& obj, const Value& start, const Value& stop, const Value& step);
// A global name (range, dict, namespace, ...), or Undefined(name).
Value global(const std::string& name);

// Shared by the operators and the builtins.
bool contains(Interpreter& in, const Value& container, const Value& item);
// a op b for + - * / // % ** (Python's semantics; 64-bit integer overflow is an error).
Value arithmetic(Interpreter& in, const std::string& op, const Value& a, const Value& b);
std::string to_json(Interpreter& in, const Value& v, int indent, bool sort_keys, const std::string& item_sep,
                    const std::string& key_sep);

}  // namespace attnzoo::chat
