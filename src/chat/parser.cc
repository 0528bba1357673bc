#include "chat/parser.h"

#include <algorithm>

#include "chat/builtins.h"
#include "chat/error.h"

namespace attnzoo::chat {
namespace {

using TK = Token::Kind;

class Parser {
 public:
  Parser(std::vector<Token> tokens, int max_nesting) : t_(std::move(tokens)), max_nesting_(max_nesting) {}

  Body parse_template() {
    std::string found;
    Body body = parse_body({}, &found);
    return body;
  }

 private:
  // Counts nesting on the way down so that hostile input cannot overflow the stack.
  struct Nest {
    Nest(Parser& p) : p(p) {
      if (++p.depth_ > p.max_nesting_) p.fail("expressions or blocks nested deeper than " + std::to_string(p.max_nesting_) + " levels");
    }
    ~Nest() { --p.depth_; }
    Parser& p;
  };

  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  void next() {
    if (i_ + 1 < t_.size()) ++i_;
  }

  [[noreturn]] void fail(const std::string& message) const { fail_at(cur(), message); }
  [[noreturn]] static void fail_at(const Token& t, const std::string& message) {
    throw TemplateError(TemplateError::Kind::syntax, t.line, t.column, message);
  }

  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TK::text: return "template text";
      case TK::var_begin: return "'{{'";
      case TK::var_end: return "end of print statement '}}'";
      case TK::block_begin: return "'{%'";
      case TK::block_end: return "end of statement block '%}'";
      case TK::name: return "'" + t.text + "'";
      case TK::string: return "a string";
      case TK::integer:
      case TK::floating: return "a number";
      case TK::op: return "'" + t.text + "'";
      case TK::eof: return "end of template";
    }
    return "?";
  }

  bool is_op(const char* op) const { return cur().kind == TK::op && cur().text == op; }
  bool is_name(const char* name) const { return cur().kind == TK::name && cur().text == name; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail(std::string("expected '") + op + "', found " + describe(cur()));
  }
  std::string expect_name() {
    if (cur().kind != TK::name) fail("expected a name, found " + describe(cur()));
    std::string n = cur().text;
    next();
    return n;
  }
  void expect_block_end() {
    if (cur().kind != TK::block_end) fail("expected end of statement block '%}', found " + describe(cur()));
    next();
  }

