// Expressions: Jinja2's precedence climbing (jinja2/parser.py), from the conditional expression down to
// literals, with filters, tests, calls and subscripts bound tightest.
#include <algorithm>

#include "chat/builtins.h"
#include "chat/parser_impl.h"

namespace attnzoo::chat::parsing {

// Records the depth of a finished node (its children are finished) and refuses trees deeper than max_nesting:
// operator chains, attribute paths and filter chains are built by loops, not recursion, so this is what keeps
// evaluating and destroying an expression from recursing without bound.
ExprPtr Parser::seal(ExprPtr e) {
  int d = 0;
  for (const Expr* c : {e->a.get(), e->b.get(), e->c.get()}) d = c ? std::max(d, c->depth) : d;
  for (const auto& c : e->items) d = c ? std::max(d, c->depth) : d;
  for (const auto& kw : e->kwargs) d = std::max(d, kw.second->depth);
  e->depth = d + 1;
  if (e->depth > max_nesting_) {
    fail_at_node(*e, "expression nested deeper than " + std::to_string(max_nesting_) + " levels");
  }
  return e;
}

bool Parser::tuple_end(const char* extra) const {
  if (cur().kind == TK::var_end || cur().kind == TK::block_end || cur().kind == TK::eof) return true;
  if (is_op(")")) return true;
  return extra && is_name(extra);
}

ExprPtr Parser::parse_tuple(bool with_condexpr, const char* extra_end, bool explicit_parens) {
  const Token& start = cur();
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  for (;;) {
    if (!items.empty()) expect_op(",");
    if (tuple_end(extra_end)) break;
    items.push_back(parse_expression(with_condexpr));
    if (is_op(",")) is_tuple = true;
    else break;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) fail("expected an expression, found " + describe(cur()));
  }
  ExprPtr e = make(Expr::Kind::tuple, start);
  e->items = std::move(items);
  return seal(std::move(e));
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  Nest nest(*this);
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr Parser::parse_condexpr() {
  ExprPtr e = parse_or();
  while (is_name("if")) {
    const Token t = cur();
    next();
    ExprPtr node = make(Expr::Kind::cond, t);
    node->a = parse_or();
    node->b = std::move(e);
    if (skip_name("else")) node->c = parse_condexpr();
    e = seal(std::move(node));
  }
  return e;
}

ExprPtr Parser::binary(const Token& t, std::string op, ExprPtr l, ExprPtr r) {
  ExprPtr e = make(Expr::Kind::binary, t);
  e->name = std::move(op);
  e->a = std::move(l);
  e->b = std::move(r);
  return seal(std::move(e));
}

ExprPtr Parser::parse_not() {
  if (is_name("not")) {
    Nest nest(*this);
    const Token t = cur();
    next();
    ExprPtr e = make(Expr::Kind::unary, t);
    e->name = "not";
    e->a = parse_not();
    return seal(std::move(e));
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  const Token start = cur();
  ExprPtr first = parse_math1();
  ExprPtr e;
  for (;;) {
    std::string op;
    if (cur().kind == TK::op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                 cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
      op = cur().text;
      next();
    } else if (is_name("in")) {
      op = "in";
      next();
    } else if (is_name("not") && peek().kind == TK::name && peek().text == "in") {
      op = "notin";
      next();
      next();
    } else {
      break;
    }
    if (!e) {
      e = make(Expr::Kind::compare, start);
      e->a = std::move(first);
    }
    e->ops.push_back(op);
    e->items.push_back(parse_math1());
  }
  return e ? seal(std::move(e)) : std::move(first);
}

// Left-associative binary operators of one precedence level: `operand op operand op ...`.
ExprPtr Parser::left_assoc(std::initializer_list<const char*> ops, bool keywords, ExprPtr (Parser::*operand)()) {
  ExprPtr e = (this->*operand)();
  for (;;) {
    const char* op = nullptr;
    for (const char* o : ops) {
      if (keywords ? is_name(o) : is_op(o)) op = o;
    }
    if (!op) return e;
    const Token t = cur();
    next();
    e = binary(t, op, std::move(e), (this->*operand)());
  }
}

ExprPtr Parser::parse_or() { return left_assoc({"or"}, true, &Parser::parse_and); }
ExprPtr Parser::parse_and() { return left_assoc({"and"}, true, &Parser::parse_not); }
ExprPtr Parser::parse_math1() { return left_assoc({"+", "-"}, false, &Parser::parse_concat); }
ExprPtr Parser::parse_concat() { return left_assoc({"~"}, false, &Parser::parse_math2); }
ExprPtr Parser::parse_math2() { return left_assoc({"*", "/", "//", "%"}, false, &Parser::parse_pow); }
ExprPtr Parser::parse_pow() { return left_assoc({"**"}, false, &Parser::parse_filtered_unary); }
ExprPtr Parser::parse_filtered_unary() { return parse_unary(true); }

ExprPtr Parser::parse_unary(bool with_filter) {
  Nest nest(*this);
  const Token t = cur();
  ExprPtr e;
  if (is_op("-") || is_op("+")) {
    next();
    e = make(Expr::Kind::unary, t);
    e->name = t.text;
    e->a = parse_unary(false);
    e = seal(std::move(e));
  } else {
    e = parse_primary();
  }
  e = parse_postfix(std::move(e));
  if (with_filter) e = parse_filter_expr(std::move(e));
  return e;
}

ExprPtr Parser::parse_primary() {
  const Token t = cur();
  switch (t.kind) {
    case TK::name: {
      next();
      ExprPtr e = make(Expr::Kind::literal, t);
      if (t.text == "true" || t.text == "True") e->value = Value::boolean(true);
      else if (t.text == "false" || t.text == "False") e->value = Value::boolean(false);
      else if (t.text == "none" || t.text == "None") e->value = Value::none();
      else {
        e->kind = Expr::Kind::name;
        e->name = t.text;
      }
      return e;
    }
    case TK::string: {
      std::string s;
      while (cur().kind == TK::string) {  // adjacent literals join, as in Python
        s += cur().text;
        next();
      }
      ExprPtr e = make(Expr::Kind::literal, t);
      e->value = Value::string(std::move(s));
      return e;
    }
    case TK::integer:
    case TK::floating: {
      next();
      ExprPtr e = make(Expr::Kind::literal, t);
      e->value = t.kind == TK::integer ? Value::integer(t.int_value) : Value::floating(t.float_value);
      return e;
    }
    case TK::op:
      if (t.text == "(") {
        next();
        ExprPtr e = parse_tuple(true, nullptr, true);
        expect_op(")");
        return e;
      }
      if (t.text == "[") {
        next();
        ExprPtr e = make(Expr::Kind::list, t);
        while (!skip_op("]")) {
          if (!e->items.empty()) expect_op(",");
          if (skip_op("]")) break;
          e->items.push_back(parse_expression(true));
        }
        return seal(std::move(e));
      }
      if (t.text == "{") {
        next();
        ExprPtr e = make(Expr::Kind::dict, t);
        while (!skip_op("}")) {
          if (!e->items.empty()) expect_op(",");
          if (skip_op("}")) break;
          e->items.push_back(parse_expression(true));
          expect_op(":");
          e->items.push_back(parse_expression(true));
        }
        return seal(std::move(e));
      }
      break;
    default: break;
  }
  fail("unexpected " + describe(t));
}

ExprPtr Parser::parse_postfix(ExprPtr e) {
  for (;;) {
    if (is_op(".") || is_op("[")) e = seal(parse_subscript(std::move(e)));
    else if (is_op("(")) e = seal(parse_call(std::move(e)));
    else return e;
  }
}

ExprPtr Parser::parse_filter_expr(ExprPtr e) {
  for (;;) {
    if (is_op("|")) e = seal(parse_filter_chain(std::move(e), true));
    else if (is_name("is")) e = seal(parse_test(std::move(e)));
    else if (is_op("(")) e = seal(parse_call(std::move(e)));
    else return e;
  }
}

ExprPtr Parser::parse_subscript(ExprPtr obj) {
  const Token t = cur();
  next();
  if (t.text == ".") {
    if (cur().kind == TK::name) {
      ExprPtr e = make(Expr::Kind::attr, t);
      e->name = cur().text;
      e->a = std::move(obj);
      next();
      return e;
    }
    if (cur().kind != TK::integer) fail("expected an attribute name after '.', found " + describe(cur()));
    ExprPtr e = make(Expr::Kind::item, t);
    e->a = std::move(obj);
    e->b = make(Expr::Kind::literal, cur());
    e->b->value = Value::integer(cur().int_value);
    next();
    return e;
  }
  // '[': an index or a slice
  ExprPtr parts[3];
  int part = 0;
  bool is_slice = false;
  while (!is_op("]")) {
    if (is_op(":")) {
      if (++part > 2) fail("a slice has at most three parts");
      is_slice = true;
      next();
      continue;
    }
    if (parts[part]) fail("expected ':' or ']' in a subscript, found " + describe(cur()));
    parts[part] = parse_expression(true);
  }
  next();
  ExprPtr e = make(is_slice ? Expr::Kind::slice : Expr::Kind::item, t);
  e->a = std::move(obj);
  if (is_slice) {
    for (auto& p : parts) e->items.push_back(std::move(p));
  } else {
    if (!parts[0]) fail_at(t, "empty subscript");
    e->b = std::move(parts[0]);
  }
  return e;
}

void Parser::parse_args(Expr& e) {
  expect_op("(");
  bool first = true;
  while (!skip_op(")")) {
    if (!first) expect_op(",");
    first = false;
    if (skip_op(")")) break;
    if (is_op("*") || is_op("**")) fail("*args and **kwargs in calls are not supported");
    if (cur().kind == TK::name && peek().kind == TK::op && peek().text == "=") {
      std::string key = cur().text;
      next();
      next();
      e.kwargs.emplace_back(std::move(key), parse_expression(true));
    } else {
      if (!e.kwargs.empty()) fail("a positional argument follows keyword arguments");
      e.items.push_back(parse_expression(true));
    }
  }
}

ExprPtr Parser::parse_call(ExprPtr callee) {
  ExprPtr e = make(Expr::Kind::call, cur());
  e->a = std::move(callee);
  parse_args(*e);
  return e;
}

std::string Parser::dotted_name() {
  std::string n = expect_name();
  while (is_op(".") && peek().kind == TK::name) {
    next();
    n += '.';
    n += expect_name();
  }
  return n;
}

ExprPtr Parser::parse_filter_chain(ExprPtr operand, bool one) {
  do {
    skip_op("|");
    const Token& nt = cur();
    ExprPtr e = make(Expr::Kind::filter, nt);
    e->name = dotted_name();
    if (!is_filter(e->name)) fail_at(nt, "no filter named '" + e->name + "'");
    if (is_op("(")) parse_args(*e);
    e->a = std::move(operand);
    operand = seal(std::move(e));
  } while (!one && is_op("|"));
  return operand;
}

ExprPtr Parser::parse_test(ExprPtr operand) {
  next();  // 'is'
  const bool negated = skip_name("not");
  const Token& nt = cur();
  ExprPtr e = make(Expr::Kind::test, nt);
  e->name = dotted_name();
  if (!is_test(e->name)) fail_at(nt, "no test named '" + e->name + "'");
  e->negated = negated;
  if (is_op("(")) {
    parse_args(*e);
  } else if ((cur().kind == TK::name || cur().kind == TK::string || cur().kind == TK::integer ||
              cur().kind == TK::floating || is_op("(") || is_op("[") || is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) fail("you cannot chain multiple tests with 'is'");
    e->items.push_back(parse_postfix(parse_primary()));
  }
  e->a = std::move(operand);
  return e;
}

}  // namespace attnzoo::chat::parsing
