#pragma once
// The parsed template: expression and statement trees. Every node keeps the line and column it started at, so
// runtime errors can say where they happened.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/value.h"

namespace attnzoo::chat {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    literal,    // value
    name,       // name
    list,       // items
    tuple,      // items
    dict,       // items: key, value, key, value...
    attr,       // a.name
    item,       // a[b]
    slice,      // a[items[0]:items[1]:items[2]] (null items are absent)
    unary,      // op a: "-", "+", "not"
    binary,     // a op b: + - * / // % ** ~ and or in notin
    compare,    // a, then (ops[i], items[i]) chained: == != < <= > >=
    cond,       // b if a else c (c may be null)
    call,       // a(items, kwargs)
    filter,     // a | name(items, kwargs); a is null inside {% filter %}
    test,       // a is [not] name(items)
  };
  Kind kind{};
  int line = 0, column = 0;
  int depth = 1;  // of the tree below and including this node
  Value value;
  std::string name;  // name / attribute / operator / filter / test
  ExprPtr a, b, c;
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // compare
  bool negated = false;          // test
};

struct Stmt;
using Body = std::vector<Stmt>;

struct Stmt {
  enum class Kind {
    text,         // name: literal template text
    output,       // {{ expr }}
    if_,          // branches, else_body
    for_,         // targets, expr (iterable), cond (optional filter), body, else_body
    set,          // targets (or ns + attr), expr
    set_block,    // targets, body, filters (expr chain with a null innermost operand, may be null)
    macro,        // name, params, defaults, body
    call_block,   // expr (the call), params (caller's), body
    filter_block, // expr (filter chain), body
    break_,
    continue_,
  };
  Kind kind{};
  int line = 0, column = 0;
  std::string name;   // text, macro name, or the attribute in `set ns.attr`
  std::string target_namespace;  // set ns.attr: "ns"
  std::vector<std::string> targets;
  ExprPtr expr, cond;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body, else_body;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // one per param, null when none
};

}  // namespace attnzoo::chat