  static Stmt stmt(Stmt::Kind kind, const Token& t) {
    Stmt node;
    node.kind = kind;
    node.line = t.line;
    node.column = t.column;
    return node;
  }
  ExprPtr make(Expr::Kind kind, const Token& t) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = t.line;
    e->column = t.column;
    return e;
  }

  // ---- statements -----------------------------------------------------------------------------------------

  // Statements up to a block whose tag is one of `stops` (consumed: the tokens after the tag name are next).
  Body parse_body(const std::vector<std::string>& stops, std::string* found, const Token* opener = nullptr) {
    Nest nest(*this);
    Body body;
    for (;;) {
      const Token& t = cur();
      if (t.kind == TK::eof) {
        if (stops.empty()) return body;
        std::string want;
        for (const auto& s : stops) want += (want.empty() ? "'" : " or '") + s + "'";
        fail_at(opener ? *opener : t, "unexpected end of template: the block opened here needs " + want);
      }
      if (t.kind == TK::text) {
        Stmt s = stmt(Stmt::Kind::text, t);
        s.name = t.text;
        body.push_back(std::move(s));
        next();
        continue;
      }
      if (t.kind == TK::var_begin) {
        next();
        Stmt s = stmt(Stmt::Kind::output, t);
        s.expr = parse_tuple(true);
        if (cur().kind != TK::var_end) fail("expected end of print statement '}}', found " + describe(cur()));
        next();
        body.push_back(std::move(s));
        continue;
      }
      if (t.kind != TK::block_begin) fail("unexpected " + describe(t));
      next();
      const Token& tag = cur();
      if (tag.kind != TK::name) fail("expected a tag name, found " + describe(tag));
      if (std::find(stops.begin(), stops.end(), tag.text) != stops.end()) {
        *found = tag.text;
        next();
        return body;
      }
      parse_statement(body);
    }
  }

  void parse_statement(Body& body) {
    const Token tag = cur();
    const std::string& n = tag.text;
    next();
    if (n == "if") return body.push_back(parse_if(tag));
    if (n == "for") return body.push_back(parse_for(tag));
    if (n == "set") return body.push_back(parse_set(tag));
    if (n == "macro") return body.push_back(parse_macro(tag));
    if (n == "call") return body.push_back(parse_call_block(tag));
    if (n == "filter") {
      Stmt s = stmt(Stmt::Kind::filter_block, tag);
      s.expr = parse_filter_chain(nullptr);
      expect_block_end();
      std::string found;
      s.body = parse_body({"endfilter"}, &found, &tag);
      expect_block_end();
      return body.push_back(std::move(s));
    }
    if (n == "break" || n == "continue") {
      if (loop_depth_ == 0) fail_at(tag, "'" + n + "' outside of a loop");
      expect_block_end();
      return body.push_back(stmt(n == "break" ? Stmt::Kind::break_ : Stmt::Kind::continue_, tag));
    }
    if (n == "generation") {  // transformers' assistant-mask marker: renders its body unchanged
      expect_block_end();
      std::string found;
      Body inner = parse_body({"endgeneration"}, &found, &tag);
      expect_block_end();
      for (auto& s : inner) body.push_back(std::move(s));
      return;
    }
    static const char* kEnds[] = {"endif", "endfor", "endset", "endmacro", "endcall", "endfilter", "elif", "else",
                                  "endgeneration", "endraw"};
    for (const char* e : kEnds) {
      if (n == e) fail_at(tag, "unexpected '" + n + "' (no open block it could close)");
    }
    fail_at(tag, "unknown or unsupported tag '" + n + "'");
  }

  Stmt parse_if(const Token& tag) {
    Stmt s = stmt(Stmt::Kind::if_, tag);
    ExprPtr cond = parse_tuple(true);
    expect_block_end();
    for (;;) {
      std::string found;
      Body body = parse_body({"elif", "else", "endif"}, &found, &tag);
      s.branches.emplace_back(std::move(cond), std::move(body));
      if (found == "elif") {
        cond = parse_tuple(true);
        expect_block_end();
        continue;
      }
      if (found == "else") {
        expect_block_end();
        s.else_body = parse_body({"endif"}, &found, &tag);
      }
      expect_block_end();
      return s;
    }
  }

  std::vector<std::string> parse_names() {
    std::vector<std::string> names;
    const bool parens = skip_op("(");
    do {
      names.push_back(expect_name());
    } while (skip_op(",") && cur().kind == TK::name);
    if (parens) expect_op(")");
    return names;
  }

  Stmt parse_for(const Token& tag) {
    Stmt s = stmt(Stmt::Kind::for_, tag);
    s.targets = parse_names();
    if (!skip_name("in")) fail("expected 'in' in a for loop, found " + describe(cur()));
    s.expr = parse_tuple(false, "if");
    if (skip_name("if")) s.cond = parse_expression(true);
    if (is_name("recursive")) fail("recursive for loops are not supported");
    expect_block_end();
    ++loop_depth_;
    std::string found;
    s.body = parse_body({"else", "endfor"}, &found, &tag);
    --loop_depth_;
    if (found == "else") {
      expect_block_end();
      s.else_body = parse_body({"endfor"}, &found, &tag);
    }
    expect_block_end();
    return s;
  }

  Stmt parse_set(const Token& tag) {
    Stmt s = stmt(Stmt::Kind::set, tag);
    if (cur().kind == TK::name && peek().kind == TK::op && peek().text == ".") {
      s.target_namespace = expect_name();
      next();
      s.name = expect_name();
    } else {
      s.targets = parse_names();
    }
    if (skip_op("=")) {
      s.expr = parse_tuple(true);
      expect_block_end();
      return s;
    }
    if (!s.target_namespace.empty() || s.targets.size() != 1) fail("a block set assigns to one plain name");
    s.kind = Stmt::Kind::set_block;
    if (is_op("|")) s.expr = parse_filter_chain(nullptr);
    expect_block_end();
    std::string found;
    s.body = parse_body({"endset"}, &found, &tag);
    expect_block_end();
    return s;
  }

  void parse_params(Stmt& s) {
    expect_op("(");
    while (!skip_op(")")) {
      if (!s.params.empty()) expect_op(",");
      if (skip_op(")")) break;
      s.params.push_back(expect_name());
      s.defaults.push_back(skip_op("=") ? parse_expression(true) : nullptr);
    }
  }

  Stmt parse_macro(const Token& tag) {
    Stmt s = stmt(Stmt::Kind::macro, tag);
    s.name = expect_name();
    parse_params(s);
    expect_block_end();
    const int loops = loop_depth_;
    loop_depth_ = 0;
    std::string found;
    s.body = parse_body({"endmacro"}, &found, &tag);
    loop_depth_ = loops;
    if (cur().kind == TK::name && cur().text == s.name) next();
    expect_block_end();
    return s;
  }

  Stmt parse_call_block(const Token& tag) {
    Stmt s = stmt(Stmt::Kind::call_block, tag);
    if (is_op("(")) parse_params(s);
    s.expr = parse_expression(true);
    if (s.expr->kind != Expr::Kind::call) fail_at(tag, "a call block needs a call expression");
    expect_block_end();
    std::string found;
    s.body = parse_body({"endcall"}, &found, &tag);
    expect_block_end();
    return s;
  }

  // ---- expressions ----------------------------------------------------------------------------------------

  bool tuple_end(const char* extra) const {
    if (cur().kind == TK::var_end || cur().kind == TK::block_end || cur().kind == TK::eof) return true;
    if (is_op(")")) return true;
    return extra && is_name(extra);
  }

  ExprPtr parse_tuple(bool with_condexpr, const char* extra_end = nullptr, bool explicit_parens = false) {
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
    return e;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    Nest nest(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    ExprPtr e = parse_or();
    while (is_name("if")) {
      const Token t = cur();
      next();
      ExprPtr node = make(Expr::Kind::cond, t);
      node->a = parse_or();
      node->b = std::move(e);
      if (skip_name("else")) node->c = parse_condexpr();
      e = std::move(node);
    }
    return e;
  }

  ExprPtr binary(const Token& t, std::string op, ExprPtr l, ExprPtr r) {
    ExprPtr e = make(Expr::Kind::binary, t);
    e->name = std::move(op);
    e->a = std::move(l);
    e->b = std::move(r);
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name("or")) {
      const Token t = cur();
      next();
      e = binary(t, "or", std::move(e), parse_and());
    }
    return e;
  }

  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name("and")) {
      const Token t = cur();
      next();
      e = binary(t, "and", std::move(e), parse_not());
    }
    return e;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      Nest nest(*this);
      const Token t = cur();
      next();
      ExprPtr e = make(Expr::Kind::unary, t);
      e->name = "not";
      e->a = parse_not();
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
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
    return e ? std::move(e) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token t = cur();
      next();
      e = binary(t, t.text, std::move(e), parse_concat());
    }
    return e;
  }

  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (is_op("~")) {
      const Token t = cur();
      next();
      e = binary(t, "~", std::move(e), parse_math2());
    }
    return e;
  }

  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token t = cur();
      next();
      e = binary(t, t.text, std::move(e), parse_pow());
    }
    return e;
  }

  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    while (is_op("**")) {
      const Token t = cur();
      next();
      e = binary(t, "**", std::move(e), parse_unary(true));
    }
    return e;
  }

  ExprPtr parse_unary(bool with_filter) {
    Nest nest(*this);
    const Token t = cur();
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      next();
      e = make(Expr::Kind::unary, t);
      e->name = t.text;
      e->a = parse_unary(false);
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
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
          return e;
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
          return e;
        }
        break;
      default: break;
    }
    fail("unexpected " + describe(t));
  }

  ExprPtr parse_postfix(ExprPtr e) {
    for (;;) {
      if (is_op(".") || is_op("[")) e = parse_subscript(std::move(e));
      else if (is_op("(")) e = parse_call(std::move(e));
      else return e;
    }
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    for (;;) {
      if (is_op("|")) e = parse_filter_chain(std::move(e), true);
      else if (is_name("is")) e = parse_test(std::move(e));
      else if (is_op("(")) e = parse_call(std::move(e));
      else return e;
    }
  }

  ExprPtr parse_subscript(ExprPtr obj) {
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

  void parse_args(Expr& e) {
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

  ExprPtr parse_call(ExprPtr callee) {
    ExprPtr e = make(Expr::Kind::call, cur());
    e->a = std::move(callee);
    parse_args(*e);
    return e;
  }

  std::string dotted_name() {
    std::string n = expect_name();
    while (is_op(".") && peek().kind == TK::name) {
      next();
      n += "." + expect_name();
    }
    return n;
  }

  // `| name(args) | name2 ...`; `operand` is null inside {% filter %} and block sets. With `one`, only one filter.
  ExprPtr parse_filter_chain(ExprPtr operand, bool one = false) {
    do {
      skip_op("|");
      const Token& nt = cur();
      ExprPtr e = make(Expr::Kind::filter, nt);
      e->name = dotted_name();
      if (!is_filter(e->name)) fail_at(nt, "no filter named '" + e->name + "'");
      if (is_op("(")) parse_args(*e);
      e->a = std::move(operand);
      operand = std::move(e);
    } while (!one && is_op("|"));
    return operand;
  }

  ExprPtr parse_test(ExprPtr operand) {
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

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int max_nesting_;
  int loop_depth_ = 0;
};

}  // namespace

Body parse(std::string_view source, int max_nesting, const LexOptions& options) {
  return Parser(tokenize(source, options), max_nesting).parse_template();
}

}  // namespace attnzoo::chat
